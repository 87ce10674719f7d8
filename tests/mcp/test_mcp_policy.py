"""The tool policy at the MCP server: it serves only fsm_stage's own tools, which every policy
lets through (an MCP client runs its host tools itself), and its catalog stays byte-identical
across stages, whatever the stages' policies say."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp_helpers import approve, events, text_of

from fsm_stage.config import load_config
from fsm_stage.mcp.server import build_server
from fsm_stage.mcp.sessions import SessionRegistry

pytestmark = pytest.mark.anyio

# every rule that could catch a tool by name: deny all but read_file, ask for everything else
GRAPH = """\
name: strict
section: Call goto_stage with one of << stage_targets >>.
min_handoff_tokens: 1000000
stages:
  - name: work
    instruction: Work.
    tools:
      allow: [read_file]
      ask: ["*", {tool: "*", paths: ["**"]}]
    targets: [other]
  - name: other
    instruction: Other.
    tools:
      allow: []
plan_mode:
  section: Plan first.
  tools:
    allow: [read_file]
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_own_tools_pass_every_policy_and_the_catalog_never_changes(tmp_path: Path) -> None:
    graph = tmp_path / "strict.yaml"
    graph.write_text(GRAPH, encoding="utf-8")
    log = tmp_path / "s.jsonl"
    app = build_server(SessionRegistry(load_config(graph), {"default": str(log)}, cwd=tmp_path))
    async with Client(app.server, elicitation_callback=approve()) as c:
        before = (await c.list_tools()).tools
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["stage"] == "work"
        moved = await c.call_tool("goto_stage", {"stage": "other"})
        assert not moved.is_error, text_of(moved)
        assert json.loads(text_of(await c.call_tool("get_stage", {})))["stage"] == "other"
        after = (await c.list_tools()).tools
    assert [t.model_dump() for t in after] == [t.model_dump() for t in before]
    assert [t.name for t in before] == ["exit_plan_mode", "get_stage", "goto_stage"]
    assert not [e for e in events(log) if e["type"] in ("fsm/tool/refused", "fsm/review/request")
                and e["data"].get("kind", "tool") == "tool"]
    assert isinstance(before[0], types.Tool)
