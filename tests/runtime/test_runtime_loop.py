"""The reference loop writes DSH-shaped logs that fsm_stage.log reads back (dsh-log-format §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_helpers import Echo, run

from fsm_stage.driver._loop import Loop, ModelError, ModelReply, ScriptedModel
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import OpenTurn, fold
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import SystemSection
from fsm_stage.runtime.messages import notice, user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session


def _types(session: Session) -> list[str]:
    return [e.type for e in session.events]


def test_loop_log_round_trips_through_the_dsh_reader(tmp_path: Path) -> None:
    """A turn with a tool call is written in DSH order and read back strictly by log.dsh."""
    path = tmp_path / "session.jsonl"
    rt = Runtime()
    rt.add_tool(Echo())
    rt.add_section(SystemSection("base", 10, lambda a: "Be brief."))
    with JsonlLog(path, header=SessionHeader("s1", created_at=1, cwd=str(tmp_path))) as log:
        agent = InboxAgent(Session(log))
        model = ScriptedModel([ModelReply.call("echo", {"x": "hi"}, text="calling"), ModelReply.say("done")])
        outcomes = run(Loop(rt, agent, model).prompt("hello"))
    assert [(o.turn, o.reason, o.steps) for o in outcomes] == [(1, "completed", 2)]
    back = read_log(path, strict=True)
    assert [e.type for e in back.events] == [
        "turn/start", "step/start", "user/message", "request/header", "assistant/message",
        "tool/call", "tool/result", "step/end", "step/start", "assistant/message", "step/end", "turn/end"]
    header = back.events[3].data
    assert header["reason"] == "initial" and header["header"]["system"] == "Be brief."
    assert [t["name"] for t in header["header"]["tools"]] == ["echo"]
    assert back.events[6].source_event_seqs == (5,)
    assert fold(OpenTurn(), back.events).open is False
    assert model.requests[1].messages[-1]["content"][0]["content"][0]["text"] == "echo hi"


def test_header_reasons_initial_resume_change() -> None:
    """initial on a fresh log, nothing when unchanged, change on a new system text, resume for
    a new loop instance over a log that has headers."""
    rt = Runtime()
    text = {"v": "A"}
    rt.add_section(SystemSection("s", 1, lambda a: text["v"]))
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s"))))
    loop = Loop(rt, agent, ScriptedModel([ModelReply.say("1"), ModelReply.say("2"), ModelReply.say("3")]))
    run(loop.prompt("a"))
    run(loop.prompt("b"))
    text["v"] = "B"
    run(loop.prompt("c"))
    loop2 = Loop(rt, agent, ScriptedModel([ModelReply.say("4")]))
    run(loop2.prompt("d"))
    reasons = [e.data["reason"] for e in agent.session.events if e.type == "request/header"]
    assert reasons == ["initial", "change", "resume"]
    assert [e.data["turn"] for e in agent.session.events if e.type == "turn/start"] == [1, 2, 3, 4]


def test_steer_mid_turn_continues_and_inject_does_not_wake() -> None:
    """A message steered during a step is taken at the next step of the same turn; an inject
    on an idle agent starts no turn and enters the next step that claims the inbox."""
    rt = Runtime()
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s"))))

    def steer_now(_req: Any) -> ModelReply:
        agent.steer(user_message("also this"))
        return ModelReply.say("first")

    loop = Loop(rt, agent, ScriptedModel([steer_now, ModelReply.say("second"), ModelReply.say("third")]))
    outcomes = run(loop.prompt("start"))
    assert [(o.turn, o.steps) for o in outcomes] == [(1, 2)]
    agent.inject(notice("FYI", plugin="p"))
    assert run(loop.run_until_idle()) == []
    run(loop.prompt("next"))
    texts = [e.data["content"][0]["text"] for e in agent.session.events if e.type == "user/message"]
    assert texts == ["start", "also this", "FYI", "next"]


def test_same_step_retry_runs_no_pre_step_and_exhausted_retries_end_the_turn() -> None:
    """A failed request is retried in the same step with the frozen request and no new pre-step;
    when retries run out the turn ends with an error reason."""
    rt = Runtime()
    calls: list[int] = []
    rt.add_pre_step(lambda a, msgs, aborted: (calls.append(1), msgs)[1])
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s"))))
    model = ScriptedModel([ModelError("503"), ModelReply.say("ok"), ModelError("a"), ModelError("b")])
    errors: list[str] = []
    loop = Loop(rt, agent, model, max_retries=1, on_request_error=lambda lp, e: errors.append(str(e)))
    run(loop.prompt("one"))
    assert calls == [1] and errors == ["503"] and model.requests[0] is model.requests[1]
    (outcome,) = run(loop.prompt("two"))
    assert outcome.reason == "error"
    end = agent.session.events[-1]
    assert end.type == "turn/end" and end.data["reason"] == {"kind": "error", "error": {"message": "b"}}
    assert _types(agent.session)[-2] == "step/end"


def test_rejected_step_and_abort() -> None:
    """A rejected step closes the turn as blocked with no pre-step; an abort during a step ends
    the turn as aborted after step/end."""
    rt = Runtime()
    calls: list[int] = []
    rt.add_pre_step(lambda a, msgs, aborted: (calls.append(1), msgs)[1])
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s"))))
    blocked = Loop(rt, agent, ScriptedModel([]), accept=lambda a, batch: False)
    assert run(blocked.prompt("x"))[0].reason == "blocked" and calls == []
    loop = Loop(rt, agent, ScriptedModel([]))

    def abort_now(_req: Any) -> ModelReply:
        loop.abort("user")
        return ModelReply.call("echo", {"x": "y"})

    loop.model = ScriptedModel([abort_now])
    (outcome,) = run(loop.prompt("y"))
    assert outcome.reason == "aborted" and calls == [1]
    assert agent.session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


def test_an_escaping_exception_still_closes_the_turn() -> None:
    """A model bug (not a ModelError) propagates, but the turn is closed in the log first."""
    rt = Runtime()
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s"))))
    loop = Loop(rt, agent, ScriptedModel([ZeroDivisionError("model adapter bug")]))
    try:
        run(loop.prompt("x"))
    except ZeroDivisionError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the bug must propagate")
    end = agent.session.events[-1]
    assert end.type == "turn/end"
    assert end.data["reason"] == {"kind": "error", "error": {"message": "model adapter bug"}}
    assert not agent.session.is_turn_open
