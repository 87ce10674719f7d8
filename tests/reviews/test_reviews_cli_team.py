"""``fsm-stage review LOG --approve/--keep ID --as NAME``: the reviewer is authenticated with a
token (``--token-file`` or ``FSM_STAGE_REVIEWER_TOKEN``) against ``--reviewers FILE``, and the
review's rules (approvers, quorum, not_requester, deadline) decide; a refusal is one line, exit 1,
nothing written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from fsm_stage.cli import main
from fsm_stage.config import load_config_text
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews._team import token_sha256

TEAM_GRAPH = """
name: team
section: When done, call goto_stage.
stages:
  - name: explore
    instruction: Explore.
    targets:
      - to: implement
        review: {approvers: [alice, bob, '@leads'], quorum: 2, not_requester: true, deadline: 1h}
      - to: verify
        review: {approvers: [alice]}
  - name: implement
    instruction: Implement.
  - name: verify
    instruction: Verify.
"""
TOKENS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "dave": "dave-secret"}


def write_reviewers(tmp_path: Path) -> Path:
    path = tmp_path / "reviewers.yaml"
    path.write_text(
        "reviewers:\n"
        f"  alice: {{token_sha256: {token_sha256(TOKENS['alice'])}}}\n"
        f"  bob: {{token_sha256: {token_sha256(TOKENS['bob'])}}}\n"
        f"  carol: {{token_sha256: {token_sha256(TOKENS['carol'])}, groups: [leads]}}\n"
        f"  dave: {{token_sha256: {token_sha256(TOKENS['dave'])}}}\n", encoding="utf-8")
    return path


def host(path: Path, cwd: Path, replies: list[Any]) -> tuple[Any, Any]:
    """A host over the JSONL log at ``path`` (created with requester bob): (its Loop, the host)."""
    from fsm_stage import open_session
    from fsm_stage.driver import Loop, ScriptedModel
    from fsm_stage.reviews import SuspendingReviewChannel

    cfg = load_config_text(TEAM_GRAPH)
    assert cfg.graph is not None
    log = JsonlLog(path, header=SessionHeader("team-cli", cwd=str(cwd), extra={"requester": "bob"}))
    opened = open_session(cfg.graph, log, review=SuspendingReviewChannel(), guidance=False, repair=False)
    return Loop(opened.runtime, opened.agent, ScriptedModel(replies)), opened


def suspended(tmp_path: Path, target: str = "implement") -> tuple[Path, str]:
    """A session log whose goto_stage(``target``) review is open; the host has stopped."""
    from fsm_stage.driver import ModelReply

    path = tmp_path / "s.jsonl"
    call = ModelReply.call("goto_stage", {"stage": target, "handoff": "# Handoff\nGo."})
    loop, _ = host(path, tmp_path, [call])
    (outcome,) = asyncio.run(loop.prompt("go"))
    assert outcome.reason == "suspended"
    loop.agent.session.log.close()
    return path, outcome.review_id


def resume(path: Path, cwd: Path) -> str:
    """Resume the suspended turn in a new host; returns the stage after it."""
    from fsm_stage.driver import ModelReply

    loop, opened = host(path, cwd, [ModelReply.say("working")])
    try:
        asyncio.run(loop.resume())
        return str(opened.stage.current(opened.session))
    finally:
        opened.session.log.close()


def cli(path: Path, *args: str, token: str | None = None, env: dict[str, str] | None = None) -> Result:
    environ = dict(env or {})
    if token is not None:
        environ["FSM_STAGE_REVIEWER_TOKEN"] = token
    return CliRunner().invoke(main, ["review", str(path), *args], env=environ)


def events(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [e["data"] for e in map(json.loads, lines) if e["type"] == kind]


def test_a_quorum_of_authenticated_reviewers_approves_through_the_cli(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)
    reviewers = str(write_reviewers(tmp_path))
    alice = tmp_path / "alice.token"
    alice.write_text(TOKENS["alice"] + "\n", encoding="utf-8")
    first = cli(path, "--approve", rid, "--as", "alice", "--token-file", str(alice), "--reviewers", reviewers)
    assert first.exit_code == 0, first.output
    assert first.output == f"review {rid}: approval by alice recorded (1 of 2); the review stays open\n"
    assert events(path, "fsm/review/vote") == [{"id": rid, "reviewer": "alice"}]
    assert events(path, "fsm/review/answer") == []
    second = cli(path, "--approve", rid, "--as", "carol", "--reviewers", reviewers, "--json",
                 token=TOKENS["carol"])  # a member of @leads, token from the environment
    assert second.exit_code == 0, second.output
    out = json.loads(second.output)
    assert out["answer"]["outcome"] == "approve" and out["answer"]["by"] == "cli"
    assert out["answer"]["reviewers"] == ["alice", "carol"]
    assert out["vote"] == {"reviewer": "carol", "votes": ["alice", "carol"], "needed": 2}
    assert resume(path, tmp_path) == "implement"


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
