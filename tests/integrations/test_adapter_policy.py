"""Every adapter enforces the stage's tool policy before a host tool runs: a refused call never
executes, the framework gets the refusal text, and the log records the refusal."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any

import pytest
from adapter_rig import ASK_GRAPH, make_host
from policy_rules import PLAN_GRAPHS, ROWS, approving, config, verdict_in, workspace_at
from sdk_check import sdk

from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.runtime.tools import ToolCall


def _host_in_explore() -> Any:
    host = make_host(approve_all=True)
    assert host.plan is not None
    host.plan.set(host.agent, False)          # plan mode off: only explore's own policy applies
    assert host.current_stage() == "explore"
    host.step("Patch the CLI.")
    return host


@pytest.mark.parametrize(("module", "package"), [
    ("fsm_stage.integrations.pydantic_ai", "pydantic_ai"),
    ("fsm_stage.integrations.openai_agents", "agents"),
    ("fsm_stage.integrations.langgraph", "langgraph"),
])
def test_a_denied_host_tool_never_runs(module: str, package: str) -> None:
    sdk(package)
    run_host_tool = importlib.import_module(module)._run_host_tool
    host = _host_in_explore()
    call = ToolCall.of("apply_patch", {"path": "cli.py", "patch": "+--greeting"}, id="c-patch")
    host.reply("", [call])
    ran: list[bool] = []

    async def execute() -> str:
        ran.append(True)
        return "patched"

    out = asyncio.run(run_host_tool(host, call, execute))
    text = out if isinstance(out, str) else out.content
    assert ran == []
    assert 'not allowed in stage "explore"' in text
    refused = [e for e in host.session.events if e.type == "fsm/tool/refused"]
    assert [e.data["name"] for e in refused] == ["apply_patch"]
    assert host.recorded_result(call.id) == text


def test_an_allowed_host_tool_runs_once() -> None:
    sdk("pydantic_ai")
    from fsm_stage.integrations.pydantic_ai import _run_host_tool

    host = _host_in_explore()
    call = ToolCall.of("read_file", {"path": "cli.py"}, id="c-read")
    host.reply("", [call])

    async def execute() -> str:
        return "print('hi')"

    assert asyncio.run(_run_host_tool(host, call, execute)) == "print('hi')"
    assert host.recorded_result(call.id) == "print('hi')"


# --- the rule table at each adapter ----------------------------------------------------------

ADAPTERS = {"pydantic_ai": "fsm_stage.integrations.pydantic_ai",
            "agents": "fsm_stage.integrations.openai_agents",
            "langgraph": "fsm_stage.integrations.langgraph"}


def _rule_host(graph: str, cwd: str) -> StageHost:
    cfg = config(graph)
    host = StageHost.open(MemoryLog(SessionHeader("rules", cwd=cwd)), graph=cfg, review=approving(),
                          plan_mode=cfg.plan_mode is not None)
    if host.plan is not None:
        host.plan.set(host.agent, graph in PLAN_GRAPHS)
    assert host.current_stage() == "work"
    host.step("Write the file.")
    return host


@pytest.mark.parametrize("package", sorted(ADAPTERS))
@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rule(row_id: str, package: str, tmp_path: Path) -> None:
    sdk(package)
    run_host_tool = importlib.import_module(ADAPTERS[package])._run_host_tool
    row, cwd = ROWS[row_id], workspace_at(tmp_path)
    host = _rule_host(row.graph, cwd)
    call = row.call(cwd)
    host.reply("", [call])
    ran: list[bool] = []

    async def execute() -> str:
        ran.append(True)
        return "written"

    out = asyncio.run(run_host_tool(host, call, execute))
    text = out if isinstance(out, str) else out.content
    assert verdict_in(host.session.events, call.id, len(ran)) == row.verdict, row.rule
    assert host.recorded_result(call.id) == text


def test_a_dropped_host_tool_call_closes_its_review(tmp_path: Path) -> None:
    """The framework moves on without running a host tool whose review waits (a new prompt
    instead of an answer): the call is settled as not executed and its review closed with it,
    so the inbox does not list it and the next call's review is asked, not refused as busy."""
    from fsm_stage.config import load_config_text
    from fsm_stage.errors import ReviewPending
    from fsm_stage.reviews import SuspendingReviewChannel, review_state

    host = StageHost.open(MemoryLog(SessionHeader("s-drop", cwd=str(tmp_path))),
                          graph=load_config_text(ASK_GRAPH, "g.yaml"), plan_mode=False,
                          review=SuspendingReviewChannel())
    host.step("patch it")
    first = ToolCall.of("apply_patch", {"patch": "one"}, id="h1")
    host.reply("", [first])

    async def execute() -> str:
        return "patched"

    with pytest.raises(ReviewPending) as pending:
        asyncio.run(host.run_host_tool(first, execute))
    host.step("never mind, patch two")
    state = review_state(host.session)
    assert state.open == () and state.redeemed[pending.value.review_id].reason == "call-closed"
    second = ToolCall.of("apply_patch", {"patch": "two"}, id="h2")
    host.reply("", [second])
    with pytest.raises(ReviewPending) as again:
        asyncio.run(host.run_host_tool(second, execute))
    assert again.value.review_id != pending.value.review_id
