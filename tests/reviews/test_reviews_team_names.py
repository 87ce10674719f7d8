"""One person is one reviewer, however a name is spelled: case variants neither add a quorum
vote nor get past not_requester, a string that is no reviewer name answers nothing, and a vote
the rules would refuse (written into the log by hand) never counts toward a quorum, and a quorum
approves one option: no voter's choice is dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from team_rig import resume, suspended, with_rules

from fsm_stage.errors import ReviewRefusedError
from fsm_stage.log import open_log
from fsm_stage.reviews import open_reviews
from fsm_stage.reviews._answer import vote_review


def test_case_variants_of_one_name_are_one_reviewer(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path, "verify")  # requester bob
    with_rules(path, {"quorum": 2, "notRequester": True})
    with open_log(path) as log:
        assert vote_review(log, rid, "approve", reviewer="alice").answer is None
        for variant in ("Alice", "ALICE"):
            with pytest.raises(ReviewRefusedError, match="already voted"):
                vote_review(log, rid, "approve", reviewer=variant)
        for variant in ("Bob", "BOB"):
            with pytest.raises(ReviewRefusedError, match="started this session"):
                vote_review(log, rid, "approve", reviewer=variant)
        assert len(open_reviews(log)) == 1
        done = vote_review(log, rid, "approve", reviewer="carol")
        assert done.answer is not None and done.answer.reviewers == ("alice", "carol")


@pytest.mark.parametrize("name", ["alice ", " alice", "al ice", "", "@leads", "a" * 65, "alice\n"])
def test_a_string_that_is_no_reviewer_name_answers_nothing(tmp_path: Path, name: str) -> None:
    path, rid = suspended(tmp_path, "verify")
    with_rules(path, {"quorum": 2})
    with open_log(path) as log:
        seen = len(log.events)
        with pytest.raises(ReviewRefusedError) as err:
            vote_review(log, rid, "approve", reviewer=name)
        assert "\n" not in str(err.value) and len(log.events) == seen


def test_a_forged_vote_does_not_count_toward_the_quorum(tmp_path: Path) -> None:
    """A vote by the requester, by a non-approver or by a non-name, appended by hand, is not
    counted: one real approver's vote does not complete a quorum of 2."""
    path, rid = suspended(tmp_path, "implement")  # approvers alice, bob, @leads; quorum 2; not_requester
    lines = path.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    for i, forged in enumerate(("bob", "mallory", "carol ")):
        lines.append(json.dumps({"type": "fsm/review/vote", "seq": last["seq"] + 1 + i, "time": last["time"],
                                 "data": {"id": rid, "reviewer": forged}, "ignorable": True}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_log(path) as log:
        one = vote_review(log, rid, "approve", reviewer="alice")
        assert one.answer is None and one.votes == ("alice",) and one.needed == 2
    assert resume(path, tmp_path) == "explore"


def test_a_quorum_approves_one_option(tmp_path: Path) -> None:
    """Each vote logs the approve option it chose; a vote for another option than the votes
    so far is refused (nothing written), so the shape applied is every voter's choice."""
    path, rid = suspended(tmp_path, "verify")
    with_rules(path, {"quorum": 2})
    light = "Approve and keep the conversation"
    with open_log(path) as log:
        vote_review(log, rid, "approve", reviewer="carol")  # the default: Approve (full)
        seen = len(log.events)
        with pytest.raises(ReviewRefusedError, match="the votes so far approve with 'Approve'"):
            vote_review(log, rid, "approve", reviewer="alice", option=light)
        assert len(log.events) == seen
        done = vote_review(log, rid, "approve", reviewer="alice", option="Approve")
        assert done.answer is not None and (done.answer.option, done.answer.shape) == ("Approve", "full")
        votes = [e.data for e in log.events if e.type == "fsm/review/vote"]
        assert [(v["reviewer"], v["option"]) for v in votes] == [("carol", "Approve"), ("alice", "Approve")]
