"""A host with an ``ask`` tool rule over any log (the tool-review tests): stages ``explore`` and
``verify`` and plan mode ask before ``apply_patch``; the tool appends one line to a file per
run, so runs are counted across processes. Also run as a script by the multi-process tests
(``python tool_rig.py LOCATION COUNTER``: print ``ready``, wait for a line on stdin, resume the
open call ``c_patch`` and print the verdict).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fsm_stage import open_session
from fsm_stage.config import load_config_text
from fsm_stage.constants import STEP_START, TOOL_CALL, TURN_START
from fsm_stage.log.events import EventLog
from fsm_stage.reviews import ReviewChannel
from fsm_stage.runtime.tools import ToolCall, ToolOutput, ToolResult, ToolSpec

GRAPH = """\
name: tool-reviews
section: Call goto_stage with one of << stage_targets >>.
stages:
  - name: explore
    instruction: Explore.
    tools:
      ask: [apply_patch]
  - name: verify
    instruction: Verify.
    tools:
      ask: [apply_patch]
plan_mode:
  section: You are in plan mode.
  tools:
    ask: [apply_patch]
"""


class CountingTool:
    """``apply_patch``: appends one line to ``counter`` (a file) per run."""

    def __init__(self, counter: Path) -> None:
        self.spec = ToolSpec("apply_patch", "Apply a patch.", {"type": "object"})
        self.counter = counter

    async def execute(self, args: Mapping[str, Any], agent: Any, signal: Any = None) -> ToolOutput:
        fd = os.open(self.counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return ToolOutput(None, "patched")


def runs(counter: Path) -> int:
    """How often the tool ran."""
    return len(counter.read_text().splitlines()) if counter.exists() else 0


class ToolRig:
    """Runtime + stage switch + plan mode + the counting tool over ``log`` (``graph``: another
    graph text, accepted as a change of the logged one)."""

    def __init__(self, log: EventLog, review: ReviewChannel | None, counter: Path, *,
                 graph: str = GRAPH) -> None:
        cfg = load_config_text(graph, "tool-reviews.yaml")
        assert cfg.graph is not None and cfg.plan_mode is not None
        host = open_session(cfg, log, review=review, guidance=False, repair=False,
                            accept_graph_change=graph != GRAPH)
        assert host.stage is not None and host.plan is not None
        self.runtime, self.stage, self.plan = host.runtime, host.stage, host.plan
        self.runtime.add_tool(CountingTool(counter))
        self.session, self.agent = host.session, host.agent

    def to_verify(self) -> None:
        """The user's ``/stage verify`` while idle, then a turn and a step."""
        asyncio.run(self.runtime.run_command(self.agent, "/stage verify"))
        self.session.append(TURN_START, {"turn": self.session.last_turn + 1})
        self.session.append(STEP_START, {"turn": self.session.last_turn, "step": 1})

    def call(self, patch: str = "p", call_id: str = "c_patch", **extra: Any) -> ToolCall:
        return ToolCall.of("apply_patch", {"patch": patch, **extra}, id=call_id)

    def resume(self, call: ToolCall) -> ToolResult:
        """Resume the open call (its ``tool/call`` is logged already)."""
        return asyncio.run(self.runtime.call_tool(self.agent, call, log=False))

    def log_call(self, call: ToolCall) -> None:
        self.session.append(TOOL_CALL, {"callId": call.id, "name": call.name, "arguments": call.arguments})


def _main(argv: list[str]) -> int:
    from fsm_stage.log import open_log
    from fsm_stage.reviews import SuspendingReviewChannel

    location, counter = argv[0], Path(argv[1])
    with open_log(location) as log:
        rig = ToolRig(log, SuspendingReviewChannel(), counter)
        print("ready", flush=True)
        sys.stdin.readline()
        result = rig.resume(rig.call())
        print("error" if result.is_error else "ran", result.text.replace("\n", " "), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(_main(sys.argv[1:]))
