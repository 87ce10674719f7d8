"""A fold of the log's trailing open turn: its step, the model's tool calls and their state.

``open_turn_view(events)`` scans back to the last ``turn/start`` (O(turn length)) and returns an
``OpenTurnView``, or None when the log is idle. Per call of the turn, in the order the model
asked for them: whether its ``tool/call`` was recorded (seq), whether a ``tool/result`` answers
it, and the durable review (``fsm/review/request`` with that ``callId``, docs/reviews.md) bound to
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
from fsm_stage.log.events import Event, answered_call_id
from fsm_stage.runtime.tools import ToolCall

__all__ = ["REVIEW_ANSWER", "REVIEW_REQUEST", "CallState", "OpenTurnFold", "OpenTurnView",
           "answered_call_id", "open_turn_view"]

REVIEW_REQUEST = "fsm/review/request"
"""Event type of a durable review request (docs/reviews.md; ``data.id``, ``data.callId``)."""
REVIEW_ANSWER = "fsm/review/answer"
"""Event type of a review answer (docs/reviews.md; ``data.id``, ``data.outcome``)."""


def _data(ev: Event) -> Mapping[str, Any]:
    return ev.data if isinstance(ev.data, Mapping) else {}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    fold = OpenTurnFold()
    fold.sync(events)
    return fold.view()


def _where_key(where: tuple[Any, Any]) -> Any:
    """A dict key equal for equal ``(turn, step)`` pairs (log data may hold unhashable values)."""
    try:
        hash(where)
    except TypeError:
        return ("unhashable", repr(where))
    return where


class OpenTurnFold:
    """The trailing open turn of one log, folded incrementally (``open_turn_view`` folds once).

    ``sync(events)`` folds only the events appended since the previous ``sync`` (O(new
    events)); it refolds from the turn's start when ``events`` is another sequence, shorter, or
    no longer ends the way it did (a rolled-back batch). Per-call lookups (``call``,
    ``step_calls``, ``suspended``) cost O(1) / O(open step) / O(reviewed calls), independent of
    the number of calls already in the turn; ``view()`` builds the ``OpenTurnView``."""

    __slots__ = ("_events", "_last", "_n", "_t", "last_step", "open", "open_step", "replied",
                 "start_seq", "turn")

    def __init__(self) -> None:
        self._events: Sequence[Event] | None = None
        self._n = 0
        self._last: Event | None = None
        self._reset(None, -1)
        self.open = False

    def _reset(self, turn: int | None, start: int) -> None:
        self.open = True
        self.turn = turn
        self.start_seq = start
        self.open_step: tuple[Any, Any] | None = None
        self.last_step = 0
        self.replied = False
        self._t = _EMPTY_TURN  # the turn's calls and reviews; its own _TurnCalls from the first one

    def _mine(self) -> _TurnCalls:
        if self._t is _EMPTY_TURN:
            self._t = _TurnCalls()
        return self._t

    def sync(self, events: Sequence[Event]) -> bool:
        """Fold what ``events`` gained since the last call; True when a turn is open."""
        n = len(events)
        if (events is self._events and n >= self._n
                and (self._n == 0 or events[self._n - 1] is self._last)):
            start = self._n
        else:
            start = self._turn_start(events)
            self.open = False
        for i in range(start, n):
            self._fold(events[i], i)
        self._events, self._n = events, n
        self._last = events[n - 1] if n else None
        return self.open

    @staticmethod
    def _turn_start(events: Sequence[Event]) -> int:
        for i in range(len(events) - 1, -1, -1):
            if events[i].type in (TURN_END, TURN_START):
                return i
        return len(events)

    def _fold(self, ev: Event, i: int) -> None:
        t = ev.type
        if t == TURN_START:
            raw_turn = _data(ev).get("turn")
            self._reset(raw_turn if _int(raw_turn) else None, i)
            return
        if t == TURN_END:
            self.open = False
            return
        if not self.open:
            return
        data = _data(ev)
        if t == STEP_START:
            self.open_step = (data.get("turn", self.turn), data.get("step"))
            self.replied = False
            if _int(data.get("step")):
                self.last_step = max(self.last_step, int(data["step"]))
        elif t == STEP_END:
            self.open_step = None
        elif t == ASSISTANT_MESSAGE:
            where = (data.get("turn", self.turn), data.get("step"))
            self.replied = self.replied or self.open_step is not None
            msg = data.get("message")
            for block in (msg.get("content") or ()) if isinstance(msg, Mapping) else ():
                if (isinstance(block, Mapping) and block.get("type") == "tool-call"
                        and isinstance(block.get("id"), str)):
                    self._ask(ToolCall(block["id"], str(block.get("name", "")),
                                       str(block.get("arguments", "{}"))), where)
        elif t == TOOL_CALL and isinstance(data.get("callId"), str):
            call_id = str(data["callId"])
            self._mine().recorded[call_id] = ev.seq
            if call_id in self._t.index:
                self._refresh(call_id)
            else:
                self._ask(ToolCall(call_id, str(data.get("name", "")), str(data.get("arguments", "{}"))),
                          (data.get("turn", self.turn), data.get("step")))
        elif t == TOOL_RESULT:
            answered_id = answered_call_id(ev)
            if answered_id is not None:
                self._mine().answered.add(answered_id)
                self._refresh(answered_id)
        elif t == REVIEW_REQUEST and isinstance(data.get("id"), str):
            review_id = str(data["id"])
            self._mine().review_order[review_id] = None
            if isinstance(data.get("callId"), str):
                call_id = str(data["callId"])
                self._mine().review_of[call_id] = review_id
                self._mine().calls_of.setdefault(review_id, []).append(call_id)
                self._refresh(call_id)
        elif t == REVIEW_ANSWER and isinstance(data.get("id"), str):
            review_id = str(data["id"])
            self._mine().review_answers.add(review_id)
            for call_id in self._t.calls_of.get(review_id, ()):
                self._refresh(call_id)

    def _ask(self, call: ToolCall, where: tuple[Any, Any]) -> None:
        t = self._mine()
        if call.id in t.index:
            return
        t.index[call.id] = len(t.calls)
        t.base.append((call, *where))
        t.by_step.setdefault(_where_key(where), []).append(len(t.calls))
        t.calls.append(self._state(call.id))

    def _state(self, call_id: str) -> CallState:
        t = self._t
        call, turn, step = t.base[t.index[call_id]]
        review_id = t.review_of.get(call_id)
        return CallState(call, turn, step, t.recorded.get(call_id), call_id in t.answered,
                         review_id, review_id in t.review_answers)

    def _refresh(self, call_id: str) -> None:
        i = self._t.index.get(call_id)
        if i is not None:
            self._t.calls[i] = self._state(call_id)

    # -- queries (valid after ``sync`` returned True) ---------------------------------------------
    def call(self, call_id: str) -> CallState | None:
        """The state of call ``call_id`` of the turn, or None (O(1))."""
        i = self._t.index.get(call_id)
        return None if i is None else self._t.calls[i]

    def step_calls(self) -> tuple[CallState, ...]:
        """The calls asked for in the open step (empty when no step is open)."""
        if self.open_step is None:
            return ()
        t = self._t
        return tuple(t.calls[i] for i in t.by_step.get(_where_key(self.open_step), ()))

    def suspended(self) -> tuple[CallState, ...]:
        """The suspended calls, in asking order (O(calls bound to a review))."""
        t = self._t
        bound = sorted(t.index[c] for c in t.review_of if c in t.index)
        return tuple(s for s in (t.calls[i] for i in bound) if s.suspended)

    def view(self) -> OpenTurnView | None:
        """The ``OpenTurnView`` of the folded turn, None when no turn is open."""
        if not self.open:
            return None
        t = self._t
        open_reviews = tuple(r for r in t.review_order if r not in t.review_answers)
        return OpenTurnView(self.turn, self.start_seq, self.open_step, self.last_step,
                            tuple(t.calls), open_reviews, self.replied)


class _TurnCalls:
    """The calls and reviews of one open turn (``OpenTurnFold``'s indexes)."""

    __slots__ = ("answered", "base", "by_step", "calls", "calls_of", "index", "recorded",
                 "review_answers", "review_of", "review_order")

    def __init__(self) -> None:
        self.calls: list[CallState] = []
        self.base: list[tuple[ToolCall, Any, Any]] = []
        self.index: dict[str, int] = {}
        self.by_step: dict[Any, list[int]] = {}
        self.recorded: dict[str, int] = {}
        self.answered: set[str] = set()
        self.review_of: dict[str, str] = {}  # call id → review id
        self.calls_of: dict[str, list[str]] = {}  # review id → call ids bound to it
        self.review_order: dict[str, None] = {}
        self.review_answers: set[str] = set()


_EMPTY_TURN = _TurnCalls()
"""The shared indexes of a turn without calls or reviews (never written: ``_mine`` copies)."""
