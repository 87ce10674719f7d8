"""What an MCP client author meets on day two: guarded edges taken with ``--eligibility``, full
transitions with a handoff fed by ``context_tokens`` (or the handoff's own size), the wording of
an applied approval, the package version, an output schema for every tool, plan mode in the
diagram, an empty legacy accept that the model and the log both read as keep, and exit code
130 plus a listening line on Ctrl-C / ``--http``."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_helpers import GRAPH, approve, env, events, free_port, resource_text, server_argv, stages, text_of

import fsm_stage
from fsm_stage.config import load_config
from fsm_stage.diagram import to_mermaid
from fsm_stage.mcp.server import StageServer, build_server
from fsm_stage.mcp.sessions import SessionRegistry

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make(tmp_path: Path) -> tuple[StageServer, Path]:
    log = tmp_path / "s.jsonl"
    return build_server(SessionRegistry(load_config(GRAPH), {"default": str(log)}, cwd=tmp_path)), log


async def test_server_info_is_the_package_version_and_every_tool_has_an_output_schema(tmp_path: Path) -> None:
    app, _log = make(tmp_path)
    async with Client(app.server) as c:
        assert c.server_info is not None and c.server_info.version == fsm_stage.__version__
        tools = (await c.list_tools()).tools
        assert all(t.output_schema is not None for t in tools), [t.name for t in tools]
        get_stage = next(t for t in tools if t.name == "get_stage")
        status = await c.call_tool("get_stage", {})
    assert get_stage.output_schema is not None
    assert set(get_stage.output_schema["required"]) <= set(status.structured_content or {})
    assert set(status.structured_content or {}) <= set(get_stage.output_schema["properties"])


async def test_an_approved_transition_says_it_applied_now(tmp_path: Path) -> None:
    app, _log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        result = await c.call_tool("goto_stage", {"stage": "implement"})
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
    assert status["stage"] == "implement"
    assert "next step" not in text_of(result) and "now in stage \"implement\"" in text_of(result)


async def test_the_diagram_resource_draws_plan_mode_and_the_current_stage(tmp_path: Path) -> None:
    app, _log = make(tmp_path)
    config = load_config(GRAPH)
    async with Client(app.server) as c:
        text = resource_text(await c.read_resource("fsm-stage://session/default/diagram"))
    assert text == to_mermaid(config.graph, config.plan_mode, current="explore", plan_active=False)
    assert text != to_mermaid(config.graph, config.plan_mode, current="explore")


async def test_an_empty_legacy_accept_is_keep_for_the_model_and_the_log(tmp_path: Path) -> None:
    app, log = make(tmp_path)

    async def empty_accept(_context: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={})

    async with Client(app.server, mode="legacy", elicitation_callback=empty_accept) as c:
        result = await c.call_tool("goto_stage", {"stage": "implement"})
    answers = [e["data"] for e in events(log) if e["type"] == "fsm/review/answer"]
    assert [a["outcome"] for a in answers] == ["keep"]
    assert result.is_error and "decision" not in text_of(result)
    logged = next(e for e in events(log) if e["type"] == "tool/result")
    assert text_of(result) == logged["data"]["message"]["content"][0]["content"][0]["text"]
    assert stages(log) == []


async def test_context_tokens_make_a_full_transition_with_its_handoff(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement", "handoff": "# Handoff\nAdd --greeting.",
                                             "context_tokens": 90_000})
        assert not r.is_error, text_of(r)
        with pytest.raises(MCPError, match="context_tokens"):
            await c.call_tool("goto_stage", {"stage": "verify", "context_tokens": -1})
    path = (r.structured_content or {}).get("handoffPath")
    assert path and Path(path).read_text(encoding="utf-8").startswith("# Handoff")
    assert "context_tokens" not in json.dumps([e for e in events(log) if e["type"] == "tool/call"])


async def test_a_handoff_as_large_as_the_threshold_is_kept(tmp_path: Path) -> None:
    app, _log = make(tmp_path)
    big = "# Handoff\n" + "The work so far and what is left to do. " * 500  # > 4000 tokens
    async with Client(app.server, elicitation_callback=approve()) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement", "handoff": big})
    assert not r.is_error and (r.structured_content or {}).get("handoffPath")


def _predicates(tmp_path: Path, value: bool) -> str:
    (tmp_path / "my_guards.py").write_text(textwrap.dedent(f"""
        def tests_written(agent):
            return {value}
    """), encoding="utf-8")
    return "my_guards:tests_written"


def _stdio(log: Path, cwd: Path, *extra: str) -> StdioServerParameters:
    argv = server_argv(log, cwd, *extra)
    e = env()
    e["PYTHONPATH"] = f"{cwd}:{e['PYTHONPATH']}"
    return StdioServerParameters(command=argv[0], args=argv[1:], env=e)


@pytest.mark.parametrize("value", [True, False])
async def test_eligibility_registers_guard_predicates(tmp_path: Path, value: bool) -> None:
    log = tmp_path / "s.jsonl"
    spec = _predicates(tmp_path, value)
    async with Client(_stdio(log, tmp_path, "--eligibility", spec), mode="legacy",
                      elicitation_callback=approve()) as c:
        assert not (await c.call_tool("goto_stage", {"stage": "implement"})).is_error
        r = await c.call_tool("goto_stage", {"stage": "verify"})
    assert r.is_error is not value, text_of(r)
    assert stages(log) == (["implement", "verify"] if value else ["implement"])


def test_a_bad_eligibility_option_is_one_line(tmp_path: Path) -> None:
    for spec, text in [("nocolon", "module:function"), ("no_such_module_x:f", "no_such_module_x"),
                       ("json:no_such_function", "no_such_function")]:
        out = subprocess.run(server_argv(tmp_path / "s.jsonl", tmp_path, "--eligibility", spec),
                             env=env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert out.returncode in (1, 2) and text in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert not (tmp_path / "s.jsonl").exists()


def _wait_for(proc: subprocess.Popen[str], needle: str) -> str:
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and needle not in seen:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen += line
    return seen


def test_http_prints_its_address_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(server_argv(tmp_path / "s.jsonl", tmp_path, "--http", f"127.0.0.1:{port}"),
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        seen = _wait_for(proc, "listening")
        assert f"listening on http://127.0.0.1:{port}/mcp" in seen, seen
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        proc.kill()


def test_stdio_ctrl_c_exits_130(tmp_path: Path) -> None:
    proc = subprocess.Popen(server_argv(tmp_path / "s.jsonl", tmp_path), env=env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        proc.stdin.write(json.dumps(hello) + "\n")
        proc.stdin.flush()
        proc.stdout.readline()  # the server is up and answering
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    finally:
        proc.kill()
