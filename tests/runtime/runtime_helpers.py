"""Helpers shared by the runtime tests (imported as a plain module; no __init__ here)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolFailure, ToolOutput, ToolSpec

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion (pytest-asyncio is not used)."""
    return asyncio.run(coro)


def new_agent(session_id: str = "s1", **header: Any) -> InboxAgent:
    return InboxAgent(Session(MemoryLog(SessionHeader(session_id, **header))))


class Echo:
    """A tool echoing its `x` argument; `fail` makes it raise ToolFailure, `crash` a bug."""

    spec = ToolSpec("echo", "Echo x back.", {"type": "object", "properties": {"x": {"type": "string"}},
                                              "required": ["x"]},
                    output={"type": "object"})

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], Any, Any]] = []

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        self.calls.append((dict(args), agent, signal))
        if args.get("x") == "fail":
            raise ToolFailure("asked to fail")
        if args.get("x") == "crash":
            raise ZeroDivisionError("bug")
        return ToolOutput({"x": args.get("x")}, f"echo {args.get('x')}")
