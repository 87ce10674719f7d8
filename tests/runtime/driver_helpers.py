"""A fake reviewed tool for the step-driver tests (plain module; no __init__ here).

``Reviewed`` behaves like a suspending review channel behind ``goto_stage``: the first call
appends ``fsm/review/request`` (docs/reviews.md) bound to the call id and raises ``ReviewPending``;
re-run (resume) it reads the logged ``fsm/review/answer`` and settles, or raises again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from fsm_stage.errors import ReviewPending
from fsm_stage.runtime.tools import ToolFailure, ToolOutput, ToolSpec, current_tool_call

REQUEST, ANSWER = "fsm/review/request", "fsm/review/answer"


def answer(session: Any, review_id: str, outcome: str = "approve") -> None:
    """Append a review answer the way ``answer_review`` would (docs/reviews.md)."""
    session.append(ANSWER, {"id": review_id, "outcome": outcome, "option": None, "shape": None,
                            "feedback": None, "by": "api"}, ignorable=True)


class Reviewed:
    """``review_me``: asks a durable review; the answer decides the result."""

    spec = ToolSpec("review_me", "Ask a human.", {"type": "object", "properties": {}})

    def __init__(self) -> None:
        self.runs = 0

    async def execute(self, args: Mapping[str, Any], agent: Any, signal: Any = None) -> ToolOutput:
        self.runs += 1
        call = current_tool_call()
        assert call is not None
        session = agent.session
        review_id = None
        outcome = None
        for ev in session.events:
            if ev.type == REQUEST and ev.data.get("callId") == call.id:
                review_id = ev.data["id"]
            elif ev.type == ANSWER and review_id is not None and ev.data.get("id") == review_id:
                outcome = ev.data["outcome"]
        if review_id is None:
            review_id = f"rv_{call.id}"
            session.append(REQUEST, {"id": review_id, "callId": call.id, "kind": "stage", "from": "a",
                                     "target": "b", "options": ["Approve", "Keep"], "shape": None,
                                     "handoffPath": None, "payloadSha256": "0" * 64}, ignorable=True)
        if outcome is None:
            raise ReviewPending(review_id, call.id, "stage")
        if outcome != "approve":
            raise ToolFailure(f"the reviewer said {outcome}")
        return ToolOutput({"approved": True}, "approved")


class Blocking:
    """``block``: waits until cancelled (or until its signal aborts, then fails)."""

    spec = ToolSpec("block", "Wait.", {"type": "object", "properties": {}})

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def execute(self, args: Mapping[str, Any], agent: Any, signal: Any = None) -> ToolOutput:
        self.started.set()
        if signal is not None:
            await signal.wait()
            raise ToolFailure("stopped")
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover


def unanswered_calls(messages: Any) -> list[str]:
    """Tool-call ids in ``messages`` that no tool-result answers (what providers reject)."""
    asked, answered = [], set()
    for m in messages:
        for block in m.get("content") or ():
            if block.get("type") == "tool-call":
                asked.append(block["id"])
            elif block.get("type") == "tool-result":
                answered.add(block["toolCallId"])
    return [c for c in asked if c not in answered]
