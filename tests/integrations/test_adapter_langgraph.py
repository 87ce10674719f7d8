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


def test_sync_invoke_with_a_durable_sqlite_checkpointer(tmp_path: Any) -> None:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    host = make_host()
    model = FakeChat(host=host, requests=[])
    with sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False) as conn:
        graph = stage_graph(host, model, [edit_file], checkpointer=SqliteSaver(conn))
        thread = {"configurable": {"thread_id": "t"}}
        out = graph.invoke({"session": host.session.id, "prompt": "Add a --greeting flag."}, thread)
        asked = []
        while "__interrupt__" in out:
            asked.append(out["__interrupt__"][0].value["tool"])
            out = graph.invoke(Command(resume=True), thread)
    assert asked == ["exit_plan_mode", "goto_stage", "goto_stage"]
    assert host.current_stage() == "verify" and out == {"session": "s1", "prompt": None}


def test_a_system_prompt_goes_in_front_of_fsm_stages_system_text() -> None:
    host = make_host(approve_all=True)
    model = FakeChat(host=host, requests=[])
    graph = stage_graph(host, model, [edit_file], system_prompt="Answer in French.")
    asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."}))
    systems = [r[0] or "" for r in model.requests]
    assert len(systems) == 5 and all(s.startswith("Answer in French.\n\n") for s in systems)
    assert_cache_safe(host, [s.removeprefix("Answer in French.\n\n") for s in systems],
                      [r[1] for r in model.requests])


def test_an_interrupt_whose_review_was_answered_elsewhere_is_not_asked_again() -> None:
    from fsm_stage.integrations.langgraph import waiting
    from fsm_stage.reviews import answer_review

    async def run() -> StageHost:
        host = make_host()
        graph, _model = build(host)
        thread = {"configurable": {"thread_id": "t"}}
        out = await graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."}, thread)
        assert [i.value["tool"] for i in waiting(host, out)] == ["exit_plan_mode"]
        # the reviewer answers in the CLI meanwhile (another writer of the same log)
        answer_review(host.session, out["__interrupt__"][0].value["review_id"], "keep",
                      feedback="split the plan", by="cli")
        assert waiting(host, out) == []  # the host does not ask the human a second time
        out = await graph.ainvoke({"session": host.session.id}, thread)  # go on from the log
        assert [i.value["tool"] for i in waiting(host, out)] == ["exit_plan_mode"]  # asked anew
        return host

    host = asyncio.run(run())
    answers = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert [(a["outcome"], a["by"]) for a in answers] == [("keep", "cli")]
    first = next(e.data["callId"] for e in host.session.events if e.type == "tool/call")
    assert "split the plan" in (host.recorded_result(first) or "")


def test_continue_after_a_crash_mid_turn(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from crash_rig import CRASH_EXIT, continue_after_crash, crashed_in_implement, user_texts_after_repair
    log = tmp_path / "s.jsonl"
    rig = Path(__file__).with_name("crash_rig.py")
    died = subprocess.run([sys.executable, str(rig), "langgraph", str(log)], capture_output=True, text=True)
    assert died.returncode == CRASH_EXIT, died.stderr
    host, output = continue_after_crash("langgraph", log)
    assert output == "Verified." and host.current_stage() == "verify"
    assert crashed_in_implement(host) and user_texts_after_repair(host) == ["Continue where you stopped."]
