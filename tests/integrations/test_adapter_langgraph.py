"""The LangGraph adapter (``stage_graph``) driven by LangChain's fake chat model: what the
model receives at every request, host tools through the ``ToolNode`` wrapper, reviews as
``interrupt`` / ``Command(resume=...)``, and a restart where only the log carries the state."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from adapter_rig import assert_cache_safe, edit_call, edit_file_result, make_host, next_move
from sdk_check import sdk

sdk("langgraph")
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from fsm_stage.integrations._host import StageHost  # noqa: E402
from fsm_stage.integrations.langgraph import stage_graph  # noqa: E402


class FakeChat(FakeMessagesListChatModel):
    """LangChain's fake chat model answering with ``next_move``; records every request."""

    host: Any = None
    responses: list[BaseMessage] = []  # noqa: RUF012 - pydantic fields
    requests: list[tuple[str | None, str, list[str]]] = []  # noqa: RUF012
    bound: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound = tools
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        system = messages[0].text if messages and messages[0].type == "system" else None
        self.requests.append((system, json.dumps(self.bound), [m.text for m in messages]))
        move, n = next_move(self.host), len(self.host.session.events)
        reply = AIMessage("Verified.") if move is None else AIMessage(
            "", tool_calls=[{"name": move[0], "args": move[1], "id": f"call_{n}"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def edit_file(path: str, text: str) -> str:
    """Write a file."""
    return edit_file_result(path, text)


def build(host: StageHost) -> tuple[Any, FakeChat]:
    model = FakeChat(host=host, requests=[])
    return stage_graph(host, model, [edit_file], checkpointer=InMemorySaver()), model


def test_prompt_and_tools_stay_byte_identical_across_light_stage_switches() -> None:
    host = make_host(approve_all=True)
    graph, model = build(host)
    out = asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."},
                                    {"configurable": {"thread_id": "t"}}))
    assert out == {"session": "s1", "prompt": None}  # the graph state is a handle, not a transcript
    assert_cache_safe(host, [r[0] for r in model.requests], [r[1] for r in model.requests])
    goto = next(t for t in json.loads(model.requests[0][1]) if t["function"]["name"] == "goto_stage")
    spec = next(s for s in host.runtime.tool_specs if s.name == "goto_stage")
    assert goto["function"]["parameters"] == spec.parameters
    assert any("Current stage: implement" in t for t in model.requests[2][2])
    assert host.recorded_result(edit_call(host)) == edit_file_result("cli.py", "--greeting")


def test_reviews_are_interrupts_and_a_new_graph_resumes_from_the_log() -> None:
    async def run() -> None:
        host = make_host()
        graph, _model = build(host)
        thread = {"configurable": {"thread_id": "t"}}
        out = await graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."}, thread)
        assert out["__interrupt__"][0].value["tool"] == "exit_plan_mode"
        assert out["__interrupt__"][0].value["kind"] == "plan"
        out = await graph.ainvoke(Command(resume=True), thread)
        assert out["__interrupt__"][0].value["tool"] == "goto_stage"
        # a new process: new host, new graph, empty checkpointer; the log is the only state
        host2 = StageHost.open(host.session.log, guards={"tests_written": True})
        graph2, _model2 = build(host2)
        [(_call, review_id, _answered)] = host2.pending_reviews()
        host2.answer(review_id, True)
        thread2 = {"configurable": {"thread_id": "fresh"}}
        out = await graph2.ainvoke({"session": host2.session.id}, thread2)
        out = await graph2.ainvoke(Command(resume={"approve": True}), thread2)  # implement -> verify
        assert "__interrupt__" not in out and host2.current_stage() == "verify"
        types = [e.type for e in host2.session.events]
        assert types.count("fsm/review/answer") == 3 and types[-1] == "turn/end"

    asyncio.run(run())


def test_resume_false_keeps_the_stage_with_feedback() -> None:
    async def run() -> StageHost:
        host = make_host()
        graph, _model = build(host)
        thread = {"configurable": {"thread_id": "t"}}
        await graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."}, thread)
        out = await graph.ainvoke(Command(resume={"approve": False, "feedback": "more detail"}), thread)
        assert out["__interrupt__"][0].value["tool"] == "exit_plan_mode"  # the model asks again
        return host

    host = asyncio.run(run())
    answers = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert answers[0]["outcome"] == "keep" and answers[0]["feedback"] == "more detail"
    assert host.plan is not None and host.plan.get(host.agent).active
