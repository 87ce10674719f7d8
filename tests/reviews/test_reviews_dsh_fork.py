"""A fork made by anyone (a DeepSeek Harness fork: the seed copied verbatim, a header with
``parentSession`` / ``seedLength``, no ``forked`` redemptions written) never uses the parent's
unused approvals nor answers its open reviews: every review asked before ``seedLength`` and not
redeemed there is forked, at every entry point (runtime step, ``fsm-stage state``,
``fsm-stage review``, ``answer_review``) — docs/reviews.md, "Forks"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rig import Rig, run

from fsm_stage.cli import main
from fsm_stage.constants import TURN_END
from fsm_stage.errors import ReviewAlreadyAnsweredError, ReviewPending
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import (
    Answer,
    ScriptedReviewChannel,
    SuspendingReviewChannel,
    answer_review,
    open_reviews,
)


def _dsh_fork(parent: Path, child: Path) -> int:
    """Write ``child`` as DeepSeek Harness forks: header ``{…, id, parentSession, seedLength}``,
    every parent event verbatim, then ``session/end-seed {}`` at seq ``seedLength``."""
    lines = parent.read_text().splitlines()
    header = json.loads(lines[0])
    seed = lines[1:]
    header.update({"id": "child", "parentSession": header["id"], "seedLength": len(seed)})
    end = {"type": "session/end-seed", "seq": len(seed), "time": header["createdAt"], "data": {}}
    child.write_text("\n".join([json.dumps(header), *seed, json.dumps(end)]) + "\n")
    return len(seed)


def _approved_parent(tmp_path: Path) -> Path:
    """explore: goto_stage implement approved, the turn aborted before the step applied it."""
    path = tmp_path / "parent.jsonl"
    approve = ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])
    rig = Rig(JsonlLog(path, header=SessionHeader(id="parent", cwd=str(tmp_path))), approve)
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.goto_call("implement"))).is_error
    rig.session.append(TURN_END, {"turn": 1, "reason": {"kind": "aborted"}})
    rig.close()
    return path


def test_a_dsh_fork_never_applies_the_parents_unused_approval(tmp_path: Path) -> None:
    child = tmp_path / "child.jsonl"
    _dsh_fork(_approved_parent(tmp_path), child)
    report = json.loads(CliRunner().invoke(main, ["state", "--json", str(child)]).output)
    assert report["stage"]["pending"] is None
    with JsonlLog(child) as log:
        rig = Rig(log, SuspendingReviewChannel())
        assert rig.stage.pending_stage(rig.session) is None
        rig.open_turn()
        rig.step()
        assert rig.stage.current(rig.session) == "explore" and rig.stage_records() == 0
        assert not any(e.type == "fsm/review/redeemed" and e.data["applied"] for e in rig.session.events)
        with pytest.raises(ReviewPending):  # the fork asks again instead of "already approved"
            run(rig.call(rig.goto_call("implement", call_id="call_again")))


def test_a_dsh_fork_cannot_answer_the_parents_open_review(tmp_path: Path) -> None:
    parent = tmp_path / "parent.jsonl"
    rig = Rig(JsonlLog(parent, header=SessionHeader(id="parent", cwd=str(tmp_path))),
              SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(rig.goto_call("implement")))
    rig.close()
    child = tmp_path / "child.jsonl"
    _dsh_fork(parent, child)
    listed = json.loads(CliRunner().invoke(main, ["review", str(child), "--json"]).output)
    assert listed["open"] == []
    cli = CliRunner().invoke(main, ["review", str(child), "--approve", pending.value.review_id])
    assert cli.exit_code == 1 and "forked" in cli.stderr
    with JsonlLog(child) as log:
        assert open_reviews(log) == ()
        with pytest.raises(ReviewAlreadyAnsweredError, match="forked"):
            answer_review(log, pending.value.review_id, "approve")
    with JsonlLog(parent) as log:  # the parent keeps its own review
        assert [r.id for r in open_reviews(log)] == [pending.value.review_id]
