"""A host tool under an ``ask`` rule, in every adapter: its review is the framework's own approval
(pydantic-ai's deferred approval, a LangGraph interrupt, an Agents SDK interruption), the call is
logged with its review request, and a new process over the same log finds the waiting call,
records the answer and runs the tool exactly once (or tells the model it was refused)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from adapter_rig import ASK_GRAPH
from sdk_check import sdk

from fsm_stage.config import load_config_text
from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import SuspendingReviewChannel, review_state

PATCH = {"patch": "+--greeting"}


def _open(path: Path) -> StageHost:
    """A worker's host over the JSONL log at ``path`` (a new process opens it the same way)."""
    log = JsonlLog(path, header=SessionHeader("s-host", cwd=str(path.parent)))
    return StageHost.open(log, graph=load_config_text(ASK_GRAPH, "g.yaml"), plan_mode=False,
                          review=SuspendingReviewChannel())


def _restart(host: StageHost, path: Path) -> StageHost:
    """The worker exits (its log closed, the lock released); a new one opens the log."""
    host.session.log.close()  # type: ignore[attr-defined]
    return _open(path)


def _settled_once(host: StageHost, ran: list[Any], *, approved: bool) -> None:
    """One ``tool/call`` and one ``tool/result`` for the patch call, the tool run once when
    approved (never otherwise), and the review answered and no longer open."""
    types = [e.type for e in host.session.events]
    assert types.count("tool/call") == 1 and types.count("tool/result") == 1
    assert len(ran) == (1 if approved else 0)
    state = review_state(host.session)
    assert state.open == () and [a.outcome for a in state.answered.values()] == (
        ["approve"] if approved else ["keep"])


def _fresh() -> Path:
    return Path(tempfile.mkdtemp()) / "s.jsonl"


# --- pydantic-ai -----------------------------------------------------------------------------------


Calls = tuple[tuple[str, dict[str, str]], ...]


def _pydantic_agent(host: StageHost, ran: list[Any],
                    calls: Calls = (("call_patch", PATCH),)) -> tuple[Any, Any]:
    """An agent whose model calls apply_patch (``calls``: ``(call id, arguments)`` in one reply),
    then answers with the last result."""
    sdk("pydantic_ai")
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from fsm_stage.integrations.pydantic_ai import StageCapability

    def model(messages: list[Any], _info: Any) -> Any:
        returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(f"Done: {returned[-1].content}")])
        return ModelResponse(parts=[ToolCallPart("apply_patch", json.dumps(a), cid) for cid, a in calls])

    cap = StageCapability(host)
    agent: Any = Agent(FunctionModel(model), capabilities=[cap], output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        ran.append(patch)
        return "patched"

    return agent, cap


def test_pydantic_ai_a_host_tool_review_is_a_deferred_approval_that_survives_a_restart() -> None:
    from pydantic_ai import DeferredToolRequests

    path, ran = _fresh(), []
    host = _open(path)
    agent, _cap = _pydantic_agent(host, ran)
    out = agent.run_sync("Patch the CLI.").output
    assert isinstance(out, DeferredToolRequests) and [p.tool_name for p in out.approvals] == ["apply_patch"]
    assert out.metadata["call_patch"]["kind"] == "tool" and ran == []
    host2 = _restart(host, path)  # a new worker over the same log
    agent2, cap2 = _pydantic_agent(host2, ran)
    pending = cap2.pending()
    assert pending is not None and [p.tool_call_id for p in pending.approvals] == ["call_patch"]
    out = agent2.run_sync(message_history=cap2.message_history(), deferred_tool_results=cap2.results(pending))
    assert out.output == "Done: patched"
    _settled_once(host2, ran, approved=True)


def test_pydantic_ai_a_refused_host_tool_never_runs_and_the_model_is_told() -> None:
    path, ran = _fresh(), []
    agent, cap = _pydantic_agent(_open(path), ran)
    out = agent.run_sync("Patch the CLI.").output
    agent.run_sync(message_history=cap.message_history(),
                   deferred_tool_results=cap.results(out, approve=False, feedback="not on main"))
    _settled_once(cap.host, ran, approved=False)
    assert "not on main" in (cap.host.recorded_result("call_patch") or "")


# --- LangGraph -------------------------------------------------------------------------------------


def _langgraph(host: StageHost, ran: list[Any]) -> Any:
    sdk("langgraph")
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from fsm_stage.integrations.langgraph import stage_graph

    @tool
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        ran.append(patch)
        return "patched"

    return stage_graph(host, _lg_model(), [apply_patch], checkpointer=InMemorySaver())


def _lg_model() -> Any:
    """LangChain's fake chat model: calls apply_patch once, then answers with its result."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Chat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatResult:
            returned = [m for m in messages if isinstance(m, ToolMessage)]
            reply = AIMessage(f"Done: {returned[-1].text}") if returned else AIMessage(
                "", tool_calls=[{"name": "apply_patch", "args": PATCH, "id": "call_patch"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return Chat(responses=[])


def _lg_run(graph: Any, payload: Any) -> Any:
    return asyncio.run(graph.ainvoke(payload, {"configurable": {"thread_id": "t"}}))


def test_langgraph_a_host_tool_review_is_an_interrupt_and_a_new_graph_resumes_from_the_log() -> None:
    sdk("langgraph")

    path, ran = _fresh(), []
    host = _open(path)
    out = _lg_run(_langgraph(host, ran), {"session": host.session.id, "prompt": "Patch the CLI."})
    (pending,) = out["__interrupt__"]
    assert pending.value["kind"] == "tool" and pending.value["tool"] == "apply_patch" and ran == []
    assert pending.value["arguments"] == PATCH
    host2 = _restart(host, path)  # a new worker, a new graph and checkpointer: the answer via the log
    [(call, review_id, answered)] = host2.pending_reviews()
    assert call.id == "call_patch" and not answered
    host2.answer(review_id, True, by="bob")
    out = _lg_run(_langgraph(host2, ran), {"session": host2.session.id})
    assert "__interrupt__" not in out
    _settled_once(host2, ran, approved=True)
    assert host2.recorded_result("call_patch") == "patched"


def test_langgraph_a_resume_false_refuses_the_host_tool() -> None:
    sdk("langgraph")
    from langgraph.types import Command

    path, ran = _fresh(), []
    host = _open(path)
    graph = _langgraph(host, ran)
    out = _lg_run(graph, {"session": host.session.id, "prompt": "Patch the CLI."})
    assert out["__interrupt__"][0].value["tool"] == "apply_patch"
    _lg_run(graph, Command(resume={"approve": False, "feedback": "not on main"}))
    _settled_once(host, ran, approved=False)
    assert "not on main" in (host.recorded_result("call_patch") or "")


# --- the OpenAI Agents SDK -------------------------------------------------------------------------


def _agents_sdk(host: StageHost, ran: list[Any]) -> Any:
    sdk("agents")
    from agents import Agent, function_tool, set_tracing_disabled
    from oa_fake import FakeModel

    from fsm_stage.integrations.openai_agents import StagedModel, host_tools, stage_tools

    set_tracing_disabled(True)

    @function_tool
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        ran.append(patch)
        return "patched"

    def move(h: StageHost) -> tuple[str, dict[str, str]] | None:
        settled = any(e.type == "tool/result" for e in h.session.events)
        return None if settled else ("apply_patch", PATCH)

    fake = FakeModel(host, move)
    return Agent(name="dev", model=StagedModel(fake, host),
                 tools=[*stage_tools(host), *host_tools(host, [apply_patch])])


def test_agents_sdk_a_host_tool_review_is_an_interruption_and_survives_a_restart() -> None:
    sdk("agents")
    from agents import Runner

    from fsm_stage.integrations.openai_agents import approve

    async def run() -> None:
        path, ran = _fresh(), []
        host = _open(path)
        result = await Runner.run(_agents_sdk(host, ran), "Patch the CLI.")
        assert [i.raw_item.name for i in result.interruptions] == ["apply_patch"] and ran == []
        host2 = _restart(host, path)  # a new process: no RunState, the log only
        [(call, _review_id, answered)] = host2.pending_reviews()
        assert call.name == "apply_patch" and not answered
        agent2 = _agents_sdk(host2, ran)
        result = await Runner.run(agent2, "")  # the waiting call is replayed: asked again
        assert [i.raw_item.name for i in result.interruptions] == ["apply_patch"]
        state = result.to_state()
        approve(host2, state, result.interruptions[0])
        result = await Runner.run(agent2, state)
        assert result.final_output == "Verified."
        _settled_once(host2, ran, approved=True)

    asyncio.run(run())


def test_agents_sdk_a_rejected_host_tool_never_runs() -> None:
    sdk("agents")
    from agents import Runner

    from fsm_stage.integrations.openai_agents import reject

    async def run() -> None:
        path, ran = _fresh(), []
        host = _open(path)
        agent = _agents_sdk(host, ran)
        result = await Runner.run(agent, "Patch the CLI.")
        state, (item,) = result.to_state(), result.interruptions
        reject(host, state, item, "not on main")
        result = await Runner.run(agent, state)
        assert result.final_output == "Verified."
        _settled_once(host, ran, approved=False)
        assert "not on main" in (host.recorded_result(item.raw_item.call_id) or "")

    asyncio.run(run())


GOTO = {"stage": "verify", "handoff": "## Next\n- verify the patch"}


def _lg_two_calls(host: StageHost, ran: list[Any], order: list[str]) -> Any:
    """A graph whose model asks for goto_stage and apply_patch in one reply (in ``order``)."""
    sdk("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from fsm_stage.integrations.langgraph import stage_graph

    args = {"goto_stage": GOTO, "apply_patch": PATCH}

    class Chat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[Any], *a: Any, **k: Any) -> ChatResult:
            asked = host.recorded_result("call_apply_patch") is not None  # (the switch archives the chat)
            reply = AIMessage("Done.") if asked else AIMessage(
                "", tool_calls=[{"name": n, "args": args[n], "id": f"call_{n}"} for n in order])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        ran.append(patch)
        return "patched"

    return stage_graph(host, Chat(responses=[]), [apply_patch], checkpointer=InMemorySaver())


@pytest.mark.parametrize("order", [["goto_stage", "apply_patch"], ["apply_patch", "goto_stage"]])
def test_langgraph_two_reviews_in_one_reply_each_get_their_own_answer(order: list[str]) -> None:
    """LangGraph hands resume values to a node's interrupts by position; each answer must reach
    the review it was given for (the tool refused here never runs, the switch approved happens)."""
    sdk("langgraph")
    from langgraph.types import Command

    ran: list[Any] = []
    host = _open(_fresh())
    graph = _lg_two_calls(host, ran, order)
    out = _lg_run(graph, {"session": host.session.id, "prompt": "Patch, then verify."})
    answers = {"goto_stage": True, "apply_patch": {"approve": False, "feedback": "not on main"}}
    asked = []
    while "__interrupt__" in out:
        (pending,) = out["__interrupt__"]
        asked.append(pending.value["tool"])
        out = _lg_run(graph, Command(resume=answers[pending.value["tool"]]))
    assert asked == order and ran == []
    outcomes = {review_state(host.session).records[rid].target: a.outcome
                for rid, a in review_state(host.session).answered.items()}
    assert outcomes == {"verify": "approve", "apply_patch": "keep"}
    assert host.current_stage() == "verify"


def test_langgraph_a_resume_value_for_a_review_answered_elsewhere_answers_no_other_call() -> None:
    """Two reviewed calls in one reply; the first is approved in the inbox and the app resumes
    with True as well: the second call still interrupts for its own answer."""
    sdk("langgraph")
    from langgraph.types import Command

    from fsm_stage.reviews import answer_review

    ran: list[Any] = []
    host = _open(_fresh())
    graph = _lg_two_calls(host, ran, ["apply_patch", "goto_stage"])
    out = _lg_run(graph, {"session": host.session.id, "prompt": "Patch, then verify."})
    (first,) = out["__interrupt__"]
    answer_review(host.session, first.value["review_id"], "approve", by="alice")
    out = _lg_run(graph, Command(resume=True))
    (second,) = out["__interrupt__"]
    assert second.value["tool"] == "goto_stage" and ran == ["+--greeting"]
    assert second.value["review_id"] not in review_state(host.session).answered


def test_agents_sdk_a_tool_with_its_own_approval_runs_after_a_restart() -> None:
    """The SDK's own needs_approval asks first; the policy is asked when the approved call runs,
    so a new process resuming the saved RunState runs the tool (once)."""
    sdk("agents")
    from agents import Agent, Runner, RunState, function_tool
    from oa_fake import FakeModel

    from fsm_stage.integrations.openai_agents import StagedModel, host_tools, stage_tools

    def build(host: StageHost, ran: list[Any]) -> Any:
        @function_tool(needs_approval=True)
        def read_file(path: str) -> str:
            """Read a file."""
            ran.append(path)
            return "text"

        def move(h: StageHost) -> tuple[str, dict[str, str]] | None:
            done = any(e.type == "tool/result" for e in h.session.events)
            return None if done else ("read_file", {"path": "a.md"})

        return Agent(name="dev", model=StagedModel(FakeModel(host, move), host),
                     tools=[*stage_tools(host), *host_tools(host, [read_file])])

    async def run() -> None:
        path, ran = _fresh(), []
        host = _open(path)
        result = await Runner.run(build(host, ran), "Read it.")
        saved = result.to_state().to_string()
        host2 = _restart(host, path)
        agent2 = build(host2, ran)
        state = await RunState.from_string(agent2, saved)
        state.approve(state.get_interruptions()[0])
        result = await Runner.run(agent2, state)
        assert ran == ["a.md"] and result.final_output == "Verified."

    asyncio.run(run())


def test_agents_sdk_a_tool_with_its_own_approval_and_an_ask_rule_is_asked_once() -> None:
    """The policy's review is the SDK interruption (it covers the tool's own approval): one
    approval, the tool runs once, the run ends normally."""
    sdk("agents")
    from agents import Agent, Runner, function_tool
    from oa_fake import FakeModel

    from fsm_stage.integrations.openai_agents import StagedModel, approve, host_tools, stage_tools

    ran: list[Any] = []

    @function_tool(needs_approval=True)
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        ran.append(patch)
        return "patched"

    def move(h: StageHost) -> tuple[str, dict[str, str]] | None:
        return None if any(e.type == "tool/result" for e in h.session.events) else ("apply_patch", PATCH)

    async def run() -> None:
        host = _open(_fresh())
        agent = Agent(name="dev", model=StagedModel(FakeModel(host, move), host),
                      tools=[*stage_tools(host), *host_tools(host, [apply_patch])])
        result = await Runner.run(agent, "Patch.")
        state, (item,) = result.to_state(), result.interruptions
        approve(host, state, item)
        result = await Runner.run(agent, state)
        assert result.final_output == "Verified."
        _settled_once(host, ran, approved=True)

    asyncio.run(run())


@pytest.mark.parametrize("misjudged", [False, True])
def test_langgraph_runs_a_replys_calls_no_review_can_stop_concurrently(misjudged: bool) -> None:
    """A ToolNode runs a reply's calls concurrently; the stage graph keeps that for calls the
    policy lets run outright (each of the two tools waits until the other started), and the
    call an ``ask`` rule reviews still interrupts on its own, after them. ``misjudged``: the
    reviewed call is taken for an allowed one (the policy changed in between) and lands among
    the concurrent calls: its review is still asked alone."""
    sdk("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from fsm_stage.integrations.langgraph import stage_graph

    host = _open(_fresh())
    started = {"read_a": asyncio.Event(), "read_b": asyncio.Event()}

    async def meet(me: str, other: str) -> str:
        started[me].set()
        try:
            await asyncio.wait_for(started[other].wait(), 2)
        except TimeoutError:
            return "alone"
        return "together"

    @tool
    async def read_a() -> str:
        """Read a."""
        return await meet("read_a", "read_b")

    @tool
    async def read_b() -> str:
        """Read b."""
        return await meet("read_b", "read_a")

    calls = [{"name": "read_a", "args": {}, "id": "call_a"},
             {"name": "apply_patch", "args": PATCH, "id": "call_p"},
             {"name": "read_b", "args": {}, "id": "call_b"}]

    class Chat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[Any], *a: Any, **k: Any) -> ChatResult:
            done = host.recorded_result("call_p") is not None
            reply = AIMessage("Done.") if done else AIMessage("", tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        return "patched"

    graph = stage_graph(host, Chat(responses=[]), [read_a, read_b, apply_patch], checkpointer=InMemorySaver())
    if misjudged:
        host.policy_verdict = lambda call: "allow"  # type: ignore[method-assign]

    async def run() -> Any:
        return await graph.ainvoke({"session": host.session.id, "prompt": "Read, then patch."},
                                   {"configurable": {"thread_id": "t"}})

    out = asyncio.run(run())
    assert [i.value["tool"] for i in out["__interrupt__"]] == ["apply_patch"]
    assert host.recorded_result("call_a") == "together" and host.recorded_result("call_b") == "together"
    assert host.recorded_result("call_p") is None
    out = asyncio.run(graph.ainvoke(Command(resume=True), {"configurable": {"thread_id": "t"}}))
    assert "__interrupt__" not in out and host.recorded_result("call_p") == "patched"


def test_pydantic_ai_two_reviewed_calls_in_one_reply_are_asked_together() -> None:
    """Tool reviews are one per call: both calls of the reply are deferred approvals at once,
    each answered on its own (one approved runs, the other refused)."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied

    ran: list[Any] = []
    host = _open(_fresh())
    agent, cap = _pydantic_agent(host, ran, (("call_a", {"patch": "a"}), ("call_b", {"patch": "b"})))
    out = agent.run_sync("Patch twice.").output
    assert isinstance(out, DeferredToolRequests)
    assert sorted(p.tool_call_id for p in out.approvals) == ["call_a", "call_b"] and ran == []
    assert len(review_state(host.session).open) == 2
    results = DeferredToolResults(approvals={"call_a": True, "call_b": ToolDenied("not b")})
    agent.run_sync(message_history=cap.message_history(), deferred_tool_results=results)
    assert ran == ["a"]
    assert host.recorded_result("call_a") == "patched" and "not b" in (host.recorded_result("call_b") or "")
    assert review_state(host.session).open == ()


def test_agents_sdk_two_reviewed_calls_in_one_reply_are_interruptions_together() -> None:
    """Both calls of the reply are interruptions of one run, each answered on its own."""
    sdk("agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.usage import Usage
    from oa_fake import FakeModel
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from fsm_stage.integrations.openai_agents import StagedModel, approve, host_tools, reject, stage_tools

    set_tracing_disabled(True)
    ran: list[Any] = []
    host = _open(_fresh())

    class TwoCalls(FakeModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            if any(e.type == "tool/result" for e in host.session.events):
                text = ResponseOutputText(type="output_text", text="Verified.", annotations=[])
                out: list[Any] = [ResponseOutputMessage(id="m", type="message", role="assistant",
                                                        status="completed", content=[text])]
            else:
                out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{p}", name="apply_patch",
                                                arguments=json.dumps({"patch": p})) for p in ("a", "b")]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

    @function_tool
    def apply_patch(patch: str) -> str:
        """Apply a patch."""
        ran.append(patch)
        return "patched"

    agent = Agent(name="dev", model=StagedModel(TwoCalls(host), host),
                  tools=[*stage_tools(host), *host_tools(host, [apply_patch])])

    async def run() -> None:
        result = await Runner.run(agent, "Patch twice.")
        items = {i.raw_item.call_id: i for i in result.interruptions}
        assert sorted(items) == ["call_a", "call_b"] and ran == []
        state = result.to_state()
        approve(host, state, items["call_a"])
        reject(host, state, items["call_b"], "not b")
        result = await Runner.run(agent, state)
        assert result.final_output == "Verified." and ran == ["a"]

    asyncio.run(run())
    assert "not b" in (host.recorded_result("call_b") or "") and review_state(host.session).open == ()
