"""Helpers shared by the plan-mode tests (imported as a plain module; no __init__ here)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from shared_data import DSH_SESSIONS, PLAN_REVIEW_LOG

from fsm_stage.constants import PLAN_MODE_EVENT, REQUEST_HEADER, TURN_END, TURN_START, USER_MESSAGE
from fsm_stage.log.events import Event, MemoryLog, SessionHeader
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.prompts import load_catalog
from fsm_stage.reviews import ReviewChannel
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolOutput, ToolSpec

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
DSH_DIR = DSH_SESSIONS
PLAN_REVIEW = PLAN_REVIEW_LOG
SECTION = "You are in plan mode. Explore and design before presenting the plan through exit_plan_mode."
CAT = load_catalog("plan_mode")
PLAN = "# Add a flag\n\n- parse it\n- use it\n"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion (pytest-asyncio is not used)."""
    return asyncio.run(coro)


class Harness:
    """A runtime with plan mode attached and one agent over an in-memory log."""

    def __init__(
        self,
        *,
        review: ReviewChannel | None = None,
        commands: bool = True,
        projections: bool = True,
        events: Sequence[tuple[str, Any]] = (),
        section: str = SECTION,
        attach: bool = True,
    ) -> None:
        self.runtime = Runtime(review=review, commands=commands, projections=projections)
        self.log = MemoryLog(SessionHeader("agent-1"))
        for type_, data in events:
            self.log.append(type_, data)
        self.session = Session(self.log)
        self.agent = InboxAgent(self.session)
        self.runtime.track(self.session)
        self.plan = PlanModeController({"section": section})
        if attach:
            self.plan.attach(self.runtime)

    # --- log shaping ---------------------------------------------------------------------------

    def open_turn(self, turn: int = 1) -> None:
        self.log.append(TURN_START, {"turn": turn})

    def close_turn(self, turn: int = 1) -> None:
        self.log.append(TURN_END, {"turn": turn, "reason": {"kind": "completed"}})

    def header(self) -> None:
        self.log.append(REQUEST_HEADER, {"header": {"config": {}}, "reason": "initial"})

    def boundary(
        self, messages: Sequence[dict[str, Any]] = (), *, aborted: bool = False
    ) -> list[dict[str, Any]]:
        """An accepted pre-step (what a host calls after its final accept decision)."""
        return self.runtime.pre_step(self.agent, list(messages), aborted=aborted)

    # --- reads -----------------------------------------------------------------------------------

    @property
    def get(self) -> dict[str, bool]:
        return self.plan.get(self.agent).to_json()

    def plan_events(self) -> list[bool]:
        return [e.data["active"] for e in self.log.events if e.type == PLAN_MODE_EVENT]

    def notices(self, events: Sequence[Event] | None = None) -> list[str]:
        evs = self.log.events if events is None else events
        return [e.data["content"][0]["text"] for e in evs
                if e.type == USER_MESSAGE and e.data.get("source", {}).get("kind") == "plugin"
                and e.data["source"].get("plugin") == "plan-mode"]

    def injected(self) -> list[dict[str, Any]]:
        return [i.message for i in self.agent.inbox if i.kind == "inject"]

    def steered(self) -> list[dict[str, Any]]:
        return [i.message for i in self.agent.inbox if i.kind == "steer"]


def notice_text(message: dict[str, Any]) -> str:
    return str(message["content"][0]["text"])


class FakeTool:
    """A tool that always succeeds (read, write, bash …) and records its calls."""

    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name, f"The {name} tool.", {"type": "object", "properties": {}})
        self.calls: list[tuple[dict[str, Any], Any]] = []

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        self.calls.append((dict(args), agent))
        return ToolOutput({"ok": True}, f"{self.spec.name} ok")
