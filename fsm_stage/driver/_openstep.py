"""A fold of the log's trailing open turn: its step, the model's tool calls and their state.

``open_turn_view(events)`` scans back to the last ``turn/start`` (O(turn length)) and returns an
``OpenTurnView``, or None when the log is idle. Per call of the turn, in the order the model
asked for them: whether its ``tool/call`` was recorded (seq), whether a ``tool/result`` answers
it, and the durable review (``fsm/review/request`` with that ``callId``, design-b §3) bound to
it and whether that review was answered. A call is **suspended** when its ``tool/call`` is
recorded, it has no result, and a review request names it: the host resumes it after the
answer (``StagedSession.resume``); crash repair leaves it alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from fsm_stage.log.events import Event
from fsm_stage.runtime.tools import ToolCall

__all__ = ["REVIEW_ANSWER", "REVIEW_REQUEST", "CallState", "OpenTurnView", "answered_call_id",
           "open_turn_view"]

REVIEW_REQUEST = "fsm/review/request"
"""Event type of a durable review request (design-b §3; ``data.id``, ``data.callId``)."""
REVIEW_ANSWER = "fsm/review/answer"
"""Event type of a review answer (design-b §3; ``data.id``, ``data.outcome``)."""


def _data(ev: Event) -> Mapping[str, Any]:
    return ev.data if isinstance(ev.data, Mapping) else {}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def answered_call_id(ev: Event) -> str | None:
    """The call id a ``tool/result`` answers (current ``message.source.callId`` /
    ``toolCallId`` shapes and the legacy ``{callId, content, isError}`` shape), else None."""
    data = _data(ev)
    if isinstance(data.get("callId"), str):
        return str(data["callId"])
    msg = data.get("message")
    if isinstance(msg, Mapping):
        source = msg.get("source")
        if isinstance(source, Mapping) and isinstance(source.get("callId"), str):
            return str(source["callId"])
        for block in msg.get("content") or ():
            if isinstance(block, Mapping) and isinstance(block.get("toolCallId"), str):
                return str(block["toolCallId"])
    return None


@attrs.frozen
class CallState:
    """One tool call of the open turn: the ``call``, the ``turn``/``step`` it belongs to,
    ``call_seq`` (seq of its ``tool/call``, None when never dispatched), ``answered`` (a
    ``tool/result`` exists), ``review_id`` (the review bound to it, or None) and
    ``review_answered`` (that review has an ``fsm/review/answer``)."""

    call: ToolCall
    turn: Any
    step: Any
    call_seq: int | None
    answered: bool
    review_id: str | None = None
    review_answered: bool = False

    @property
    def suspended(self) -> bool:
        """Recorded, unanswered and bound to a review: waits for ``resume``."""
        return self.call_seq is not None and not self.answered and self.review_id is not None

    @property
    def unsettled(self) -> bool:
        """No ``tool/result`` yet (suspended, running, crashed or never dispatched)."""
        return not self.answered


@attrs.frozen
class OpenTurnView:
    """The trailing open turn: ``turn`` (None if its ``turn/start`` had no number),
    ``start_seq``, ``open_step`` (``(turn, step)`` of an open step or None), ``last_step``
    (highest step number seen in the turn, 0 when none), ``calls`` (in asking order) and
    ``open_reviews`` (review ids with a request and no answer in this turn); ``replied``: the
    open step already has its ``assistant/message``."""

    turn: int | None
    start_seq: int
    open_step: tuple[Any, Any] | None
    last_step: int
    calls: tuple[CallState, ...]
    open_reviews: tuple[str, ...] = ()
    replied: bool = False

    @property
    def step_calls(self) -> tuple[CallState, ...]:
        """The calls asked for in the open step (empty when no step is open)."""
        if self.open_step is None:
            return ()
        return tuple(c for c in self.calls if (c.turn, c.step) == self.open_step)

    @property
    def suspended(self) -> tuple[CallState, ...]:
        """The suspended calls (see ``CallState.suspended``), in asking order."""
        return tuple(c for c in self.calls if c.suspended)

    def call(self, call_id: str) -> CallState | None:
        """The state of call ``call_id`` or None."""
        for c in self.calls:
            if c.call.id == call_id:
                return c
        return None


def open_turn_view(events: Sequence[Event]) -> OpenTurnView | None:
    """Fold the trailing open turn of ``events`` (None when the last turn is closed or there
    is none). Pure; tolerant of legacy/partial shapes (missing fields are skipped)."""
    start = None
    for i in range(len(events) - 1, -1, -1):
        t = events[i].type
        if t == TURN_END:
            return None
        if t == TURN_START:
            start = i
            break
    if start is None:
        return None
    raw_turn = _data(events[start]).get("turn")
    turn: int | None = raw_turn if _int(raw_turn) else None
    open_step: tuple[Any, Any] | None = None
    last_step = 0
    asked: dict[str, tuple[ToolCall, Any, Any]] = {}
    recorded: dict[str, int] = {}
    answered: set[str] = set()
    reviews: dict[str, str] = {}  # call id → review id
    review_order: list[str] = []
    review_answers: set[str] = set()
    replied = False
    for ev in events[start + 1:]:
        data = _data(ev)
        where = (data.get("turn", turn), data.get("step"))
        if ev.type == STEP_START:
            open_step = where
            replied = False
            if _int(data.get("step")):
                last_step = max(last_step, int(data["step"]))
        elif ev.type == STEP_END:
            open_step = None
        elif ev.type == ASSISTANT_MESSAGE:
            replied = replied or open_step is not None
            msg = data.get("message")
            for block in (msg.get("content") or ()) if isinstance(msg, Mapping) else ():
                if (isinstance(block, Mapping) and block.get("type") == "tool-call"
                        and isinstance(block.get("id"), str)):
                    call = ToolCall(block["id"], str(block.get("name", "")),
                                    str(block.get("arguments", "{}")))
                    asked.setdefault(call.id, (call, *where))
        elif ev.type == TOOL_CALL and isinstance(data.get("callId"), str):
            call_id = str(data["callId"])
            recorded[call_id] = ev.seq
            asked.setdefault(call_id, (ToolCall(call_id, str(data.get("name", "")),
                                                str(data.get("arguments", "{}"))), *where))
        elif ev.type == TOOL_RESULT:
            answered_id = answered_call_id(ev)
            if answered_id is not None:
                answered.add(answered_id)
        elif ev.type == REVIEW_REQUEST and isinstance(data.get("id"), str):
            review_order.append(str(data["id"]))
            if isinstance(data.get("callId"), str):
                reviews[str(data["callId"])] = str(data["id"])
        elif ev.type == REVIEW_ANSWER and isinstance(data.get("id"), str):
            review_answers.add(str(data["id"]))
    calls = tuple(
        CallState(call, call_turn, call_step, recorded.get(call_id), call_id in answered,
                  reviews.get(call_id), reviews.get(call_id) in review_answers)
        for call_id, (call, call_turn, call_step) in asked.items())
    open_reviews = tuple(r for r in review_order if r not in review_answers)
    return OpenTurnView(turn, start, open_step, last_step, calls, open_reviews, replied)
