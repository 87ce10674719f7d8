"""Shared set-up of the tool-policy tests: a graph with policies, a wired runtime, a recording tool."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from fsm_stage.config import ConfigFile, load_config_text
from fsm_stage.driver import open_session
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolOutput, ToolSpec
from fsm_stage.stage_switch import StageController

GRAPH = """\
name: policy-demo
section: Call goto_stage with one of << stage_targets >>.
tool_groups:
  read: [read_file, grep]
  test: ["run_*"]
stages:
  - name: explore
    instruction: Explore.
    tools:
      allow: ["@read", {tool: write_file, paths: ["**/*.md"]}]
  - name: implement
    instruction: Implement.
  - name: verify
    instruction: Verify.
    tools:
      allow: ["@read", "@test"]
      ask: [apply_patch]
plan_mode:
  section: You are in plan mode.
  tools:
    allow: ["@read", write_file]
"""
HOST_TOOLS = ("apply_patch", "grep", "read_file", "run_tests", "write_file")


class Recording:
    """A host tool that records every execution."""

    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name, f"The host's {name}.", {"type": "object"})
        self.calls: list[Mapping[str, Any]] = []

    async def execute(self, args: Mapping[str, Any], agent: Any, signal: Any = None) -> ToolOutput:
        self.calls.append(dict(args))
        return ToolOutput(None, f"{self.spec.name} ran")


def config(text: str = GRAPH, **kw: Any) -> ConfigFile:
    """The loaded test graph."""
    return load_config_text(text, "policy-demo.yaml", **kw)


def wired(
    text: str = GRAPH, review: Any = None
) -> tuple[Runtime, InboxAgent, StageController, PlanModeController, dict[str, Recording]]:
    """A runtime with the stage switch, plan mode and the recording host tools attached."""
    cfg = config(text)
    assert cfg.graph is not None and cfg.plan_mode is not None
    host = open_session(cfg, MemoryLog(SessionHeader("policy-test")), review=review, guidance=False,
                        repair=False)
    assert host.stage is not None and host.plan is not None
    tools = {n: Recording(n) for n in HOST_TOOLS}
    for tool in tools.values():
        host.runtime.add_tool(tool)
    return host.runtime, host.agent, host.stage, host.plan, tools


def run(coro: Any) -> Any:
    """Run a coroutine to completion."""
    return asyncio.run(coro)


def jump(rt: Runtime, agent: InboxAgent, stage: str) -> None:
    """The user's ``/stage <stage>`` while idle (applied at once)."""
    run(rt.run_command(agent, f"/stage {stage}"))
