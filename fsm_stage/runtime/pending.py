"""Pending selection + accepted-boundary flush + header-relative narration.

The mechanism plan mode and the stage switch share (plan-mode spec §1.6, §1.7, §4.2 reuse
note; stage-switch spec §1.6, §1.9, §1.13):

* ``Selection(target, narrate, payload=None)``: at most one per session, memory only (a
  documented limitation, B114) — user selections only: an approved review lives in the log
  (``fsm_stage.log.reviews``, docs/reviews.md) and survives a crash. ``narrate`` is True for
  user selections, False for reviewed tool exits (their tool result is the narration, B28).
  ``payload`` carries extras such as the stage switch's handoff path.
* ``PendingStore[T]``: the per-session store, keyed by the session **id** (so a host that
  re-wraps the same log in a new ``Session`` keeps its selection; S-spec §4.2 item 7), with
  ``get`` / ``put`` (overwrites) / ``clear`` and ``flush``. A record lives until it is flushed,
  cleared or the store is closed.
* ``PendingStore.flush(agent, messages, aborted=..., apply=...)``: run at an accepted pre-step.
  Does nothing when ``aborted`` or nothing is pending (B22, B32). Otherwise calls
  ``apply(agent, selection)``, which performs the durable append(s) and returns the messages to
  add at the **end** of the step's batch (e.g. a narration notice decided before the append).
  On success the selection is cleared. If ``apply`` raises a **write-path** error
  (``FLUSH_RETRY_ERRORS``: ``LogWriteError``, ``HandoffPathError``, ``OSError``), the failure
  is logged (once per failed attempt), the selection is kept for the next accepted pre-step and
  the batch is returned unchanged (B29, B30; S80). Any other exception is a bug, not a write
  failure: it propagates with the selection kept, instead of being retried forever.
  Durable first: nothing is cleared before the append succeeded.
* ``session_lock(session_id) -> RLock``: the **one** per-session lock (DESIGN.md §5
  "serialise per session") that every controller holds around fold → fire → append. It is
  keyed by the session **id**, like the pending store, so two ``Session`` wrappers of one log
  (in one process) share it, and plan mode and the stage switch share it. Re-entrant, so a
  controller may call another locked method of itself. The registry keeps a lock only while
  someone holds a reference to it (a weak-value map), so it does not grow with the sessions
  a long-lived host has seen. ``Runtime.session_lock(session_id)`` is the same lock.
* ``HeaderRelative(projection)``: wraps any projection to also remember its state at the last
  ``request/header`` ("what the model was last told"); ``told(state, default)`` reads it.
  Re-exported from ``fsm_stage.log.projections``, the single implementation the stage fold
  and the CLI's ``lastHeader`` use too.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs

from fsm_stage.errors import LogWriteError
from fsm_stage.handoff import HandoffPathError
from fsm_stage.log.projections import HeaderRelative as HeaderRelative
from fsm_stage.log.projections import HeaderRelativeState as HeaderRelativeState
from fsm_stage.log.projections import told as told
from fsm_stage.runtime.messages import Message
from fsm_stage.runtime.session import Session

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

T = TypeVar("T")

Outcome = Literal["committed", "queued", "cancelled", "noop"]
"""What a selection did: appended now / pending until the next accepted pre-step / reverted a
pending selection back to the logged state / nothing (already the target)."""


_LOCKS: weakref.WeakValueDictionary[str, threading.RLock] = weakref.WeakValueDictionary()
_LOCKS_GUARD = threading.Lock()


def session_lock(session_id: str) -> threading.RLock:
    """The process-wide re-entrant lock of the session ``session_id`` (see module docstring).

    Hold it around fold → fire → append so two threads (or two ``Session`` wrappers of one
    log) never both apply a transition from the same folded state (DESIGN.md §5).
    The same id always yields the same lock object while any caller still references it.
    """
    with _LOCKS_GUARD:
        lock = _LOCKS.get(session_id)
        if lock is None:
            lock = threading.RLock()
            _LOCKS[session_id] = lock
        return lock


FLUSH_RETRY_ERRORS: tuple[type[Exception], ...] = (LogWriteError, HandoffPathError, OSError)
"""The exceptions a failed flush is retried for (a write that did not happen); others propagate."""


@attrs.frozen
class Selection(Generic[T]):
    """A pending selection: the ``target`` state, whether to ``narrate`` it, an optional payload."""

    target: T
    narrate: bool
    payload: Any = None


class PendingStore(Generic[T]):
    """Per-session pending selections (memory only; see module docstring)."""

    def __init__(self, *, logger: logging.Logger | None = None, level: int = logging.WARNING) -> None:
        self._records: dict[str, Selection[T]] = {}
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._level = level

    def get(self, session: Session) -> Selection[T] | None:
        """The pending selection of ``session`` or None."""
        return self._records.get(session.id)

    def put(self, session: Session, selection: Selection[T]) -> None:
        """Store ``selection`` for ``session``, replacing any earlier one."""
        self._records[session.id] = selection

    def clear(self, session: Session) -> Selection[T] | None:
        """Remove and return the pending selection of ``session`` (None when there was none)."""
        return self._records.pop(session.id, None)

    def clear_all(self) -> None:
        """Forget every pending selection (used by ``close()``: nothing is flushed later, B94)."""
        self._records.clear()

    def flush(
        self,
        agent: Agent,
        messages: Sequence[Message],
        *,
        aborted: bool,
        apply: Callable[[Agent, Selection[T]], Sequence[Message]],
        failure: str | Callable[[Exception], str] = "flushing the pending selection failed: {error}",
    ) -> list[Message]:
        """Apply the pending selection at an accepted pre-step (see module docstring).

        ``failure`` is the log message for a failed apply: a ``str.format`` template with an
        ``{error}`` placeholder, or a function of the exception (use a function when the text
        embeds other values, so no brace in them is read as a placeholder).
        Returns the (possibly extended) message batch; never raises for a write-path failure
        (``FLUSH_RETRY_ERRORS``). Any other exception from ``apply`` propagates unchanged, the
        selection kept.
        """
        out = list(messages)
        if aborted:
            return out
        key = agent.session.id
        selection = self._records.get(key)
        if selection is None:
            return out
        try:
            extra = apply(agent, selection)
        except FLUSH_RETRY_ERRORS as exc:
            text = failure(exc) if callable(failure) else failure.format(error=exc)
            self._log.log(self._level, text)
            return out
        if self._records.get(key) is selection:
            del self._records[key]
        out.extend(extra)
        return out
