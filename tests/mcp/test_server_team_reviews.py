"""Reviews for teams over MCP: the server answers as an authenticated reviewer (``--as NAME``),
so the reviews' rules (approvers, @groups, quorum, not_requester, deadline) apply to the client's
answers exactly as to the API's and the CLI's; a refusal is one line and writes nothing (the call
stays open and is asked again); an approval may carry the reviewer's edited document, recorded
through ``answer_review``'s edit path; the reviews' webhooks are posted by ``fsm-stage mcp``."""

from __future__ import annotations

import hashlib
import http.server
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_helpers import ROOT, env, events, text_of

from fsm_stage.config import load_config
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.mcp.durable import McpReviewer
from fsm_stage.mcp.server import StageServer, build_server
from fsm_stage.mcp.sessions import SessionRegistry
from fsm_stage.reviews import load_reviewers
from fsm_stage.reviews._team import token_sha256

sys.path.insert(0, str(ROOT / "tests" / "reviews"))
import test_reviews_team as team_tests

pytestmark = pytest.mark.anyio
receiver = team_tests.receiver  # a local HTTP receiver of the webhooks (started by the test)
MODES = ["legacy", "modern"]

GRAPH = """
name: team
section: When done, call goto_stage.
min_handoff_tokens: 10
stages:
  - name: explore
    instruction: Explore.
    targets:
      - to: implement
        review: {approvers: [alice, bob, '@leads'], quorum: 2, not_requester: true%s}
      - to: verify
        review: {approvers: [alice]%s}
  - name: implement
    instruction: Implement.
  - name: verify
    instruction: Verify.
plan_mode:
  section: Plan first.
"""
TOKENS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "dave": "dave-secret"}
HANDOFF = "# Handoff\n\nThe plan as the model wrote it."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_graph(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(GRAPH % (extra, extra), encoding="utf-8")
    return path


def write_reviewers(tmp_path: Path) -> Path:
    path = tmp_path / "reviewers.yaml"
    lines = ["reviewers:"]
    for name, token in TOKENS.items():
        groups = ", groups: [leads]" if name == "carol" else ""
        lines.append(f"  {name}: {{token_sha256: {token_sha256(token)}{groups}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make(tmp_path: Path, reviewer: str | None, extra: str = "") -> tuple[StageServer, Path]:
    """A server over a new log whose header names bob as the session's requester."""
    log = tmp_path / "s.jsonl"
    if not log.exists():
        header = SessionHeader(f"team-{tmp_path.name}", cwd=str(tmp_path), extra={"requester": "bob"})
        JsonlLog(log, header=header).close()
    registry = SessionRegistry(load_config(write_graph(tmp_path, extra)), {"default": str(log)}, cwd=tmp_path)
    return build_server(registry, reviewer=as_reviewer(tmp_path, reviewer)), log


def as_reviewer(tmp_path: Path, name: str | None) -> McpReviewer | None:
    return None if name is None else McpReviewer(name, load_reviewers(write_reviewers(tmp_path)))


def client(app: StageServer, mode: str, callback: Any) -> Client:
    if mode == "legacy":
        return Client(app.server, mode="legacy", elicitation_callback=callback)
    return Client(app.server, elicitation_callback=callback)


def answering(decision: str = "Approve", **more: str) -> Any:
    async def callback(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": decision, **more})
    return callback


def of(log: Path, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events(log) if e["type"] == kind]


def stage_now(app: StageServer) -> str:
    ms = app.registry.get(None)
    assert ms.stage is not None
    return ms.stage.current(ms.session)


@pytest.mark.parametrize("mode", MODES)
async def test_a_reviewer_the_rules_do_not_name_is_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path, "dave")
    async with client(app, mode, answering()) as c:
        r = await c.call_tool("goto_stage", {"stage": "verify"})
        assert r.is_error
        assert "\n" not in text_of(r)
        assert "dave is not among the approvers of this review (alice)" in text_of(r)
        assert "nothing was written" in text_of(r)
        assert of(log, "fsm/review/answer") == [] and of(log, "tool/result") == []
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert [o["target"] for o in status["openReviews"]] == ["verify"]
        app.reviewer = as_reviewer(tmp_path, "alice")  # an approver answers the same call again
        r = await c.call_tool("goto_stage", {"stage": "verify"})
    assert not r.is_error, text_of(r)
    (answer,) = of(log, "fsm/review/answer")
    assert (answer["outcome"], answer["by"], answer["reviewers"]) == ("approve", "mcp", ["alice"])
    assert len(of(log, "tool/call")) == 1 and len(of(log, "tool/result")) == 1
    assert stage_now(app) == "verify"


@pytest.mark.parametrize("mode", MODES)
async def test_without_a_named_reviewer_rules_that_need_one_refuse_and_write_nothing(
        tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path, None)
    async with client(app, mode, answering()) as c:
        r = await c.call_tool("goto_stage", {"stage": "verify"})
    assert r.is_error and "its rules need a named reviewer" in text_of(r)
    assert of(log, "fsm/review/answer") == [] and of(log, "tool/result") == []
    assert stage_now(app) == "explore"


@pytest.mark.parametrize("mode", MODES)
async def test_a_quorum_over_mcp_counts_one_vote_per_reviewer_and_not_the_requester(
        tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path, "bob")  # bob started the session: not_requester
    async with client(app, mode, answering()) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
        assert r.is_error and "bob started this session and may not approve" in text_of(r)
        assert of(log, "fsm/review/vote") == []
        app.reviewer = as_reviewer(tmp_path, "alice")
        r = await c.call_tool("goto_stage", {"stage": "implement"})
        assert r.is_error and "approval by alice recorded (1 of 2)" in text_of(r)
        r = await c.call_tool("goto_stage", {"stage": "implement"})  # alice again: no second vote
        assert r.is_error and "alice already voted" in text_of(r)
        app.reviewer = as_reviewer(tmp_path, "carol")  # @leads
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert not r.is_error, text_of(r)
    assert [v["reviewer"] for v in of(log, "fsm/review/vote")] == ["alice", "carol"]
    (answer,) = of(log, "fsm/review/answer")
    assert answer["reviewers"] == ["alice", "carol"] and answer["by"] == "mcp"
    assert stage_now(app) == "implement"


@pytest.mark.parametrize("mode", MODES)
async def test_an_approval_with_edits_over_mcp_records_the_edited_bytes_and_applies_them(
        tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path, "alice")
    edited = "# Handoff\n\nThe plan as the reviewer corrected it.\n"
    asked: list[types.ElicitRequestParams] = []

    async def callback(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "Approve", "edited": edited})

    async with client(app, mode, callback) as c:
        r = await c.call_tool("goto_stage", {"stage": "verify", "handoff": HANDOFF, "context_tokens": 100000})
    assert not r.is_error, text_of(r)
    schema = asked[0].requested_schema  # type: ignore[union-attr]
    assert "handoff document" in schema["properties"]["edited"]["description"]
    (answer,) = of(log, "fsm/review/answer")
    (request,) = of(log, "fsm/review/request")
    assert answer["edited"] == edited
    assert answer["editedSha256"] == hashlib.sha256(f"verify\n{edited}".encode()).hexdigest()
    assert Path(request["handoffPath"]).read_text(encoding="utf-8") == edited
    assert "edited the handoff document" in json.dumps(events(log))
    assert stage_now(app) == "verify"


@pytest.mark.parametrize("mode", MODES)
async def test_edits_that_cannot_apply_are_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path, "alice")
    light = answering("Approve and keep the conversation", edited="# Mine\n")
    async with client(app, mode, light) as c:
        r = await c.call_tool("goto_stage", {"stage": "verify", "handoff": HANDOFF, "context_tokens": 100000})
    assert r.is_error and "light switch uses no document" in text_of(r) and "\n" not in text_of(r)
    assert of(log, "fsm/review/answer") == [] and of(log, "tool/result") == []


@pytest.mark.parametrize("mode", MODES)
async def test_an_edited_plan_over_mcp_is_the_plan_the_model_carries_out(tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path, "alice")
    ms = app.registry.get(None)
    assert ms.plan is not None
    ms.plan.set(ms.agent, True)  # the user's /plan, applied at a boundary
    ms.runtime.pre_step(ms.agent, [])
    edited = "# Plan\n\n1. Do it, with tests first."
    async with client(app, mode, answering(edited=edited)) as c:
        r = await c.call_tool("exit_plan_mode", {"plan": "# Plan\n\n1. Do it."})
    assert not r.is_error, text_of(r)
    assert text_of(r).endswith(edited) and "edits" in text_of(r)
    (answer,) = of(log, "fsm/review/answer")
    assert answer["edited"] == edited
    assert answer["editedSha256"] == hashlib.sha256(edited.encode()).hexdigest()


async def test_an_answer_after_the_deadline_is_closed_by_its_expiry(tmp_path: Path) -> None:
    app, log = make(tmp_path, "alice", extra=", deadline: 1s, on_deadline: keep")

    async def late(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(1.2)
        return types.ElicitResult(action="accept", content={"decision": "Approve"})

    async with client(app, "legacy", late) as c:
        r = await c.call_tool("goto_stage", {"stage": "verify"})
    assert r.is_error
    (answer,) = of(log, "fsm/review/answer")
    assert (answer["outcome"], answer["by"]) == ("keep", "deadline")
    assert len(of(log, "tool/result")) == 1 and stage_now(app) == "explore"
    # the model is told nobody decided, not handed a keep that reads like a person's
    assert "Nobody answered the stage review before its deadline" in text_of(r)
    assert "user" not in text_of(r).lower()
    assert answer["feedback"] == ("No reviewer answered before the review's deadline (1 s); "
                                  "nobody decided on it.")


# --- the command: --as, and the webhooks ----------------------------------------------------------


async def test_fsm_stage_mcp_as_a_reviewer_posts_the_reviews_webhooks(
        tmp_path: Path, receiver: http.server.HTTPServer) -> None:
    from fsm_stage.reviews._notify import SIGNATURE_HEADER, signature

    url = f"http://127.0.0.1:{receiver.server_port}/hook"
    graph = write_graph(tmp_path, f', notify: ["{url}"]')
    log = tmp_path / "s.jsonl"
    JsonlLog(log, header=SessionHeader("hooked", cwd=str(tmp_path), extra={"requester": "bob"})).close()
    e = env() | {"FSM_STAGE_REVIEWER_TOKEN": TOKENS["alice"], "FSM_STAGE_WEBHOOK_SECRET": "mcp-secret"}
    argv = ["-m", "fsm_stage", "mcp", "--graph", str(graph), "--log", str(log), "--cwd", str(tmp_path),
            "--as", "alice", "--reviewers", str(write_reviewers(tmp_path))]
    params = StdioServerParameters(command=sys.executable, args=argv, env=e)
    async with Client(params, mode="legacy", elicitation_callback=answering()) as c:
        r = await c.call_tool("goto_stage", {"stage": "verify"})
    assert not r.is_error, text_of(r)
    (answer,) = of(log, "fsm/review/answer")
    assert answer["reviewers"] == ["alice"]
    got: list[tuple[dict[str, str], bytes]] = receiver.received  # type: ignore[attr-defined]
    bodies = [json.loads(raw) for _h, raw in got]  # the server delivered what it queued on exit
    assert [b["event"] for b in bodies] == ["review.requested", "review.answered"]
    assert bodies[1]["answer"]["reviewer"] == "alice" and bodies[1]["session"] == "hooked"
    assert all(h[SIGNATURE_HEADER] == signature(raw, b"mcp-secret") for h, raw in got)


def test_fsm_stage_mcp_as_refuses_a_wrong_token_in_one_line_before_opening_a_log(tmp_path: Path) -> None:
    from fsm_stage.cli import main

    log = tmp_path / "s.jsonl"
    base = ["mcp", "--graph", str(write_graph(tmp_path)), "--log", str(log), "--cwd", str(tmp_path)]
    done = CliRunner().invoke(main, [*base, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path))],
                              env={"FSM_STAGE_REVIEWER_TOKEN": "wrong"})
    assert done.exit_code == 1 and "unknown name or wrong token" in done.output
    assert len(done.output.strip().splitlines()) == 1 and not log.exists()
    done = CliRunner().invoke(main, [*base, "--reviewers", str(write_reviewers(tmp_path))])
    assert done.exit_code == 2 and "go with --as NAME" in done.output and not log.exists()
