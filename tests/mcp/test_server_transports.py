"""The server as a real process: the SDK's client over stdio and streamable HTTP, restart
mid-review, the MCP Inspector CLI, and ``import fsm_stage`` staying free of the SDK."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_helpers import ROOT, approve, env, events, server_argv, stages, start_http, text_of

pytestmark = pytest.mark.anyio
TOOLS = ["exit_plan_mode", "get_stage", "goto_stage"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stdio(log: Path, cwd: Path, *extra: str) -> StdioServerParameters:
    argv = server_argv(log, cwd, *extra)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env())


async def test_stdio_transition_and_restart_mid_review(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    async with Client(stdio(log, tmp_path), elicitation_callback=approve()) as c:
        assert [t.name for t in (await c.list_tools()).tools] == ["exit_plan_mode", "get_stage", "goto_stage"]
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["stage"] == "explore"
        first = await c.session.call_tool("goto_stage", {"stage": "implement"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert [r["kind"] for r in status["openReviews"]] == ["stage"]
    # the server process is gone; the review is open in the log
    assert [e["type"] for e in events(log) if e["type"].startswith("tool/")] == ["tool/call"]
    assert [e["type"] for e in events(log)].count("fsm/review/request") == 1
    assert (tmp_path / "s.jsonl.mcp-key").stat().st_mode & 0o077 == 0
    answer: dict[str, types.InputResponse] = {
        "review": types.ElicitResult(action="accept", content={"decision": "Approve"})}
    async with Client(stdio(log, tmp_path), elicitation_callback=approve()) as c:
        done = await c.session.call_tool("goto_stage", {"stage": "implement"}, input_responses=answer,
                                         request_state=first.request_state, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and not done.is_error, done
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["stage"] == "implement" and status["openReviews"] == []
        with pytest.raises(MCPError, match="single use"):
            await c.session.call_tool("goto_stage", {"stage": "implement"}, input_responses=answer,
                                      request_state=first.request_state, allow_input_required=True)
    assert stages(log) == ["implement"]
    assert sum(e["type"] == "tool/call" for e in events(log)) == 1  # the same call, resumed


async def test_stdio_restart_mid_elicitation_resumes_the_open_call(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    async with Client(stdio(log, tmp_path), elicitation_callback=approve()) as c:  # first round only
        first = await c.session.call_tool("goto_stage", {"stage": "implement"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
    async with Client(stdio(log, tmp_path), mode="legacy", elicitation_callback=approve()) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})  # asks again, same call
        assert not r.is_error
    calls = [e for e in events(log) if e["type"] == "tool/call"]
    assert len(calls) == 1 and stages(log) == ["implement"]


async def test_streamable_http(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    proc, url = start_http(log, tmp_path)
    try:
        cb = approve()
        async with Client(url, elicitation_callback=cb) as c:
            assert [t.name for t in (await c.list_tools()).tools] == TOOLS
            r = await c.call_tool("goto_stage", {"stage": "implement"})
            assert not r.is_error
            status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["stage"] == "implement" and len(cb.asked) == 1
        async with Client(url, mode="legacy", elicitation_callback=approve()) as c:
            r = await c.call_tool("goto_stage", {"stage": "verify"})  # guarded edge: refused by the graph
            assert r.is_error
            r = await c.call_tool("goto_stage", {"stage": "explore"})
            assert not r.is_error
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert stages(log) == ["implement", "explore"]


def _inspector() -> str | None:
    local = ROOT / "node_modules" / ".bin" / "mcp-inspector"
    if local.exists():
        return str(local)
    return shutil.which("mcp-inspector")


def _need_inspector() -> str:
    path = _inspector()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("the MCP Inspector is not installed (.ci/run installs it from npm)")
        pytest.skip("the MCP Inspector is not installed: "
                    "npm install --no-save @modelcontextprotocol/inspector")
    return path


@pytest.mark.parametrize("method", ["tools/list", "get_stage"])
def test_mcp_inspector_cli(tmp_path: Path, method: str) -> None:
    inspector = _need_inspector()
    log = tmp_path / "s.jsonl"
    argv = [inspector, "--cli", *server_argv(log, tmp_path)]
    argv += ["--method", "tools/list"] if method == "tools/list" else [
        "--method", "tools/call", "--tool-name", "get_stage"]
    out = subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    if method == "tools/list":
        assert [t["name"] for t in data["tools"]] == ["exit_plan_mode", "get_stage", "goto_stage"]
    else:
        assert data["isError"] is False
        assert json.loads(data["content"][0]["text"])["stage"] == "explore"


def test_import_fsm_stage_does_not_import_mcp() -> None:
    code = ("import sys, fsm_stage, fsm_stage.cli; from fsm_stage.cli import main; "
            "assert not any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules), 'mcp imported'")
    subprocess.run([sys.executable, "-c", code], env=env(), check=True, timeout=60)
    out = subprocess.run([sys.executable, "-m", "fsm_stage", "--help"], env=env(), capture_output=True,
                         text=True, timeout=60)
    assert " mcp " in out.stdout
