"""``fsm-stage review LOG --approve/--keep ID --as NAME``: the reviewer is authenticated with a
token (``--token-file`` or ``FSM_STAGE_REVIEWER_TOKEN``) against ``--reviewers FILE``, and the
review's rules (approvers, quorum, not_requester, deadline) decide; a refusal is one line, exit 1,
nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from team_rig import TOKENS, cli, events, resume, suspended, write_reviewers


def test_a_quorum_of_authenticated_reviewers_approves_through_the_cli(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)
    reviewers = str(write_reviewers(tmp_path))
    alice = tmp_path / "alice.token"
    alice.write_text(TOKENS["alice"] + "\n", encoding="utf-8")
    first = cli(path, "--approve", rid, "--as", "alice", "--token-file", str(alice), "--reviewers", reviewers)
    assert first.exit_code == 0, first.output
    assert first.output == f"review {rid}: approval by alice recorded (1 of 2); the review stays open\n"
    assert events(path, "fsm/review/vote") == [{"id": rid, "reviewer": "alice", "option": "Approve"}]
    assert events(path, "fsm/review/answer") == []
    second = cli(path, "--approve", rid, "--as", "carol", "--reviewers", reviewers, "--json",
                 token=TOKENS["carol"])  # a member of @leads, token from the environment
    assert second.exit_code == 0, second.output
    out = json.loads(second.output)
    assert out["answer"]["outcome"] == "approve" and out["answer"]["by"] == "cli:carol"
    assert out["answer"]["reviewers"] == ["alice", "carol"]
    assert out["vote"] == {"reviewer": "carol", "votes": ["alice", "carol"], "needed": 2}
    assert resume(path, tmp_path) == "implement"


def test_a_single_approval_reports_its_one_vote(tmp_path: Path) -> None:
    """Under no quorum the answer is the one vote it needs: ``vote.votes`` names the approver,
    as the answer's ``reviewers`` and the inbox API do (it was ``[]``, helper-79); a keep is no
    vote."""
    reviewers = str(write_reviewers(tmp_path))
    for outcome, votes in (("--approve", ["alice"]), ("--keep", [])):
        work = tmp_path / outcome.strip("-")
        work.mkdir()
        path, rid = suspended(work, "verify")
        out = cli(path, outcome, rid, "--as", "alice", "--reviewers", reviewers, "--json",
                  token=TOKENS["alice"])
        assert out.exit_code == 0, out.output
        report = json.loads(out.output)
        assert report["vote"] == {"reviewer": "alice", "votes": votes, "needed": 1}
        assert report["answer"]["reviewers"] == ["alice"]


@pytest.mark.parametrize(("name", "message"), [
    ("dave", "dave is not among the approvers of this review (alice, bob, @leads)"),
    ("bob", "bob started this session and may not approve its reviews (not_requester)"),
])
def test_an_answer_the_rules_refuse_is_one_line_and_writes_nothing(tmp_path: Path, name: str,
                                                                   message: str) -> None:
    path, rid = suspended(tmp_path)
    before = path.read_bytes()
    out = cli(path, "--approve", rid, "--as", name, "--reviewers", str(write_reviewers(tmp_path)),
              token=TOKENS[name])
    assert out.exit_code == 1
    assert out.output == f"fsm-stage: review {rid}: {message}\n"
    assert path.read_bytes() == before


def test_a_second_vote_by_one_reviewer_is_refused(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)
    args = ("--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)))
    assert cli(path, *args, token=TOKENS["alice"]).exit_code == 0
    before = path.read_bytes()
    again = cli(path, *args, token=TOKENS["alice"])
    assert again.exit_code == 1 and "alice already voted to approve (1 of 2)" in again.output
    assert again.output.count("\n") == 1 and path.read_bytes() == before


def test_the_requester_may_keep_and_a_keep_closes_the_quorum_review(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)
    out = cli(path, "--keep", rid, "--feedback", "not yet", "--as", "bob",
              "--reviewers", str(write_reviewers(tmp_path)), token=TOKENS["bob"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith(f"review {rid}: keep (Keep current stage) by bob, logged at seq ")
    (answer,) = events(path, "fsm/review/answer")
    assert answer["reviewers"] == ["bob"] and answer["feedback"] == "not yet"
    assert resume(path, tmp_path) == "explore"


@pytest.mark.parametrize(("token", "extra", "message"), [
    ("wrong", (), "fsm-stage: reviewer 'alice': unknown name or wrong token"),
    (None, (), "fsm-stage: review: --as needs the reviewer's token: --token-file FILE or "
               "FSM_STAGE_REVIEWER_TOKEN"),
    (None, ("--token-file", "missing.token"),
     "fsm-stage: review: --token-file missing.token: cannot read it"),
])
def test_a_missing_or_wrong_token_is_one_line_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     token: str | None, extra: tuple[str, ...],
                                                     message: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FSM_STAGE_REVIEWER_TOKEN", raising=False)
    path, rid = suspended(tmp_path, "verify")
    before = path.read_bytes()
    out = cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)), *extra,
              token=token)
    assert out.exit_code == 1 and out.output.startswith(message) and out.output.count("\n") == 1, out.output
    assert path.read_bytes() == before


def test_a_single_approver_rule_is_answered_at_once_and_needs_a_name(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path, "verify")
    anonymous = cli(path, "--approve", rid)
    assert anonymous.exit_code == 1 and "its rules need a named reviewer" in anonymous.output
    out = cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)),
              token=TOKENS["alice"])
    assert out.exit_code == 0, out.output
    assert " by alice, logged at seq " in out.output
    assert resume(path, tmp_path) == "verify"


def test_an_answer_after_the_deadline_is_refused_and_the_expiry_logged(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)
    # the request was asked an hour and a second ago
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines[1:], 1):
        event = json.loads(line)
        if event["type"] == "fsm/review/request":
            event["time"] -= 3_601_000
            lines[i] = json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    out = cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)),
              token=TOKENS["alice"])
    assert out.exit_code == 1 and "expired (deadline 3600 s); it was closed as dismiss" in out.output
    (answer,) = events(path, "fsm/review/answer")
    assert answer["outcome"] == "dismiss" and answer["by"] == "deadline"


def test_identity_options_go_together(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path, "verify")
    assert cli(path, "--approve", rid, "--as", "alice").exit_code == 2
    assert cli(path, "--approve", rid, "--reviewers", "r.yaml").exit_code == 2
    assert cli(path, "--approve", rid, "--token-file", "t").exit_code == 2


def test_the_listing_says_who_may_answer_and_until_when(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)
    shown = cli(path)
    assert shown.exit_code == 0, shown.output
    (line,) = [x for x in shown.output.splitlines() if x.startswith("  rules: ")]
    assert re.fullmatch(r"  rules: approvers alice, bob, @leads; quorum 2; not the requester; "
                        r"deadline in (59m\d+s|1h0m0s|1h) \(then dismiss\)", line), line
    (row,) = json.loads(cli(path, "--json").output)["open"]
    assert row["rules"]["quorum"] == 2 and row["rules"]["approvers"] == ["alice", "bob", "@leads"]
    (asked,) = [e["time"] for e in map(json.loads, path.read_text(encoding="utf-8").splitlines()[1:])
                if e["type"] == "fsm/review/request"]
    assert row["deadline_ms"] == asked + 3_600_000 and row["id"] == rid
