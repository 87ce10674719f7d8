"""Boundary flush and narration (plan-mode spec §2.D, B22–B35)."""

from __future__ import annotations

import logging

import pytest
from plan_helpers import CAT, PLAN, SECTION, Harness, notice_text, run

from fsm_stage.constants import EXIT_PLAN_MODE, PLAN_MODE_EVENT, REQUEST_HEADER, STEP_END, STEP_START
from fsm_stage.driver._loop import Loop, ModelError, ModelReply, ScriptedModel
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.messages import user_message

PROBE = user_message("boundary probe")


def test_boundary_without_record_is_inert_B22() -> None:
    """B22: nothing pending → the boundary appends nothing and returns the batch unchanged."""
    h = Harness()
    h.open_turn()
    n = len(h.log)
    assert h.boundary([PROBE]) == [PROBE]
    assert len(h.log) == n


def test_queued_selection_flushes_at_next_accepted_pre_step_B23() -> None:
    """B23: open turn set(true) queued → next accepted pre-step appends plan/mode{true}."""
    h = Harness()
    h.open_turn()
    assert h.plan.set(h.agent, True) == "queued"
    h.boundary([PROBE])
    assert h.plan_events() == [True] and h.get == {"active": True}


def test_flush_lands_between_step_end_and_step_start_before_header_B24() -> None:
    """B24: in the loop, the flushed plan/mode sits after the previous step/end and before
    the step/start and request/header of the step it governs."""
    h = Harness()

    def select_then_call(_request: object) -> ModelReply:
        assert h.plan.set(h.agent, True) == "queued"  # the turn is open during the model call
        return ModelReply.call("unknown_tool")

    model = ScriptedModel([select_then_call, ModelReply.say("done")])
    run(Loop(h.runtime, h.agent, model).prompt("go"))
    types = [(e.type, e.data.get("step") if isinstance(e.data, dict) else None) for e in h.log.events]
    i_mode = next(i for i, e in enumerate(h.log.events) if e.type == PLAN_MODE_EVENT)
    i_end1 = types.index((STEP_END, 1))
    i_start2 = types.index((STEP_START, 2))
    i_header2 = max(i for i, e in enumerate(h.log.events) if e.type == REQUEST_HEADER)
    assert i_end1 < i_mode < i_start2 < i_header2
    assert SECTION in model.requests[1].system and SECTION not in model.requests[0].system


def test_net_zero_flip_clears_without_append_B25() -> None:
    """B25: set(true) then set(false) in one open turn → boundary clears, no append, no notice."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.plan.set(h.agent, False)
    out = h.boundary([PROBE])
    assert out == [PROBE] and h.plan_events() == [] and h.get == {"active": False}


def test_boundary_notice_appended_last_and_decided_before_flush_B26() -> None:
    """B26: a narrated selection whose target differs from the header-time state adds one
    notice after all other entering messages; dropped when the flush raises."""
    h = Harness()
    h.open_turn()
    h.header()
    h.plan.set(h.agent, True)
    other = user_message("other")
    out = h.boundary([PROBE, other])
    assert out[:2] == [PROBE, other] and len(out) == 3
    assert notice_text(out[2]) == CAT.text("notice.to_plan")
    assert out[2]["source"]["plugin"] == "plan-mode"

    h2 = Harness(events=[("plan/mode", {"active": True})])
    h2.open_turn()
    h2.header()
    h2.plan.set(h2.agent, False)
    h2.log.fail_next = OSError("refused")
    assert h2.boundary([PROBE]) == [PROBE]  # flush failed: no notice
    out2 = h2.boundary([PROBE])
    assert [notice_text(m) for m in out2[1:]] == [CAT.text("notice.to_default")]


def test_narrated_at_most_once_B27() -> None:
    """B27: later boundaries with nothing pending add no further notices."""
    h = Harness()
    h.open_turn()
    h.header()
    h.plan.set(h.agent, True)
    assert len(h.boundary([PROBE])) == 2
    assert h.boundary([PROBE]) == [PROBE]
    assert h.boundary([PROBE]) == [PROBE]


def test_approved_exit_flushes_silently_B28() -> None:
    """B28: the exit tool's record (narrate=false) flushes with no notice even when the last
    header described plan mode."""
    h = Harness(review=ScriptedReviewChannel().approve(), events=[("plan/mode", {"active": True})])
    h.open_turn()
    h.header()
    run(h.plan.exit_plan_mode({"plan": PLAN}, h.agent))
    assert h.boundary([PROBE]) == [PROBE]
    assert h.plan_events() == [True, False]


def test_flush_failure_contained_logged_once_and_kept_B29(caplog: pytest.LogCaptureFixture) -> None:
    """B29: a failing plan/mode append during a pre-step logs exactly one warning, returns the
    batch unchanged (the step goes ahead) and keeps the record."""
    h = Harness()
    h.open_turn()
    h.header()
    h.plan.set(h.agent, True)
    h.log.fail_next = OSError("disk full")
    with caplog.at_level(logging.WARNING):
        out = h.boundary([PROBE])
    assert out == [PROBE]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "disk full" in warnings[0].getMessage()
    assert warnings[0].getMessage().startswith("plan-mode:")
    assert h.get == {"active": False, "pending": True}


def test_next_healthy_boundary_appends_after_failure_B30() -> None:
    """B30: after a contained failure, the next healthy accepted pre-step appends plan/mode."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.log.fail_next = OSError("x")
    h.boundary()
    h.boundary()
    assert h.plan_events() == [True] and h.get == {"active": True}


def test_rejected_pre_step_does_not_flush_B31() -> None:
    """B31 (and Q7): a step the host rejects never reaches pre_step: the record is kept, no
    notice."""
    h = Harness()
    h.header()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.close_turn()
    h.agent.steer(user_message("hi"))
    loop = Loop(h.runtime, h.agent, ScriptedModel([]), accept=lambda agent, batch: False)
    outcomes = run(loop.run_until_idle())
    assert outcomes[0].reason == "blocked"
    assert h.plan_events() == [] and h.get == {"active": False, "pending": True}
    assert h.notices() == []


def test_aborted_pre_step_does_not_flush_B32() -> None:
    """B32: a pre-step whose turn cancellation is signalled keeps the record."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    assert h.boundary([PROBE], aborted=True) == [PROBE]
    assert h.plan_events() == [] and h.get == {"active": False, "pending": True}


def test_hook_acts_on_the_final_decision_of_other_participants_B33() -> None:
    """B33: plan mode works on the message list the other participants produced (it runs after
    them when registered later, and the host only calls pre_step once the step is accepted)."""
    h = Harness(attach=False)
    extra = user_message("from another participant")
    h.runtime.add_pre_step(lambda agent, msgs, aborted: [*msgs, extra])
    h.plan.attach(h.runtime)
    h.open_turn()
    h.header()
    h.plan.set(h.agent, True)
    out = h.boundary([PROBE])
    assert out[:2] == [PROBE, extra] and notice_text(out[2]) == CAT.text("notice.to_plan")


def test_same_step_retry_keeps_the_selection_for_the_next_pre_step_B34() -> None:
    """B34 (and Q8): a selection made while a failed request is recovered does not affect the retry
    (same system text and tools, no plan/mode); once the turn ends get reads pending; the next
    turn's first accepted pre-step flushes it with one notice and a changed header."""
    h = Harness()
    model = ScriptedModel([ModelError("overloaded"), ModelReply.say("ok"), ModelReply.say("planning")])

    def recover(loop: Loop, error: BaseException) -> None:
        assert h.plan.set(h.agent, True) == "queued"

    loop = Loop(h.runtime, h.agent, model, on_request_error=recover)
    run(loop.prompt("first"))
    assert model.requests[0].system == model.requests[1].system
    assert SECTION not in model.requests[1].system
    assert model.requests[0].tool_names == model.requests[1].tool_names
    assert h.plan_events() == [] and h.get == {"active": False, "pending": True}
    run(loop.prompt("second"))
    assert h.plan_events() == [True]
    assert SECTION in model.requests[2].system
    assert model.requests[2].tool_names == model.requests[0].tool_names
    assert h.notices() == [CAT.text("notice.to_plan")]
    headers = [e.data["reason"] for e in h.log.events if e.type == REQUEST_HEADER]
    assert headers == ["initial", "change"]
    i_mode = next(i for i, e in enumerate(h.log.events) if e.type == PLAN_MODE_EVENT)
    starts = [i for i, e in enumerate(h.log.events) if e.type == "turn/start"]
    step_starts = [i for i, e in enumerate(h.log.events) if e.type == STEP_START]
    assert starts[1] < i_mode < step_starts[-1]


def test_idle_set_then_boundary_adds_nothing_B35() -> None:
    """B35: set(true) outside a turn commits at once; a later boundary appends nothing."""
    h = Harness()
    h.plan.set(h.agent, True)
    h.open_turn()
    assert h.boundary([PROBE]) == [PROBE]
    assert h.plan_events() == [True]


def test_exit_tool_is_registered_under_its_protocol_name() -> None:
    """The exit tool the boundary tests rely on is the protocol constant name."""
    assert EXIT_PLAN_MODE in Harness().runtime.tools
