"""``MemoryLog``: the in-memory ``EventLog`` (unit tests, what-if simulations, hosts).

It validates surface ops and new events exactly like ``JsonlLog`` (both build their events
with ``writer_checks.prepare_batch``) but keeps everything in a list; ``fail_next`` lets a
test simulate a refused append. Open one with ``MemoryLog(header)`` or ``open_log("memory:")``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import TracebackType

from fsm_stage.errors import LogWriteError
from fsm_stage.locks import process_lock
from fsm_stage.log.events import (
    Clock,
    Event,
    LogBase,
    NewEvent,
    SessionHeader,
    check_header,
    check_last_seq,
    wall_clock_ms,
)
from fsm_stage.log.surface import Surface
from fsm_stage.log.writer_checks import prepare_batch

_NO_TYPES: frozenset[str] = frozenset()
# One lock for every MemoryLog of the process (a lock per log would add its bytes to every live
# session). It is held only to check the end and write (no caller's code runs under it: the
# clock is read before), and a child process starts with a new one.
_APPEND = process_lock()


class MemoryLog(LogBase):
    """In-memory ``EventLog``. ``fail_next`` lets tests simulate a refused append.

    Like ``JsonlLog`` it validates surface ops (``surface`` is the live ``Surface``; the
    protected system head rule is on by default), checks every new event with
    ``writer_checks.check_new_event`` (``ignorable_types``, ``allow_unknown_types`` as there),
    marks ``fsm/…`` types ignorable, and offers the atomic ``append_many`` — both stores
    build their events with the one ``writer_checks.prepare_batch``. Seed ``events`` are taken
    as they are (they come from a reader).

    **One difference, on purpose: ``allow_unknown_types`` defaults to True here but to False
    on ``JsonlLog``.** An in-memory log is never read by a strict DSH reader, so unit tests
    and hosts may use made-up types freely; the same append of an unknown type without
    ``ignorable=True`` raises ``LogWriteError`` on a file. Pass
    ``allow_unknown_types=False`` to get the file rule in memory (recommended for an
    orchestrator's own tests).
    """

    def __init__(
        self,
        header: SessionHeader,
        events: Sequence[Event] = (),
        *,
        clock: Clock = wall_clock_ms,
        protect_system_head: bool = True,
        ignorable_types: Collection[str] = (),
        allow_unknown_types: bool = True,
    ):
        check_header(header, "MemoryLog(header)")
        # the common empty set is shared: a live session stays small
        self._ignorable_types = frozenset(ignorable_types) if ignorable_types else _NO_TYPES
        self._allow_unknown_types = allow_unknown_types
        self._header = header
        self._events: list[Event] = list(events)
        self._clock = clock
        self.fail_next: BaseException | None = None
        for i, ev in enumerate(self._events):
            if ev.seq != i:
                raise LogWriteError(f"seed event {i} has seq {ev.seq}; seqs must be contiguous from 0")
        self.surface = Surface(protect_system_head=protect_system_head)
        self.surface.extend(self._events)

    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def events(self) -> Sequence[Event]:
        return self._events

    def refresh(self) -> int:
        """Catch up with other writers: a ``MemoryLog`` has none, so always 0 (docs/session-log.md)."""
        return 0

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        """Append a batch atomically (all or nothing); raises ``LogWriteError`` (log unchanged),
        ``LogWriteError`` for an event a strict reader would refuse. With
        ``expect_last_seq`` (the seq of the last event the writer saw, ``-1`` for an empty log)
        the batch is written only if the log still ends there, else ``AppendConflictError``.
        Threads sharing the log append one at a time (the check and the write are one step)."""
        now = self._clock()
        with _APPEND.lock:
            check_last_seq(expect_last_seq, len(self._events))
            if self.fail_next is not None:
                err, self.fail_next = self.fail_next, None
                name = specs[0].type if specs else "?"
                raise LogWriteError(f"append of {name!r} refused: {err}") from err
            evs = prepare_batch(
                specs,
                next_seq=len(self._events),
                now=now,
                surface=self.surface,
                ignorable_types=self._ignorable_types,
                allow_unknown=self._allow_unknown_types,
            )
            self._events.extend(evs)
            self.surface.extend(evs)
            return evs

    # -- lifecycle (the same shape as ``JsonlLog``, so ``with open_log(...)`` fits both) -----
    def close(self) -> None:
        """Nothing to release: the events stay readable (and appendable) after ``close``."""

    def __enter__(self) -> MemoryLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
