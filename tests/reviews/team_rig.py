"""A team-rules host over a JSONL log for the CLI review tests: a graph whose edges carry review
rules, a reviewers file with known tokens, a suspended goto_stage and a resume in a new host."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

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


def suspended(tmp_path: Path, target: str = "implement", *, cwd: Path | None = None,
              handoff: str = "# Handoff\nGo.") -> tuple[Path, str]:
    """A session log ``tmp_path/s.jsonl`` (session cwd ``cwd``, default ``tmp_path``) whose
    goto_stage(``target``) review is open; the host has stopped."""
    from fsm_stage.driver import ModelReply

    path = tmp_path / "s.jsonl"
    call = ModelReply.call("goto_stage", {"stage": target, "handoff": handoff})
    loop, _ = host(path, cwd or tmp_path, [call])
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


def with_rules(path: Path, rules: Any) -> None:
    """Rewrite the logged review request's ``rules`` (as a damaged or newer log would hold them)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        obj = json.loads(line)
        if obj.get("type") == "fsm/review/request":
            obj["data"]["rules"] = rules
            lines[i] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
