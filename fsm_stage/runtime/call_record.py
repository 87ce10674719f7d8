"""The ``tool/call`` record of a running call, written with the call's review request.

A reviewed tool (``goto_stage``, ``exit_plan_mode``, a host tool under an ``ask`` rule) writes
its review request before anything else reaches the log. Its ``tool/call`` may share that
write: the durability contract only needs the call recorded before its review is asked
(docs/performance.md). The runtime runs the tool with the record pending (``run_deferred``);
``open_request`` takes it into the request's batch (``pending_call``, ``lead``, ``wrote``);
``ensure_written`` writes it alone where no request was opened (a refusal, a suspension found
on resume, a host call let run), ``write_with`` with the result. One write fewer per reviewed
call: one fsync on a ``JsonlLog``, one commit on PostgreSQL. A ``shared`` record (a host's call,
which another worker of the session may log too) is written only where the log still ends as
its writer saw it; ``found`` says another write had logged it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, TypeVar

from fsm_stage.constants import TURN_START
from fsm_stage.errors import AppendConflictError, ReviewPending
from fsm_stage.log.events import Event, NewEvent

if TYPE_CHECKING:
    from fsm_stage.runtime.session import Session

T = TypeVar("T")

__all__ = ["PendingCall", "pending_call", "run_deferred", "write_with"]


class PendingCall:
    """One call's ``tool/call`` event for ``session``, not written yet (``seq`` None) or
    written at ``seq`` (given for a call logged before: a suspended call authorized again).
    ``shared``: another writer may log the same call (a host's call, seen by two workers)."""

    __slots__ = ("_shared", "_unsure", "found", "seq", "session", "spec")

    def __init__(self, session: Session, spec: NewEvent, *, seq: int | None = None,
                 shared: bool = False) -> None:
        self.session, self.spec = session, spec
        self.seq: int | None = seq
        self._unsure = False
        self._shared = shared  # another writer may log the same call (a host call in a second worker)
        self.found = False  # ensure_written found it logged by another write instead of writing it

    def failed(self) -> None:
        """A batch it led raised a write error: it may have committed all the same (a store
        that lost its connection after the commit), so it is looked up before written again."""
        self._unsure = True

    def _logged_seq(self) -> int | None:
        """The seq of a ``tool/call`` of this call id already in the log's open turn (a failed
        write that may have committed; another worker that logged the call), else None."""
        self.session.refresh()
        call_id = self.spec.data.get("callId") if isinstance(self.spec.data, dict) else None
        events = self.session.events
        for i in range(len(events) - 1, -1, -1):
            ev = events[i]
            if ev.type == TURN_START:
                break
            if ev.type == self.spec.type and isinstance(ev.data, dict) and ev.data.get("callId") == call_id:
                return ev.seq
        return None

    def lead(self, session: Session) -> list[NewEvent]:
        """``[the tool/call event]`` to put first in a batch appended to ``session`` while it is
        unwritten; ``[]`` once written or for another session."""
        return [self.spec] if self.seq is None and session is self.session else []

    def wrote(self, events: Sequence[Event]) -> None:
        """Mark it written as the first of ``events`` (the batch ``lead`` started)."""
        if self.seq is None and events and events[0].type == self.spec.type:
            self.seq = events[0].seq

    def known_seq(self) -> int | None:
        """Its seq when written (also by a write that failed but may have committed), else None."""
        if self.seq is None and self._unsure:
            self.seq = self._logged_seq()
        return self.seq

    def ensure_written(self, *, look: bool | None = None, seen: int | None = None) -> int:
        """Its seq, appending it alone first when it is not written yet. The open turn is
        searched for a record of the call first when ``look`` (default: after a failed write,
        or for a ``shared`` call); a shared call is appended only where the log still ends as
        this writer saw it (``seen``: the last seq it decided on; default: now), and looked up
        again after another writer's append (``found``: it was). Raises the log's
        ``LogWriteError`` (nothing written)."""
        look = (self._unsure or self._shared) if look is None else look
        while self.seq is None:
            if look:
                self.seq = self._logged_seq()
                if self.seq is not None:
                    self.found = True
                    break
            if not self._shared:
                self.seq = self.session.append(self.spec.type, self.spec.data).seq
                break
            expect = self.session.last_seq if seen is None else seen
            try:
                self.seq = self.session.append_many([self.spec], expect_last_seq=expect)[0].seq
            except AppendConflictError:
                look, seen = True, None
        return self.seq


_PENDING: contextvars.ContextVar[PendingCall | None] = contextvars.ContextVar(
    "fsm_stage_pending_tool_call", default=None)


def pending_call(session: Session) -> PendingCall | None:
    """The running call's ``tool/call`` record for ``session``: unwritten (``lead`` puts it in
    a batch) or written at ``seq``; None when the runtime wrote it before the tool ran or there
    is none."""
    pending = _PENDING.get()
    if pending is None or pending.session is not session:
        return None
    return pending


async def run_deferred(pending: PendingCall, run: Awaitable[T]) -> T:
    """Await ``run`` (the tool, or the review before it) with ``pending`` left to it (this task
    and the tasks it starts); a suspension (``ReviewPending``) writes ``pending`` before it
    propagates: a suspended call is a dispatched one."""
    token = _PENDING.set(pending)
    try:
        return await run
    except ReviewPending:
        pending.ensure_written(look=True)  # a resumed or joined call's is logged already
        raise
    finally:
        _PENDING.reset(token)


def write_with(pending: PendingCall, spec: NewEvent) -> list[Event]:
    """Append ``spec`` (a ``tool/result``), after ``pending`` when that is unwritten, in one
    conditional batch whose ``sourceEventSeqs`` point at the call; retried after a lost race
    (another writer appended first). Returns the events written."""
    session = pending.session
    pending.known_seq()
    while True:
        if pending.seq is not None:
            return [session.append(spec.type, spec.data, surface_op=spec.surface_op,
                                   source_event_seqs=[pending.seq])]
        last = session.last_seq
        result = NewEvent(spec.type, spec.data, spec.surface_op, [last + 1])
        try:
            events = session.append_many([pending.spec, result], expect_last_seq=last)
        except AppendConflictError:
            session.refresh()
            continue
        pending.seq = events[0].seq
        return events
