"""The MCP server over a DeepSeek Harness fork (header ``parentSession`` / ``seedLength``, the
seed verbatim, no ``forked`` events): the parent's approved-unused stage review is not pending in
the fork and is never applied; the fork asks again (docs/reviews.md, "Forks")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp_helpers import approve, events, text_of

from fsm_stage.config import load_config
from fsm_stage.mcp.server import build_server
from fsm_stage.mcp.sessions import SessionRegistry

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "reviews") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "reviews"))
from test_reviews_dsh_fork import _approved_parent, _dsh_fork  # noqa: E402

pytestmark = pytest.mark.anyio

GRAPH = """\
name: reviewed
initial: explore
handoff_dir: handoff
section: Call goto_stage when done.
stages:
  - {name: explore, instruction: Do the explore work.}
  - {name: implement, instruction: Do the implement work.}
  - {name: verify, instruction: Do the verify work.}
"""  # the graph of tests/reviews/rig.py (the same fingerprint)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_dsh_fork_served_over_mcp_never_applies_the_parents_approval(tmp_path: Path) -> None:
    child = tmp_path / "child.jsonl"
    parent = await anyio.to_thread.run_sync(_approved_parent, tmp_path)  # it runs its own event loop
    _dsh_fork(parent, child)
    graph = tmp_path / "g.yaml"
    graph.write_text(GRAPH, encoding="utf-8")
    app = build_server(SessionRegistry(load_config(graph), {"default": str(child)}, cwd=tmp_path))
    async with Client(app.server, elicitation_callback=approve()) as c:
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["stage"] == "explore" and status["pending"] is None and status["openReviews"] == []
        r = await c.call_tool("goto_stage", {"stage": "verify", "handoff": "# Handoff\nfork work"})
        assert not r.is_error, text_of(r)
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
    assert status["stage"] == "verify"
    applied = [e["data"] for e in events(child) if e["type"] == "fsm/review/redeemed"]
    assert len(applied) == 1 and applied[0]["applied"] is True  # the fork's own review, not the parent's
