"""The fleet's own log records and the pure fold that reads a session's wait point from its log.

Every record is an ``fsm/fleet/…`` event, written ``ignorable: true`` (DSH readers skip it):

``fsm/fleet/claim {epoch, worker}``
    a driver took the session; later appends by an older epoch are refused (``fence``).
``fsm/fleet/input {id, kind, text}``
    a durable user input: ``kind`` ``message`` (a user message), ``stage`` (``/stage ARG``) or
    ``plan`` (``/plan ARG``). A ``message`` is consumed once a ``user/message`` with the same
    ``id`` is logged; a command once ``fsm/fleet/apply {id, done: true}`` or a ``command/done``
    after ``fsm/fleet/apply {id}`` is logged.
``fsm/fleet/apply {id, done?}``
    the driver is about to run the command input ``id`` (``done: true``: it ran). A crash before
    the command's ``command/done`` leaves it pending, and it runs again: ``/stage NAME`` and
    ``/plan on|off`` set a value, so a second run changes nothing the first one finished.
``fsm/fleet/end {state, message?}``
    a session run ended ``complete`` or ``failed``; the next input starts run ``ends + 1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    BUDGET_KIND,
    COMMAND_DONE,
    REVIEW_ANSWER,
    REVIEW_REQUEST,
    STEP_START,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.log.events import Event

__all__ = [
    "APPLY",
    "CLAIM",
    "END",
    "INPUT",
    "INPUT_KINDS",
    "STATES",
    "FleetView",
    "Input",
    "fold",
    "session_state",
]

CLAIM: Final = "fsm/fleet/claim"
INPUT: Final = "fsm/fleet/input"
APPLY: Final = "fsm/fleet/apply"
END: Final = "fsm/fleet/end"
INPUT_KINDS: Final = ("message", "stage", "plan")
"""What a durable input may be: a user message, ``/stage ARG`` or ``/plan ARG``."""
STATES: Final = ("needs-input", "queued", "running", "waiting-review", "blocked", "complete", "failed")
"""A session's state in a listing: ``needs-input`` (idle, nothing pending), ``queued`` (an input,
an answered review or a crashed turn waits for a driver), ``running`` (a turn is open and not
suspended: a driver is on it, or it crashed and waits for repair), ``waiting-review`` (a
suspended call's review is unanswered, or a budget review a stopped turn waits for),
``blocked`` (a stage or plan-mode budget ran out with ``on_budget: stop``, or its budget review
was answered "Stop" or dismissed: the pending message waits for a ``/stage`` or ``/plan``
input, which is applied before it, or for any new input, which tries it again: after the
budget was raised, it runs),
``complete`` / ``failed`` (the run ended so; a new input starts the next run)."""


@attrs.frozen
class Input:
    """One durable input: its ``id``, ``kind`` (``INPUT_KINDS``), ``text`` and log ``seq``."""

    id: str
    kind: str
    text: str
    seq: int


@attrs.frozen
class FleetView:
    """What the fleet reads from one log: ``epoch`` (highest claim, 0 if none), ``pending``
    inputs in log order, ``runs`` (``fsm/fleet/end`` count), ``last_turn_end`` (the reason kind
    of the last ``turn/end``, None when none; a turn ``aborted`` because its driver's task was
    ``cancelled`` counts as ``interrupted``: no user aborts a fleet turn), ``interrupted`` (how
    many turns in a row ended ``interrupted`` — a crash — or ``error`` — an exception escaped
    the turn, e.g. the database went away mid-step, or the model kept failing — at the log's
    end), ``unfinished`` (those turns had started work — a user message or a model reply — so
    a continuation turn is owed), ``turn_open``, ``ended`` (the last run's end state when
    nothing followed it), ``blocked`` (the last turn ended ``blocked`` before a step started —
    a budget ran out — and only fleet records other than a new input followed it)."""

    epoch: int
    pending: tuple[Input, ...]
    runs: int
    last_turn_end: str | None
    interrupted: int
    unfinished: bool
    turn_open: bool
    ended: str | None
    blocked: bool = False


def _data(ev: Event) -> Mapping[str, Any]:
    return ev.data if isinstance(ev.data, Mapping) else {}


def fold(events: Sequence[Event]) -> FleetView:
    """Fold ``events`` into a ``FleetView`` (pure, O(events))."""
    epoch = runs = interrupted = 0
    inputs: dict[str, Input] = {}
    consumed: set[str] = set()
    applying: dict[str, int] = {}
    last_end: str | None = None
    turn_open = worked = unfinished = stepped = blocked = False
    ended: str | None = None
    budget_reviews: set[str] = set()
    for ev in events:
        data = _data(ev)
        kind = ev.type
        if kind.startswith("fsm/fleet/"):
            if kind == CLAIM and isinstance(data.get("epoch"), int):
                epoch = max(epoch, data["epoch"])
            elif kind == INPUT:
                item = _input(data, ev.seq)
                if item is not None and item.id not in inputs:
                    inputs[item.id] = item
                    ended, blocked = None, False  # a new input is a new attempt (a raised budget)
            elif kind == APPLY and isinstance(data.get("id"), str):
                if data.get("done") is True:
                    consumed.add(data["id"])
                    applying.pop(data["id"], None)
                else:
                    applying[data["id"]] = ev.seq
            elif kind == END:
                runs += 1
                ended = data.get("state") if isinstance(data.get("state"), str) else "failed"
            continue
        ended = None
        if kind == REVIEW_REQUEST and data.get("kind") == BUDGET_KIND and isinstance(data.get("id"), str):
            budget_reviews.add(data["id"])
        # a budget review answered "Stop" (keep) or dismissed leaves the session stopped: asking
        # again at once would make the answer a no-op; a new input or a command tries again
        declined = data.get("outcome") != "approve"
        blocked = blocked and kind == REVIEW_ANSWER and data.get("id") in budget_reviews and declined
        if kind == COMMAND_DONE:
            for cid in [c for c, at in applying.items() if at < ev.seq]:
                consumed.add(cid)  # the command finished writing: it ran
                del applying[cid]
        if kind == USER_MESSAGE and isinstance(data.get("id"), str):
            consumed.add(data["id"])
            source = data.get("source")
            worked = worked or (isinstance(source, Mapping) and source.get("kind") == "user")
        elif kind == ASSISTANT_MESSAGE:
            worked = True
        elif kind == TURN_START:
            turn_open, worked, stepped = True, False, False
        elif kind == STEP_START:
            stepped = True
        elif kind == TURN_END:
            turn_open = False
            reason = data.get("reason")
            last_end = reason.get("kind") if isinstance(reason, Mapping) else None
            blocked = last_end == "blocked" and not stepped  # a budget stopped it before a step
            cause = reason.get("reason") if isinstance(reason, Mapping) else None
            if last_end == "aborted" and isinstance(cause, Mapping) and cause.get("kind") == "cancelled":
                last_end = "interrupted"  # the driver's task was cancelled (DBOS shutdown, takeover)
            broken = last_end in ("interrupted", "error")  # a crash, or an exception ended it
            interrupted = interrupted + 1 if broken else 0
            unfinished = (unfinished or worked) if broken else False
    pending = tuple(i for i in inputs.values() if i.id not in consumed)
    return FleetView(epoch, pending, runs, last_end, interrupted, unfinished, turn_open, ended, blocked)


def _input(data: Mapping[str, Any], seq: int) -> Input | None:
    iid, kind, text = data.get("id"), data.get("kind"), data.get("text")
    if isinstance(iid, str) and kind in INPUT_KINDS and isinstance(text, str):
        return Input(iid, kind, text, seq)
    return None


def session_state(events: Sequence[Event]) -> tuple[str, str | None]:
    """``(state, review_id)`` of a session log (``STATES``; ``review_id`` for
    ``waiting-review``, the first unanswered review of the suspended step). Pure, O(events)."""
    from fsm_stage.driver import open_turn_view

    view = fold(events)
    if view.turn_open:
        turn = open_turn_view(events)
        if turn is not None and turn.suspended:
            waiting = [c.review_id for c in turn.suspended if not c.review_answered]
            if waiting:
                return "waiting-review", waiting[0]
            return "queued", None
        return "running", None
    if view.ended is not None:
        return view.ended, None
    if view.blocked and not any(i.kind != "message" for i in view.pending):
        from fsm_stage.reviews._fold import fold_reviews

        budget = [r.id for r in fold_reviews(events, None).open if r.kind == BUDGET_KIND]
        return ("waiting-review", budget[0]) if budget else ("blocked", None)
    if view.pending or view.unfinished:
        return "queued", None
    return "needs-input", None
