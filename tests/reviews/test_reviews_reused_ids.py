"""A call id used again later (providers and adapters may number calls per turn) is a new call:
it is asked afresh, never answered from an old, already used or declined review."""

from __future__ import annotations

from pathlib import Path

from rig import Rig, run

from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.runtime.review import Answer, ScriptedReviewChannel


def _approving() -> ScriptedReviewChannel:
    return ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])


def test_a_reused_call_id_after_an_applied_switch_asks_again(tmp_path: Path) -> None:
    review = _approving()
    rig = Rig(MemoryLog(SessionHeader(id="r", cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.goto_call("implement", call_id="call_0"))).is_error
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement"
    assert not run(rig.call(rig.goto_call("explore", call_id="call_1"))).is_error
    rig.step(3)
    assert rig.stage.current(rig.session) == "explore"
    again = run(rig.call(rig.goto_call("implement", call_id="call_0")))
    assert not again.is_error, again.text
    assert len(review.requests) == 3  # the reused id was asked, not answered from the first review
    rig.step(4)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 3


def test_a_reused_call_id_after_a_kept_review_asks_again(tmp_path: Path) -> None:
    review = ScriptedReviewChannel().keep("not yet").approve()
    rig = Rig(MemoryLog(SessionHeader(id="k", cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()
    kept = run(rig.call(rig.goto_call("implement", call_id="call_0")))
    assert kept.is_error and "not yet" in kept.text
    approved = run(rig.call(rig.goto_call("implement", call_id="call_0")))
    assert not approved.is_error, approved.text
    assert len(review.requests) == 2


def test_a_reused_call_id_after_a_plan_exit_asks_again(tmp_path: Path) -> None:
    review = _approving()
    rig = Rig(MemoryLog(SessionHeader(id="p", cwd=str(tmp_path))), review)
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.exit_call(call_id="call_0"))).is_error
    rig.step(2)
    assert rig.plan.get(rig.agent).to_json() == {"active": False}
    rig.plan.set(rig.agent, True)
    rig.step(3)
    assert rig.plan.get(rig.agent).active
    assert not run(rig.call(rig.exit_call(call_id="call_0"))).is_error
    assert len(review.requests) == 2
    rig.step(4)
    assert rig.plan.get(rig.agent).to_json() == {"active": False}
