"""The approved plan exit is a fold of the log (replaces B114's memory-only approval): a new
process over the same log applies it at its next step, once, without asking anyone."""

from __future__ import annotations

from pathlib import Path

from rig import Rig, run

from fsm_stage.constants import TURN_END
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import ScriptedReviewChannel


def test_an_approved_exit_survives_the_process_and_is_applied_once(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    log = JsonlLog(path, header=SessionHeader(id="p", cwd=str(tmp_path)))
    rig = Rig(log, ScriptedReviewChannel().approve())
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    assert run(rig.call(rig.exit_call())).value == {"approved": True}
    rig.session.append(TURN_END, {"turn": 1, "reason": {"kind": "aborted"}})
    rig.close()  # the process exits before the next step
    with JsonlLog(path) as reopened:
        review = ScriptedReviewChannel()  # nobody to ask: an empty queue raises
        again = Rig(reopened, review)
        assert again.plan.get(again.agent).to_json() == {"active": True, "pending": False}
        again.open_turn()
        again.step()
        again.step(2)
        assert [e.data["active"] for e in reopened.events if e.type == "plan/mode"] == [True, False]
        assert review.requests == [] and again.reviews().approved == ()


def test_a_user_selection_over_an_approved_exit_redeems_it_as_superseded(tmp_path: Path) -> None:
    rig = Rig(JsonlLog(tmp_path / "q.jsonl", header=SessionHeader(id="q", cwd=str(tmp_path))),
              ScriptedReviewChannel().approve())
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    run(rig.call(rig.exit_call()))
    assert rig.plan.set(rig.agent, True) == "cancelled"  # /plan during the turn: stay in plan mode
    rig.step(2)
    (red,) = rig.reviews().redeemed.values()
    assert (red.applied, red.reason) == (False, "superseded")
    assert rig.plan.logged(rig.session) is True
    rig.close()
