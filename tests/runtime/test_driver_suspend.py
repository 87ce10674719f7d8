"""Suspension, resume (same and new process-like session), crash repair and cancellation of
tool calls whose durable review waits for a human (design-b §3, §5; issue 11 items 2 and 5)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from driver_helpers import Blocking, Reviewed, answer, unanswered_calls
from runtime_helpers import Echo, run

from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.driver._repair import closers, is_suspended, repair_open_turn
from fsm_stage.driver._step import DriverStateError, StagedSession, TurnSuspendedError
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolOutput, ToolSpec, current_tool_call

REVIEW = ToolCall.of("review_me", id="c_rev")
ECHO = ToolCall.of("echo", {"x": "after"}, id="c_echo")


def _runtime() -> tuple[Runtime, Reviewed, Echo]:
    rt, reviewed, echo = Runtime(), Reviewed(), Echo()
    rt.add_tool(reviewed)
    rt.add_tool(echo)
    return rt, reviewed, echo


def _open(path: Path) -> JsonlLog:
    if path.exists():
        return JsonlLog(path)
    return JsonlLog(path, header=SessionHeader("sus", created_at=1, cwd=str(path.parent)))


def _suspend(path: Path) -> None:
    """A first 'process': a step whose reply asks for a review then an echo; it suspends."""
    with _open(path) as log:
        rt, _, echo = _runtime()
        driver = StagedSession(rt, InboxAgent(Session(log)), config={"provider": "p", "model": "m"})
        driver.agent.steer(user_message("go"))
        driver.start_turn()
        driver.begin_step()
        driver.record_reply("asking", [REVIEW, ECHO])
        with pytest.raises(ReviewPending) as info:
            run(driver.run_tool(REVIEW))
        assert (info.value.review_id, info.value.call_id) == ("rv_c_rev", "c_rev")
        assert echo.calls == []


def _types(log: Any) -> list[str]:
    return [e.type for e in log.events]


def test_a_suspended_call_stays_open_and_suspended_folds_the_log(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _suspend(path)
    with _open(path) as log:
        assert _types(log)[-3:] == ["assistant/message", "tool/call", "fsm/review/request"]
        driver = StagedSession(_runtime()[0], InboxAgent(Session(log)))
        sus = driver.suspended()
        assert sus is not None and (sus.turn, sus.step) == (1, 1)
        assert [(c.call.id, c.review_id, c.answered) for c in sus.calls] == [("c_rev", "rv_c_rev", False)]
        assert sus.pending == (ECHO,) and sus.review_ids == ("rv_c_rev",)
        assert [c.id for c in driver.unsettled()] == ["c_rev", "c_echo"]
        # crash repair leaves a suspended turn alone
        assert is_suspended(driver.session) and closers(log.events) == []
        assert repair_open_turn(driver.session) == [] and driver.repair() == []
        with pytest.raises(TurnSuspendedError, match="review rv_c_rev awaits an answer"):
            driver.end_step()
        with pytest.raises(TurnSuspendedError):
            driver.start_turn()
        # still unanswered: resume raises again and writes nothing
        n = len(log)
        with pytest.raises(ReviewPending):
            run(driver.resume())
        assert len(log) == n


def test_resume_in_a_new_session_settles_the_call_once_then_runs_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _suspend(path)
    with _open(path) as log:
        answer(Session(log), "rv_c_rev")
    with _open(path) as log:  # a new "process": new log object, session, runtime and driver
        rt, reviewed, echo = _runtime()
        driver = StagedSession(rt, InboxAgent(Session(log)), config={"provider": "p", "model": "m"})
        sus = driver.suspended()
        assert sus is not None and sus.calls[0].answered
        results = run(driver.resume())
        assert [(r.call.id, r.text) for r in results] == [("c_rev", "approved"), ("c_echo", "echo after")]
        assert driver.suspended() is None and reviewed.runs == 1 and len(echo.calls) == 1
        events = log.events
        assert [e.data["callId"] for e in events if e.type == "tool/call"] == ["c_rev", "c_echo"]
        rev_call = next(e for e in events if e.type == "tool/call" and e.data["callId"] == "c_rev")
        rev_result = next(e for e in events if e.type == "tool/result"
                          and e.data["message"]["source"]["callId"] == "c_rev")
        assert rev_result.source_event_seqs == (rev_call.seq,) and rev_result.data["step"] == 1
        assert driver.end_step() is True
        req = driver.begin_step()
        assert req is not None and req.step == 2 and req.header_reason == "resume"
        assert unanswered_calls(req.messages) == []
        driver.record_reply("done")
        driver.end_step()
        driver.end_turn()
        with pytest.raises(DriverStateError, match="no suspended tool call"):
            run(driver.resume())


def test_the_loop_returns_suspended_and_resumes_in_a_new_process(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    with _open(path) as log:
        rt, _, _ = _runtime()
        agent = InboxAgent(Session(log))
        model = ScriptedModel([ModelReply(text="asking", tool_calls=(REVIEW, ECHO))])
        loop = Loop(rt, agent, model)
        (outcome,) = run(loop.prompt("go"))
        assert (outcome.reason, outcome.review_id, outcome.call_id, outcome.turn) == (
            "suspended", "rv_c_rev", "c_rev", 1)
        assert log.events[-1].type == "fsm/review/request" and agent.session.is_turn_open
        agent.steer(user_message("are you there?"))
        with pytest.raises(TurnSuspendedError):
            run(loop.run_turn())
        assert run(loop.resume()).reason == "suspended"  # still unanswered
        answer(agent.session, "rv_c_rev")
    with _open(path) as log:
        rt, reviewed, echo = _runtime()
        agent = InboxAgent(Session(log))
        model = ScriptedModel([ModelReply.say("all done")])
        outcome = run(Loop(rt, agent, model).resume())
        assert (outcome.turn, outcome.reason, outcome.steps) == (1, "completed", 2)
        assert reviewed.runs == 1 and len(echo.calls) == 1
        assert unanswered_calls(model.requests[0].messages) == []
        assert _types(log)[-7:] == ["tool/call", "tool/result", "step/end", "step/start", "request/header",
                                    "assistant/message", "step/end", "turn/end"][1:]
        assert log.events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}


def test_cancel_on_a_suspended_step_dismisses_the_review_and_closes_every_call(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _suspend(path)
    with _open(path) as log:
        rt, _, _ = _runtime()
        agent = InboxAgent(Session(log))
        driver = StagedSession(rt, agent, config={"provider": "p", "model": "m"})
        written = run(driver.cancel())
        assert [e.type for e in written] == ["fsm/review/answer", "tool/result", "tool/call",
                                             "tool/result", "step/end", "turn/end"]
        dismiss = written[0]
        assert dismiss.ignorable and dismiss.data == {"id": "rv_c_rev", "outcome": "dismiss", "option": None,
                                                      "shape": None, "feedback": None, "by": "cancel"}
        aborted, echo_call, skipped = written[1], written[2], written[3]
        assert aborted.data["message"]["content"][0]["content"][0]["text"] == "Error: tool call aborted"
        assert aborted.data["error"] == {"name": "AbortError", "code": "ABORTED"}
        assert aborted.source_event_seqs == (next(e.seq for e in log.events if e.type == "tool/call"),)
        assert echo_call.data["callId"] == "c_echo" and skipped.source_event_seqs == (echo_call.seq,)
        assert skipped.data["message"]["content"][0]["content"][0]["text"] == \
            "Error: tool call aborted before dispatch"
        assert written[-1].data == {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}
        assert not agent.session.is_turn_open and run(driver.cancel()) == []
        # the next request has no unanswered tool call
        agent.steer(user_message("next"))
        driver.start_turn()
        req = driver.begin_step()
        assert req is not None and unanswered_calls(req.messages) == []


def test_loop_abort_closes_a_suspended_turn() -> None:
    rt, _, _ = _runtime()
    agent = InboxAgent(Session(_memory()))
    loop = Loop(rt, agent, ScriptedModel([ModelReply.call("review_me", id="c9")]))
    assert run(loop.prompt("go"))[0].reason == "suspended"
    loop.abort("user")
    types = [e.type for e in agent.session.events]
    assert types[-4:] == ["fsm/review/answer", "tool/result", "step/end", "turn/end"]


def _memory() -> Any:
    from fsm_stage.log.events import MemoryLog
    return MemoryLog(SessionHeader("m"))


def test_asyncio_cancel_while_a_tool_runs_closes_it_as_aborted() -> None:
    rt = Runtime()
    blocking = Blocking()
    rt.add_tool(blocking)
    agent = InboxAgent(Session(_memory()))
    model = ScriptedModel([ModelReply(tool_calls=(ToolCall.of("block", id="b1"),
                                                  ToolCall.of("block", id="b2")))])
    loop = Loop(rt, agent, model)

    async def go() -> None:
        loop.agent.steer(user_message("go"))
        task = asyncio.create_task(loop.run_until_idle())
        await blocking.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go())
    events = agent.session.events
    tail = [(e.type, e.data.get("callId") or (e.data.get("message") or {}).get("source", {}).get("callId"))
            for e in events[-6:]]
    assert tail == [("tool/call", "b1"), ("tool/result", "b1"), ("tool/call", "b2"), ("tool/result", "b2"),
                    ("step/end", None), ("turn/end", None)]
    texts = [e.data["message"]["content"][0]["content"][0]["text"] for e in events if e.type == "tool/result"]
    assert texts == ["Error: tool call aborted", "Error: tool call aborted before dispatch"]
    assert events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "cancelled"}}
    assert unanswered_calls(agent.session.messages()) == []


def test_loop_abort_while_a_tool_runs_skips_the_calls_not_yet_dispatched() -> None:
    rt = Runtime()
    blocking = Blocking()
    rt.add_tool(blocking)
    agent = InboxAgent(Session(_memory()))
    model = ScriptedModel([ModelReply(tool_calls=(ToolCall.of("block", id="b1"),
                                                  ToolCall.of("block", id="b2")))])
    loop = Loop(rt, agent, model)

    async def go() -> list[Any]:
        agent.steer(user_message("go"))
        task = asyncio.create_task(loop.run_until_idle())
        await blocking.started.wait()
        loop.abort("user")
        return await task

    (outcome,) = run(go())
    assert outcome.reason == "aborted"
    events = agent.session.events
    texts = [e.data["message"]["content"][0]["content"][0]["text"] for e in events if e.type == "tool/result"]
    assert texts == ["Error: stopped", "Error: tool call aborted before dispatch"]
    assert [e.type for e in events[-2:]] == ["step/end", "turn/end"]
    assert events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


def test_driver_cancel_cancels_a_tool_running_in_another_task() -> None:
    rt = Runtime()
    blocking = Blocking()
    rt.add_tool(blocking)
    agent = InboxAgent(Session(_memory()))
    driver = StagedSession(rt, agent)

    async def go() -> list[Any]:
        driver.start_turn()
        driver.begin_step()
        call = ToolCall.of("block", id="b1")
        driver.record_reply("", [call])
        task = asyncio.create_task(driver.run_tool(call))
        await blocking.started.wait()
        written = await driver.cancel("user")
        assert task.done()
        return written

    written = run(go())
    assert [e.type for e in written] == ["step/end", "turn/end"]
    results = [e for e in agent.session.events if e.type == "tool/result"]
    assert len(results) == 1 and results[0].data["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert results[0].data["message"]["content"][0]["content"][0]["text"] == "Error: tool call aborted"


def test_repair_of_a_suspended_turn_closes_only_a_stray_recorded_call() -> None:
    """A host ran another tool after the suspension and died mid-call: that call's outcome is
    unknown and is closed; the suspended call, the step and the turn stay open."""
    rt, _, _ = _runtime()
    agent = InboxAgent(Session(_memory()))
    driver = StagedSession(rt, agent)
    driver.start_turn()
    driver.begin_step()
    stray = ToolCall.of("web", id="c_web")
    driver.record_reply("", [REVIEW, stray, ECHO])
    with pytest.raises(ReviewPending):
        run(driver.run_tool(REVIEW))
    agent.session.append("tool/call", {"turn": 1, "step": 1, "callId": "c_web", "name": "web",
                                       "arguments": "{}"})
    written = repair_open_turn(agent.session)
    assert [e.type for e in written] == ["tool/result"]
    assert written[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert written[0].data["message"]["source"]["callId"] == "c_web"
    sus = driver.suspended()
    assert sus is not None and sus.pending == (ECHO,) and agent.session.is_turn_open
    assert repair_open_turn(agent.session) == []  # idempotent


class _Asking:
    """``ask``: logs a review request, then waits for an interactive answer that never comes;
    ``dismisses`` makes it answer ``dismiss`` on cancellation, as the controllers do."""

    spec = ToolSpec("ask", "Ask interactively.", {"type": "object", "properties": {}})

    def __init__(self, dismisses: bool) -> None:
        self.dismisses = dismisses
        self.started = asyncio.Event()

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        call = current_tool_call()
        assert call is not None
        agent.session.append("fsm/review/request", {"id": "rv_1", "callId": call.id, "kind": "plan"},
                             ignorable=True)
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.dismisses:
                answer(agent.session, "rv_1", "dismiss")
            raise
        raise AssertionError("unreachable")  # pragma: no cover


@pytest.mark.parametrize("tool_dismisses", [True, False])
def test_ctrl_c_during_an_interactive_review_closes_the_call_and_the_review(tool_dismisses: bool) -> None:
    rt = Runtime()
    asking = _Asking(tool_dismisses)
    rt.add_tool(asking)
    agent = InboxAgent(Session(_memory()))
    loop = Loop(rt, agent, ScriptedModel([ModelReply.call("ask", id="c_ask")]))

    async def go() -> None:
        agent.steer(user_message("go"))
        task = asyncio.create_task(loop.run_until_idle())
        await asking.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go())
    types = [e.type for e in agent.session.events]
    assert types[-6:] == ["tool/call", "fsm/review/request", "fsm/review/answer", "tool/result",
                          "step/end", "turn/end"]
    answers = [e.data for e in agent.session.events if e.type == "fsm/review/answer"]
    assert len(answers) == 1 and answers[0]["outcome"] == "dismiss"
    assert answers[0]["by"] == ("api" if tool_dismisses else "cancel")
    result = agent.session.events[-3]
    assert result.data["message"]["content"][0]["content"][0]["text"] == "Error: tool call aborted"
    assert unanswered_calls(agent.session.messages()) == []
    with pytest.raises(DriverStateError, match="no suspended tool call"):
        run(loop.resume())
