"""Pending selections, their flush at an accepted boundary, and the per-session lock.

The mechanism plan mode and the stage switch share (docs/contracts.md;
docs/contracts.md): a user's selection (``Selection``) waits in a
``PendingStore`` until the next accepted pre-step, where ``PendingStore.flush`` appends it
durably or keeps it for a retry; every controller holds ``session_lock`` around fold → fire
→ append. ``HeaderRelative`` and ``told`` ("what the model was last told") are re-exported
from ``fsm_stage.log.projections``, the single implementation the stage fold and the CLI's
``lastHeader`` use too. ``redeem_once`` applies an approved review exactly once when several
workers share a session (a conditional batch; a lost race re-folds and decides again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs

from fsm_stage.errors import AppendConflictError, LogWriteError
from fsm_stage.handoff import HandoffPathError
from fsm_stage.log.projections import HeaderRelative as HeaderRelative
from fsm_stage.log.projections import HeaderRelativeState as HeaderRelativeState
from fsm_stage.log.projections import told as told
from fsm_stage.runtime.messages import Message
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.session import session_lock as session_lock

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

T = TypeVar("T")

Outcome = Literal["committed", "queued", "cancelled", "noop"]
"""What a selection did: appended now / pending until the next accepted pre-step / reverted a
pending selection back to the logged state / nothing (already the target)."""


REDEEM_ATTEMPTS = 10
"""``redeem_once`` re-folds after a lost conditional append at most this often."""

R = TypeVar("R")


def redeem_once(session: Session, find: Callable[[Session], R | None],
                apply: Callable[[R, int], object]) -> bool:
    """Apply the approval ``find(session)`` returns with ``apply(record, expect_last_seq)``,
    re-folding after each lost conditional append (module docstring). Returns True when this
    call applied it, False when nothing (any more) was pending. Raises the last
    ``AppendConflictError`` after ``REDEEM_ATTEMPTS`` lost races (a ``LogWriteError``: the
    caller logs it and the approval, still in the log, is retried at the next step)."""
    conflict: AppendConflictError | None = None
    for _attempt in range(REDEEM_ATTEMPTS):
        record = find(session)  # refresh + fold
        if record is None:
            return False
        expect = session.last_seq  # the end the decision was folded from
        try:
            apply(record, expect)
        except AppendConflictError as err:
            conflict = err  # another worker appended meanwhile: fold again, decide again
            session.mark_stale()
            continue
        return True
    assert conflict is not None
    raise conflict


FLUSH_RETRY_ERRORS: tuple[type[Exception], ...] = (LogWriteError, HandoffPathError, OSError)
"""The exceptions a failed flush is retried for (a write that did not happen); others propagate."""


@attrs.frozen
class Selection(Generic[T]):
    """A pending user selection: the ``target`` state, whether to ``narrate`` it, an optional payload.

    ``narrate`` is True for user selections, False for reviewed tool exits (their tool result
    is the narration, B28). ``payload`` carries extras such as the stage switch's handoff path.
    Selections live in memory only (B114); an approved review lives in the log instead
    (``fsm_stage.reviews._fold``, docs/reviews.md) and survives a crash.
    """

    target: T
    narrate: bool
    payload: Any = None


class PendingStore(Generic[T]):
    """Per-session pending selections, at most one per session, in memory only.

    Keyed by the session **id**, so a host that re-wraps the same log in a new ``Session``
    keeps its selection (docs/contracts.md, stage switch J). ``put`` overwrites; a record lives until it is
    flushed, cleared or the store is closed.
    """

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
        """Apply the pending selection at an accepted pre-step.

        Does nothing when ``aborted`` or nothing is pending (B22, B32). Otherwise calls
        ``apply(agent, selection)``, which performs the durable append(s) and returns the
        messages to add at the **end** of the step's batch (e.g. a narration notice decided
        before the append); on success the selection is cleared. Durable first: nothing is
        cleared before the append succeeded. If ``apply`` raises a write-path error
        (``FLUSH_RETRY_ERRORS``), the failure is logged (once per failed attempt), the
        selection is kept for the next accepted pre-step and the batch is returned unchanged
        (B29, B30; S80). Any other exception is a bug, not a write failure: it propagates with
        the selection kept instead of being retried forever.

        ``failure`` is the log message for a failed apply: a ``str.format`` template with an
        ``{error}`` placeholder, or a function of the exception (use a function when the text
        embeds other values, so no brace in them is read as a placeholder).
        Returns the (possibly extended) message batch.
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
