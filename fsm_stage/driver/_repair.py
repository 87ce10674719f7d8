"""Crash repair on resume: close the open turn a dead writer left, as DSH does on a cold load.

``repair_open_turn`` appends, in one atomic batch (``Session.append_many``), to a log whose last
``turn/start`` has no ``turn/end``:

1. one error ``tool/result`` per tool call of the open turn without a result, in the order the
   model asked: ``TOOL_OUTCOME_UNKNOWN`` when its ``tool/call`` was recorded,
   ``TOOL_NOT_STARTED`` when only the ``assistant/message`` asked for it (wording: catalog
   ``runtime.yaml`` ``repair.*``; id ``interrupted-tool-result-<callId>-<seq>``);
2. ``step/end {turn, step}`` when a step is open;
3. ``turn/end {turn, reason: {kind: "interrupted"}}``.

A turn suspended on a durable review only gets its stray calls closed (it stays open for
``StagedSession.resume``); a turn this process runs (``live_turn``) raises ``RuntimeError``.
``Loop.repair()`` / ``StagedSession.repair()`` call it. Why: ``docs/runtime-decisions.md``."""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from fsm_stage.constants import STEP_END, TOOL_RESULT, TURN_END
from fsm_stage.driver._openstep import open_turn_view
from fsm_stage.driver._pending import session_lock
from fsm_stage.errors import AppendConflictError
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.runtime import wording
from fsm_stage.runtime.messages import Message
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import step_position, tool_result_message

__all__ = [
    "INTERRUPTED",
    "NOT_STARTED",
    "OUTCOME_UNKNOWN",
    "closers",
    "is_suspended",
    "is_turn_live",
    "live_turn",
    "repair_open_turn",
]

INTERRUPTED = "interrupted"
"""The ``turn/end`` reason kind crash repair writes (only crash repair writes it)."""
OUTCOME_UNKNOWN = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
"""``tool/result.data.error`` for a recorded ``tool/call`` without result (DSH's shape)."""
NOT_STARTED = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
"""``tool/result.data.error`` for a requested call whose ``tool/call`` was never recorded."""

_LIVE: dict[str, int] = {}
_HOLDERS: dict[str, tuple[weakref.ReferenceType[Any], ...]] = {}
_LIVE_GUARD = threading.Lock()
_sweep_at = 64  # sweep session ids whose holders all died once the table reaches this size


def _mark_live(session_id: str) -> None:
    """Count one more live runner of ``session_id``'s open turn (``_unmark_live`` undoes it)."""
    with _LIVE_GUARD:
        _LIVE[session_id] = _LIVE.get(session_id, 0) + 1


def _unmark_live(session_id: str) -> None:
    """Undo one ``_mark_live``."""
    with _LIVE_GUARD:
        n = _LIVE.get(session_id, 1) - 1
        if n <= 0:
            _LIVE.pop(session_id, None)
        else:
            _LIVE[session_id] = n


@contextlib.contextmanager
def live_turn(session_id: str) -> Iterator[None]:
    """Mark the open turn of ``session_id`` as run by a live loop of this process while the
    block runs (re-entrant, counted). ``Loop.run_turn`` wraps every turn in it."""
    _mark_live(session_id)
    try:
        yield
    finally:
        _unmark_live(session_id)


def _alive(refs: tuple[weakref.ReferenceType[Any], ...]) -> tuple[weakref.ReferenceType[Any], ...]:
    return tuple(r for r in refs if r() is not None)


def hold_live(session_id: str, holder: Any) -> None:
    """Mark the open turn of ``session_id`` as run by ``holder`` (a step driver between
    ``start_turn`` and ``end_turn``) until ``release_live`` or until ``holder`` is garbage
    collected: a driver dropped mid-turn (its host abandoned after an exception or a
    suspension) does not keep the turn marked live for the rest of the process. Holders are
    kept as plain weak references (about 150 bytes a session); ids whose holders all died are
    swept when the table doubles, so the table stays within twice the live sessions."""
    global _sweep_at
    with _LIVE_GUARD:
        refs = _alive(_HOLDERS.get(session_id, ()))
        if not any(r() is holder for r in refs):
            refs += (weakref.ref(holder),)
        _HOLDERS[session_id] = refs
        if len(_HOLDERS) >= _sweep_at:
            for sid, held in list(_HOLDERS.items()):
                alive = _alive(held)
                if alive:
                    _HOLDERS[sid] = alive
                else:
                    del _HOLDERS[sid]
            _sweep_at = max(64, 2 * len(_HOLDERS))


def release_live(session_id: str, holder: Any) -> None:
    """Drop ``holder``'s mark on ``session_id`` (see ``hold_live``); a no-op when it holds none."""
    with _LIVE_GUARD:
        refs = tuple(r for r in _alive(_HOLDERS.get(session_id, ())) if r() is not holder)
        if refs:
            _HOLDERS[session_id] = refs
        else:
            _HOLDERS.pop(session_id, None)


def is_turn_live(session_id: str) -> bool:
    """True while a loop of this process runs a turn of ``session_id`` (see ``live_turn``) or
    a live step driver holds it (see ``hold_live``)."""
    with _LIVE_GUARD:
        return session_id in _LIVE or bool(_alive(_HOLDERS.get(session_id, ())))


def closers(events: Sequence[Event], *, language: str = "en") -> list[NewEvent]:
    """The events that close a trailing open turn of ``events`` (empty when idle); see the
    module docstring for the order and shapes. Pure: nothing is appended.

    A **suspended** turn (a recorded tool call without result whose durable review request is
    logged, ``openstep.CallState.suspended``) is not a crash: its suspended calls, its
    not-yet-dispatched calls, its step and the turn stay open for ``StagedSession.resume``;
    only other recorded calls without result are closed (outcome unknown)."""
    view = open_turn_view(events)
    if view is None:
        return []
    suspended = bool(view.suspended)
    out: list[NewEvent] = []
    seq = len(events)
    for state in view.calls:
        if state.answered or state.suspended:
            continue
        started = state.call_seq is not None
        if suspended and not started:
            continue  # resume dispatches it
        text = wording.text("repair.outcome_unknown" if started else "repair.not_started", language)
        result_id = f"interrupted-tool-result-{state.call.id}-{seq}"
        message: Message = tool_result_message(state.call, text, True,
                                               id_factory=functools.partial(str, result_id))
        data_out = step_position(state.turn, state.step)
        data_out["message"] = message
        data_out["error"] = dict(OUTCOME_UNKNOWN if started else NOT_STARTED)
        out.append(NewEvent(TOOL_RESULT, data_out, "append",
                            [state.call_seq] if state.call_seq is not None else None))
        seq += 1
    if suspended:
        return out
    if view.open_step is not None:
        out.append(NewEvent(STEP_END, step_position(*view.open_step)))
    end: dict[str, Any] = {"turn": view.turn} if view.turn is not None else {}
    end["reason"] = {"kind": INTERRUPTED}
    out.append(NewEvent(TURN_END, end))
    return out


_REFOLD_ATTEMPTS = 5
"""How often ``repair_open_turn`` re-folds after a concurrent append before giving up."""


def repair_open_turn(session: Session, *, language: str = "en") -> list[Event]:
    """Close ``session``'s trailing open turn as interrupted; returns the events written
    (``[]`` when the session is idle). Raises ``RuntimeError`` when a loop of this process is
    running that turn (``is_turn_live``), ``LogWriteError`` when the log refused the batch (the
    log is then unchanged). The closers are appended with ``expect_last_seq`` (the seq folded):
    when another writer appended meanwhile, the log is re-read (``Session.refresh``), re-folded
    and re-checked (a turn that has ended since needs nothing). Repair still assumes no other
    worker is driving that turn (one driver per session turn; no lease). Hold no other lock
    of the session while calling it from a thread; it takes ``Runtime.session_lock``'s lock
    itself."""
    with session_lock(session.id):
        for _attempt in range(_REFOLD_ATTEMPTS):
            session.refresh()
            if not session.is_turn_open:
                return []
            if is_turn_live(session.id):
                raise RuntimeError(
                    f"session {session.id!r}: the open turn is being run by a live loop; it is not a crash")
            folded = session.last_seq
            batch = closers(session.events, language=language)
            if not batch:
                return []
            try:
                return session.append_many(batch, expect_last_seq=folded)
            except AppendConflictError:
                continue  # another writer appended since the fold: re-fold and re-check
        raise AppendConflictError(
            folded, session.last_seq,
            f"session {session.id!r}: crash repair gave up after {_REFOLD_ATTEMPTS} attempts; "
            "another writer keeps appending to the open turn (is it still being driven?)")


def is_suspended(session: Session) -> bool:
    """True when ``session``'s open turn holds a suspended tool call (its review request is
    logged, it has no result): crash repair leaves such a turn open for ``resume``."""
    view = open_turn_view(session.events)
    return view is not None and bool(view.suspended)
