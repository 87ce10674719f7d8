"""Crash repair on resume (dsh-log-format §4, §8 item 8): a log that ends inside an open turn
(the writer died mid-turn) is closed the way DSH does before any new turn starts — a synthetic
error ``tool/result`` per unanswered tool call, ``step/end`` for the open step, then
``turn/end {reason: {kind: interrupted}}``. Stage and plan mode are unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fsm_stage.cli import main as cli_main
from fsm_stage.constants import STEP_END, TOOL_RESULT, TURN_END, TURN_START
from fsm_stage.driver import Loop, ModelReply, ScriptedModel, repair_open_turn
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import OpenTurn, fold, fold_plan_mode, fold_stage
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.stage_switch import StageController

from .harness import make_config, run


def _compose() -> Runtime:
    runtime = Runtime()
    runtime.attach(StageController(make_config(), handoffs=None))
    runtime.attach(PlanModeController({"section": "Plan first."}))
    return runtime


def _crash_mid_turn(path: Path, *, started_call: bool) -> tuple[str, bool]:
    """Turn 1 completes after `/stage gamma` and `/plan`; turn 2 dies inside step 1 after the
    model asked for two tool calls (one `tool/call` recorded when ``started_call``)."""
    runtime = _compose()
    with JsonlLog(path, header=SessionHeader("crashy", created_at=1, cwd=str(path.parent))) as log:
        agent = InboxAgent(Session(log))
        loop = Loop(runtime, agent, ScriptedModel([ModelReply.say("ok")]))
        for line in ("/stage gamma", "/plan"):
            reply = run(loop.command(line))
            assert reply is not None and reply.kind == "success"
        run(loop.prompt("first"))
        session = agent.session
        session.append(TURN_START, {"turn": 2})
        session.append("step/start", {"turn": 2, "step": 1})
        calls = [{"type": "tool-call", "id": "c-run", "name": "bash", "arguments": "{}"},
                 {"type": "tool-call", "id": "c-wait", "name": "bash", "arguments": "{}"}]
        session.append("assistant/message", {"turn": 2, "step": 1, "message": {
            "role": "assistant", "content": calls, "id": "m2",
            "source": {"kind": "model", "provider": "p", "model": "m"}}}, surface_op="append")
        if started_call:
            session.append("tool/call", {"turn": 2, "step": 1, "callId": "c-run", "name": "bash",
                                         "arguments": "{}"})
        stage, plan = fold_stage(session.events), fold_plan_mode(session.events)
    return str(stage), plan  # the process "dies": nothing closes turn 2


def _tail(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def test_prompt_on_a_reopened_log_repairs_the_open_turn_first(tmp_path: Path) -> None:
    """A fresh Loop over a log killed mid-turn writes the DSH closers (outcome unknown for the
    recorded call, not started for the other, step/end, turn/end interrupted) before turn 3,
    and the strict reader, `state --strict` and the projections agree: idle, stage and plan
    mode unchanged."""
    path = tmp_path / "k.jsonl"
    stage, plan = _crash_mid_turn(path, started_call=True)
    assert (stage, plan) == ("gamma", True)
    with JsonlLog(path) as log:
        agent = InboxAgent(Session(log))
        assert agent.session.is_turn_open
        loop = Loop(_compose(), agent, ScriptedModel([ModelReply.say("back")]))
        outcomes = run(loop.prompt("again"))
        assert [(o.turn, o.reason) for o in outcomes] == [(3, "completed")]
    rows = _tail(path)
    types = [r["type"] for r in rows]
    first_new = types.index(TOOL_RESULT)
    closers = rows[first_new:first_new + 4]
    assert [r["type"] for r in closers] == [TOOL_RESULT, TOOL_RESULT, STEP_END, TURN_END]
    unknown, not_started = (c["data"] for c in closers[:2])
    assert unknown["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert not_started["error"]["code"] == "TOOL_NOT_STARTED"
    for data, call_id in ((unknown, "c-run"), (not_started, "c-wait")):
        block = data["message"]["content"][0]
        assert (data["turn"], data["step"]) == (2, 1)
        assert block["toolCallId"] == call_id and block["isError"] is True
        assert data["message"]["source"] == {"kind": "tool", "callId": call_id}
        assert block["content"][0]["text"].strip()
    assert closers[0]["surfaceOp"] == "append"
    assert "outcome is unknown" in unknown["message"]["content"][0]["content"][0]["text"]
    assert closers[2]["data"] == {"turn": 2, "step": 1}
    assert closers[3]["data"] == {"turn": 2, "reason": {"kind": "interrupted"}}
    assert rows[first_new + 4]["type"] == TURN_START and rows[first_new + 4]["data"] == {"turn": 3}
    back = read_log(path, strict=True)
    assert fold(OpenTurn(), back.events).open is False
    assert fold_stage(back.events) == "gamma" and fold_plan_mode(back.events) is True
    result = CliRunner().invoke(cli_main, ["state", "--strict", "--json", str(path)])
    assert result.exit_code == 0, result.output
    state = json.loads(result.output)
    assert state["turn"]["open"] is False


def test_repair_is_explicit_idempotent_and_skips_a_live_turn(tmp_path: Path) -> None:
    """`repair_open_turn` / `Loop.repair` return what they wrote; a second call writes nothing;
    run_until_idle and command repair too; a turn the loop itself is running is never repaired."""
    path = tmp_path / "k.jsonl"
    _crash_mid_turn(path, started_call=False)
    with JsonlLog(path) as log:
        session = Session(log)
        written = repair_open_turn(session)
        assert [e.type for e in written] == [TOOL_RESULT, TOOL_RESULT, STEP_END, TURN_END]
        assert {e.data["error"]["code"] for e in written[:2]} == {"TOOL_NOT_STARTED"}
        assert not session.is_turn_open
        assert repair_open_turn(session) == []
        n = len(session)
        session.append(TURN_START, {"turn": 3})  # another crash, no step this time
    with JsonlLog(path) as log:
        agent = InboxAgent(Session(log))
        loop = Loop(_compose(), agent, ScriptedModel([]))
        assert run(loop.run_until_idle()) == []
        assert [e.type for e in agent.session.events[n + 1:]] == [TURN_END]
        assert loop.repair() == []
        seen: list[int] = []

        def during_turn(_req: Any) -> ModelReply:
            seen.append(len(loop.repair()))  # the loop's own live turn is not a crash
            return ModelReply.say("fine")

        loop.model = ScriptedModel([during_turn])
        assert [o.reason for o in run(loop.prompt("x"))] == ["completed"]
        assert seen == [0]
    read_log(path, strict=True)


def test_command_repairs_before_running(tmp_path: Path) -> None:
    """`/plan off` on a reopened crashed log applies at once (the dead turn is closed first) instead of
    being queued behind a turn that will never end."""
    path = tmp_path / "k.jsonl"
    _crash_mid_turn(path, started_call=True)
    with JsonlLog(path) as log:
        agent = InboxAgent(Session(log))
        loop = Loop(_compose(), agent, ScriptedModel([]))
        reply = run(loop.command("/plan off"))
        assert reply is not None and reply.kind == "success"
        assert not agent.session.is_turn_open
        assert fold_plan_mode(agent.session.events) is False

