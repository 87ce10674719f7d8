"""After ``close()`` both controllers refuse writes and reads the same way (S96, S97,
B93): ``ControllerClosedError`` (a ``RuntimeError``) with a one-line message saying so."""

from __future__ import annotations

from typing import Any

import pytest

from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.runtime import ControllerClosedError

from .harness import Harness


def _both_closed() -> tuple[Harness, PlanModeController]:
    h = Harness()
    plan = PlanModeController({"section": "Plan first."})
    plan.attach(h.runtime)
    h.controller.close()
    plan.close()
    return h, plan


def test_set_after_close_raises_the_same_error_for_both_controllers_S96_B93() -> None:
    """S96/B93: a closed controller would never flush a selection, so ``set`` refuses for both,
    idle or mid-turn, and nothing is logged or queued."""
    h, plan = _both_closed()
    for turn_open in (False, True):
        if turn_open:
            h.open_turn()
        with pytest.raises(ControllerClosedError, match="stage switch is closed") as stage_err:
            h.controller.set(h.agent, "beta")
        with pytest.raises(ControllerClosedError, match="plan-mode controller is closed") as plan_err:
            plan.set(h.agent, True)
        for err in (stage_err, plan_err):
            assert isinstance(err.value, RuntimeError) and "\n" not in str(err.value)
    assert h.summaries() == [] and h.controller.pending_stage(h.session) is None
    assert [e for e in h.session.events if e.type == "plan/mode"] == []


def test_reads_after_close_raise_for_both_controllers_S97() -> None:
    """S97: the stage switch's reads raise rather than fall back to ``initial``; plan mode's
    reads (``get``, ``logged``, ``effective``) raise the same base error instead of answering
    from a controller that no longer runs."""
    h, plan = _both_closed()
    with pytest.raises(ControllerClosedError):
        h.controller.get(h.agent)
    assert issubclass(ControllerClosedError, ControllerClosedError)
    for read in (lambda: plan.get(h.agent), lambda: plan.logged(h.session), lambda: plan.effective(h.agent)):
        with pytest.raises(ControllerClosedError, match="plan-mode controller is closed"):
            read()


def test_attach_after_close_raises_the_same_error_for_both_controllers() -> None:
    h, plan = _both_closed()
    with pytest.raises(ControllerClosedError):
        h.controller.attach(h.runtime)
    with pytest.raises(ControllerClosedError):
        plan.attach(h.runtime)


def test_a_reload_during_the_answer_append_closes_the_approval_unused() -> None:
    """The controller closed (a reload on another thread) while the approval is being logged:
    the answer is settled after its append, so the approval is redeemed ``closed`` and the next
    controller does not apply a switch the model was told failed."""
    from fsm_stage.stage_switch import StageController

    h = Harness()
    h.review.approve()
    h.open_turn()
    h.boundary()
    append_many = h.log.append_many

    def reload_during_answer(specs: Any, **kw: Any) -> Any:
        out = append_many(specs, **kw)
        if any(s.type == "fsm/review/answer" for s in specs):
            h.controller.close()
        return out

    h.log.append_many = reload_during_answer  # type: ignore[method-assign]
    result = h.goto("beta", "## Done\n- x")
    h.log.append_many = append_many  # type: ignore[method-assign]
    assert result.is_error and "reloaded" in result.text
    redeemed = [e.data for e in h.session.events if e.type == "fsm/review/redeemed"]
    assert [(d["applied"], d["reason"]) for d in redeemed] == [(False, "closed")]
    after = StageController(h.config, handoffs=h.handoff_store, token_meter=h.meter)
    h.runtime.attach(after)
    h.boundary()
    assert after.current(h.session) == "alpha"
