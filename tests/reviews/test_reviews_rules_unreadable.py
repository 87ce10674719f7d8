"""A review whose logged rules cannot be read lets nobody answer it (fail closed): the API, the
CLI and the web inbox all refuse, nothing is written, and its deadline still closes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from team_rig import TOKENS, cli, suspended, with_rules, write_reviewers

from fsm_stage.errors import ReviewRefusedError
from fsm_stage.log import open_log
from fsm_stage.reviews import answer_review, open_reviews
from fsm_stage.reviews._answer import vote_review
from fsm_stage.reviews._team import decide, rules_problem

UNREADABLE: list[tuple[Any, str]] = [
    (["alice"], "not a mapping"),
    ("alice", "not a mapping"),
    ({"approvers": "alice"}, "approvers is not a list of non-empty strings"),
    ({"approvers": ["alice", 7]}, "approvers is not a list of non-empty strings"),
    ({"approvers": ["alice"], "quorum": "2"}, "quorum is not a positive whole number"),
    ({"approvers": ["alice"], "quorum": 0}, "quorum is not a positive whole number"),
    ({"approvers": ["alice"], "quorum": True}, "quorum is not a positive whole number"),
    ({"notRequester": "yes"}, "notRequester is not true or false"),
    ({"onDeadline": "approve", "deadlineSeconds": 60}, "onDeadline is not keep or dismiss"),
    ({"notify": "http://x"}, "notify is not a list of non-empty strings"),
    ({"approvers": ["alice"], "approversAlso": ["mallory"]}, "a rule this reader does not know"),
    ({"invalid": True}, "not a mapping"),
    ({"approvers": []}, "approvers name nobody"),
    ({"approvers": None}, "approvers is null"),
    ({"approvers": ["alice"], "notify": None}, "notify is null"),
]


@pytest.mark.parametrize(("rules", "why"), UNREADABLE)
def test_unreadable_rules_refuse_every_answer_and_write_nothing(tmp_path: Path, rules: Any, why: str) -> None:
    path, rid = suspended(tmp_path, "verify")  # rules {approvers: [alice]}
    with_rules(path, rules)
    with open_log(path) as log:
        (record,) = open_reviews(log)
        assert rules_problem(record.rules) is not None and why in str(rules_problem(record.rules))
        seen = len(log.events)
        attempts = [lambda: answer_review(log, rid, "approve"),
                    lambda: answer_review(log, rid, "approve", reviewer="alice"),
                    lambda: vote_review(log, rid, "approve", reviewer="alice"),
                    lambda: vote_review(log, rid, "keep", reviewer="alice", feedback="no")]
        for attempt in attempts:
            with pytest.raises(ReviewRefusedError, match=r"nobody may answer it \(fail closed\)") as err:
                attempt()
            assert why in str(err.value) and "\n" not in str(err.value)
        assert len(log.events) == seen and open_reviews(log) == (record,)


def test_the_cli_refuses_unreadable_rules_in_one_line(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path, "verify")
    with_rules(path, {"approvers": ["alice"], "quorum": "many"})
    before = path.read_bytes()
    got = cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)),
              token=TOKENS["alice"])
    assert got.exit_code == 1 and (got.exception is None or isinstance(got.exception, SystemExit))
    assert "quorum is not a positive whole number" in got.output and "Traceback" not in got.output
    assert path.read_bytes() == before


def test_the_web_inbox_refuses_unreadable_rules(tmp_path: Path) -> None:
    from fsm_stage.inbox._auth import refusal

    for rules, why in UNREADABLE:
        shown = refusal(rules if isinstance(rules, dict) else {"invalid": True}, "alice", ())
        assert shown is not None and "nobody may answer it here" in shown
        assert why in shown or "not a mapping" in shown
    assert refusal({"approvers": ["alice"], "quorum": 2}, "alice", ()) is None
    assert refusal(None, None, ()) is None


def test_an_unreadable_deadline_still_expires_and_never_approves(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path, "verify")
    with_rules(path, {"approvers": ["alice"], "deadlineSeconds": "1h", "onDeadline": "keep"})
    with open_log(path) as log:
        (record,) = open_reviews(log)
        verdict = decide(log, record, "approve", reviewer="alice", reviewers=None, vote=True)
        assert verdict.expiry is not None and verdict.expiry.data["outcome"] == "keep"
        assert verdict.refusal is not None and "unreadable, so expired at once" in verdict.refusal
        with pytest.raises(ReviewRefusedError, match="expired"):
            vote_review(log, rid, "approve", reviewer="alice")
        answers = [e.data for e in log.events if e.type == "fsm/review/answer"]
        assert [(a["outcome"], a["by"]) for a in answers] == [("keep", "deadline")]


@pytest.mark.parametrize("seconds", [10**400, -(10**400), None, float("nan"), "1h", True])
def test_an_unreadable_deadline_of_any_shape_expires_at_once_in_one_line(tmp_path: Path,
                                                                        seconds: Any) -> None:
    path, rid = suspended(tmp_path, "verify")
    with_rules(path, {"approvers": ["alice"], "deadlineSeconds": seconds})
    got = cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)),
              token=TOKENS["alice"])
    assert got.exit_code == 1 and "Traceback" not in got.output, got.output
    assert "unreadable, so expired at once" in got.output
    with open_log(path) as log:
        (answer,) = [e.data for e in log.events if e.type == "fsm/review/answer"]
        assert (answer["outcome"], answer["by"]) == ("dismiss", "deadline")
        assert answer["feedback"] == ("No reviewer answered before the review's deadline; "
                                      "nobody decided on it.")
