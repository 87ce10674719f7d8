"""One person is one reviewer, however a name is spelled: case variants neither add a quorum
vote nor get past not_requester, a string that is no reviewer name answers nothing, and a vote
the rules would refuse (written into the log by hand) never counts toward a quorum, and a quorum
approves one option: no voter's choice is dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from team_rig import resume, suspended, with_rules, write_reviewers

from fsm_stage.errors import ReviewRefusedError
from fsm_stage.log import open_log
from fsm_stage.reviews import load_reviewers, open_reviews
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


def test_a_quorum_whose_earlier_votes_count_later_completes_without_a_new_vote(tmp_path: Path) -> None:
    """carol (of @leads) votes with the reviewers file, alice without it: carol's vote does not
    count for that answer (fail closed), but once both count the approval completes on the next
    answer of either of them, with no third person needed; a vote for another option than any
    logged one, counted or not, is refused, so the votes never disagree."""
    path, rid = suspended(tmp_path, "implement")  # approvers alice, bob, @leads; quorum 2; requester bob
    leads = load_reviewers(write_reviewers(tmp_path))
    with open_log(path) as log:
        assert vote_review(log, rid, "approve", reviewer="carol", reviewers=leads).votes == ("carol",)
        with pytest.raises(ReviewRefusedError, match="the votes so far approve with 'Approve'"):
            vote_review(log, rid, "approve", reviewer="alice", option="Approve and keep the conversation")
        alone = vote_review(log, rid, "approve", reviewer="alice")  # no reviewers file: carol not counted
        assert alone.answer is None and alone.votes == ("alice",)
        with pytest.raises(ReviewRefusedError) as again:
            vote_review(log, rid, "approve", reviewer="alice")  # still without the file: 1 of 2
        assert again.value.voted_before and again.value.votes == ("alice",) and "(1 of 2)" in str(again.value)
        done = vote_review(log, rid, "approve", reviewer="alice", reviewers=leads)
        assert done.answer is not None and done.answer.reviewers == ("carol", "alice")
        assert len([e for e in log.events if e.type == "fsm/review/vote"]) == 2
    assert resume(path, tmp_path) == "implement"


def test_names_equal_up_to_case_are_one_approver_everywhere(tmp_path: Path) -> None:
    from fsm_stage.config import load_config_text
    from fsm_stage.errors import ConfigError, UserError
    from fsm_stage.reviews._team import may_answer

    assert may_answer({"approvers": ["alice"]}, "Alice", None)
    assert may_answer({"approvers": ["@leads"]}, "CAROL", load_reviewers(write_reviewers(tmp_path)))
    graph = "name: g\nsection: s\nstages:\n  - {name: a, instruction: x, targets: [{to: b, review: %s}]}\n" \
            "  - {name: b, instruction: y}\n"
    for review, message in (("{approvers: [alice, Alice], quorum: 2}", "Alice and alice are one reviewer"),
                            ("{approvers: [alice, %s]}" % ("b" * 65), "must match")):
        with pytest.raises(ConfigError, match=message):
            load_config_text(graph % review)
    twins = tmp_path / "twins.yaml"
    twins.write_text("reviewers:\n  carol: {}\n  Carol: {}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r":3:3: reviewers.Carol: Carol and carol are one reviewer"):
        load_reviewers(twins)


@pytest.mark.parametrize("requester", ["", "  ", "bob ", "Bob Smith", "@leads", 7])
def test_a_requester_that_is_no_reviewer_name_lets_nobody_approve(tmp_path: Path, requester: object) -> None:
    """``not_requester`` fails closed on a header whose requester is not a reviewer name: as
    with no requester at all, nobody can be told apart from them, so no approval is accepted
    (a keep still is)."""
    path, rid = suspended(tmp_path, "verify")  # requester bob
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["requester"] = requester
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with_rules(path, {"notRequester": True})
    with open_log(path) as log:
        for who in ("bob", "alice"):
            with pytest.raises(ReviewRefusedError, match="who started it"):
                vote_review(log, rid, "approve", reviewer=who)
        assert vote_review(log, rid, "keep", reviewer="alice").answer is not None
