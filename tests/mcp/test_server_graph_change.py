"""A session log recorded under one version of the stage graph, served by an MCP server running
another (a stage renamed): without ``--accept-graph-change`` every transition is refused in one
line that says how to go on, never a traceback; with it the session leaves the renamed stage and
the new graph is recorded."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp_helpers import GRAPH, approve, events, stages, text_of

from fsm_stage.config import load_config
from fsm_stage.log.dsh import read_log
from fsm_stage.log.projections import StageProjection, fold
from fsm_stage.mcp.server import build_server
from fsm_stage.mcp.sessions import SessionRegistry

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _renamed(tmp_path: Path) -> Path:
    """feature-work with ``implement`` renamed ``build``."""
    text = Path(GRAPH).read_text(encoding="utf-8")
    path = tmp_path / "renamed.yaml"
    path.write_text(text.replace("name: implement", "name: build").replace("[implement]", "[build]"),
                    encoding="utf-8")
    return path


async def _recorded_in_implement(tmp_path: Path) -> Path:
    log = tmp_path / "s.jsonl"
    registry = SessionRegistry(load_config(GRAPH), {"default": str(log)}, cwd=tmp_path)
    try:
        async with Client(build_server(registry).server, elicitation_callback=approve()) as c:
            assert not (await c.call_tool("goto_stage", {"stage": "implement"})).is_error
    finally:
        registry.close()
    assert stages(log) == ["implement"]
    return log


async def _goto(tmp_path: Path, log: Path, stage: str, **kw: Any) -> Any:
    """goto_stage ``stage`` as a full transition (a handoff document, a large context)."""
    registry = SessionRegistry(load_config(_renamed(tmp_path)), {"default": str(log)}, cwd=tmp_path, **kw)
    args = {"stage": stage, "handoff": "# Handoff\nwhat was done", "context_tokens": 100_000}
    try:
        async with Client(build_server(registry).server, elicitation_callback=approve()) as c:
            return await c.call_tool("goto_stage", args)
    finally:
        registry.close()


async def test_a_changed_graph_refuses_in_one_line_naming_the_flag(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    log = await _recorded_in_implement(tmp_path)
    caplog.set_level(logging.DEBUG)
    refused = await _goto(tmp_path, log, "explore")
    assert refused.is_error and "recorded with stage graph 'feature-work'" in text_of(refused)
    assert "fsm-stage mcp --accept-graph-change" in text_of(refused)
    assert "fsm-stage worker --accept-graph-change" in text_of(refused)
    assert not [r for r in caplog.records if r.exc_info], "a graph change is no tool bug: no traceback"
    assert stages(log) == ["implement"]
    assert not list(tmp_path.rglob("*.md")), "refused before the handoff document is written"


async def test_accepting_the_change_leaves_the_renamed_stage_and_records_the_graph(tmp_path: Path) -> None:
    log = await _recorded_in_implement(tmp_path)
    moved = await _goto(tmp_path, log, "explore", accept_graph_change=True)
    assert not moved.is_error, text_of(moved)
    assert "handoff" in text_of(moved).lower(), text_of(moved)
    assert fold(StageProjection(), read_log(log).events).stage == "explore"  # a full move: a handoff notice
    graphs = [e["data"]["fingerprint"] for e in events(log) if e["type"] == "fsm/graph"]
    assert len(graphs) == 2 and graphs[0] != graphs[1]


def test_the_cli_flag_reaches_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from fsm_stage.cli import main
    from fsm_stage.mcp import run, sessions

    seen: dict[str, Any] = {}

    class Recording(sessions.SessionRegistry):
        def __init__(self, *args: Any, **kw: Any) -> None:
            seen.update(kw)
            super().__init__(*args, **kw)

    async def no_serve(app: Any) -> None:
        return None

    monkeypatch.setattr(sessions, "SessionRegistry", Recording)
    monkeypatch.setattr(run, "serve_stdio", no_serve)
    argv = ["mcp", "--graph", str(GRAPH), "--log", "memory:", "--cwd", str(tmp_path)]
    assert CliRunner().invoke(main, [*argv, "--accept-graph-change"]).exit_code == 0
    assert seen["accept_graph_change"] is True
    assert CliRunner().invoke(main, argv).exit_code == 0
    assert seen["accept_graph_change"] is False
