"""Composition and lifecycle (S94–S97)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm_stage.constants import GOTO_STAGE, STAGE_SOURCE_KIND, USER_MESSAGE
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import fold_stage
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.stage_switch import ProjectionUnavailableError, StageController

from .harness import Harness, make_config, run


def test_composition_registers_service_tool_and_command_S94() -> None:
    """S94: the `stage` service is the controller, goto_stage is registered, commands are ['stage']."""
    h = Harness()
    assert h.runtime.service("stage") is h.controller
    assert GOTO_STAGE in h.runtime.tools
    assert [c.name for c in h.commands.specs] == ["stage"]
    assert h.commands.specs[0].hint == "[stage|message]"


def test_records_survive_a_real_jsonl_round_trip_S95(tmp_path: Path) -> None:
    """S95: boot, idle /stage gamma, open turn, full goto beta, boundary → three summaries; every
    logged user/message is a valid DSH row (strict reader) with the producer-owned kind, never the
    retired {kind: plugin, plugin: stage-switch} wrapper, which is not a record."""
    path = tmp_path / "session.jsonl"
    review = ScriptedReviewChannel().approve()
    runtime = Runtime(review=review)
    controller = StageController(make_config(), handoffs=None)
    from fsm_stage.handoff import LocalHandoffStore

    controller.handoffs = LocalHandoffStore()
    runtime.attach(controller)
    with JsonlLog(path, header=SessionHeader(id="agent-1", cwd=str(tmp_path))) as log:
        session = Session(log)
        agent = InboxAgent(session)
        session.append("turn/start", {"turn": 1})
        for m in runtime.pre_step(agent, []):
            session.append_message(m)
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        reply = run(runtime.run_command(agent, "/stage gamma"))
        assert reply is not None and reply.kind == "success"
        session.append("turn/start", {"turn": 2})
        session.append_message({"id": "u", "role": "user", "content": [{"type": "text", "text": "go"}],
                                "source": {"kind": "user"}})
        from fsm_stage.runtime.tools import ToolCall

        result = run(runtime.call_tool(agent, ToolCall.of("goto_stage", {"stage": "beta", "handoff": "# H"})))
        assert not result.is_error, result.text
        for m in runtime.pre_step(agent, []):
            session.append_message(m)
    back = read_log(path, strict=True)
    summaries = [e.data["source"]["summary"] for e in back.events
                 if e.type == USER_MESSAGE and e.data["source"]["kind"] == STAGE_SOURCE_KIND]
    assert summaries == ["Current stage: alpha", "Current stage: gamma", "Stage switched to beta"]
    assert fold_stage(back.events) == "beta"
    for e in back.events:
        if e.type == USER_MESSAGE:
            assert isinstance(e.data["id"], str) and e.data["role"] == "user"
            assert e.data["source"]["kind"] != "plugin" or e.data["source"].get("plugin") != "stage-switch"
    wrapper = dict(back.events[-1].data, source={"kind": "plugin", "plugin": "stage-switch", "form": "notice",
                                                 "summary": "Current stage: alpha"})
    assert fold_stage([*back.events, back.events[-1].__class__(USER_MESSAGE, len(back.events), 0, wrapper,
                                                                surface_op="append")]) == "beta"
    assert (tmp_path / "handoff/agent-1/beta.md").read_text() == "# H"


def test_close_unloads_everything_S96() -> None:
    """S96: after one boundary, close → service, tool and command gone; a later boundary adds no stage
    message; the fold stays alpha; the projection state is gone."""
    h = Harness()
    h.open_turn()
    h.boundary()
    assert h.summaries() == ["Current stage: alpha"]
    h.controller.close()
    assert h.runtime.service("stage") is None
    assert GOTO_STAGE not in h.runtime.tools
    assert h.commands.specs == []
    h.boundary(step_start=True)
    assert h.summaries() == ["Current stage: alpha"] and h.fold() == "alpha"
    assert h.controller.projection_state(h.session) is None
    h.controller.close()  # idempotent


def test_current_raises_without_projection_S97() -> None:
    """S97: reads fail loudly instead of answering the initial stage."""
    h = Harness()
    h.controller.close()
    with pytest.raises(ProjectionUnavailableError):
        h.controller.current(h.session)


def test_closing_drops_pending_transitions() -> None:
    """A closed controller flushes nothing later, even if re-wired by mistake."""
    h = Harness()
    h.open_turn()
    h.controller.set(h.agent, "beta")
    h.controller.close()
    assert h.controller.on_pre_step(h.agent, [], False) == []
    assert h.fold() is None


def test_attach_is_all_or_nothing() -> None:
    """A second stage switch on the same runtime is refused and leaves the first one intact."""
    h = Harness()
    second = StageController(make_config())
    with pytest.raises(ValueError, match="goto_stage"):
        h.runtime.attach(second)
    assert h.runtime.context_names.count("stage:policy") == 1
    assert h.runtime.service("stage") is h.controller
    h.controller.close()
    with pytest.raises(RuntimeError, match="closed"):
        h.controller.attach(h.runtime)
