"""Events, the session header and the ``EventLog`` protocol with its in-memory store.

An event is one line of a DSH session log (dsh-log-format.md §1.3): ``type``, ``seq``
(contiguous from 0), ``time`` (integer epoch ms, not necessarily monotonic), ``data`` (any
JSON), and on the three surface types a ``surface_op`` (``"append"`` or ``Replace``) plus
optional ``source_event_seqs``. Event types fsm_stage invents carry ``ignorable=True``.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs

from fsm_stage.errors import AppendConflictError, LogWriteError

if TYPE_CHECKING:  # surface imports this module
    from fsm_stage.log.surface import Surface


@attrs.frozen
class Replace:
    """Surface op replacing the inclusive run of surface nodes ``start`` … ``end`` (both seqs)."""

    start: int
    end: int


SurfaceOp = Literal["append"] | Replace


@attrs.frozen
class Event:
    """One logical session event (dsh-log-format.md §1.3)."""

    type: str
    seq: int
    time: int
    data: Any
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None
    ignorable: bool = False

    def to_json(self) -> dict[str, Any]:
        """The DSH envelope as a JSON-ready dict (replace written as ``{op, start, end}``)."""
        out: dict[str, Any] = {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}
        if self.surface_op is not None:
            out["surfaceOp"] = (
                "append"
                if self.surface_op == "append"
                else {"op": "replace", "start": self.surface_op.start, "end": self.surface_op.end}
            )
        if self.source_event_seqs is not None:
            out["sourceEventSeqs"] = list(self.source_event_seqs)
        if self.ignorable:
            out["ignorable"] = True
        return out


@attrs.frozen
class SessionHeader:
    """The session header line (dsh-log-format.md §1.2). ``extra`` keeps unmodelled keys."""

    id: str
    created_at: int = 0
    cwd: str | None = None
    delegation_depth: int = 0
    parent_session: str | None = None
    origin: str | None = None
    seed_length: int | None = None
    version: int | None = 0
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def is_subagent(self) -> bool:
        """True for delegated children: origin ``subagent`` or ``delegation_depth > 0`` (S-spec §1.14)."""
        return self.origin == "subagent" or self.delegation_depth > 0

    def to_json(self, *, absent_as_null: bool = False) -> dict[str, Any]:
        """The header line as written by fsm_stage (absent optional fields omitted, never null;
        a missing ``version`` written 0), then the unmodelled ``extra`` keys.

        ``absent_as_null=True`` is the header *as read*, for reports (``fsm-stage state
        --json``): every modelled key present, an absent ``cwd``/``parentSession``/
        ``seedLength``/``origin``/``version`` as None. Never write that form to a log.
        """
        version = self.version if absent_as_null or self.version is not None else 0
        optional = {
            "cwd": self.cwd,
            "delegationDepth": self.delegation_depth,
            "parentSession": self.parent_session,
            "seedLength": self.seed_length,
            "origin": self.origin,
        }
        out: dict[str, Any] = {"type": "session", "version": version, "id": self.id}
        out["createdAt"] = self.created_at
        out.update((k, v) for k, v in optional.items() if absent_as_null or v is not None)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out


@attrs.frozen
class NewEvent:
    """One event to append with ``append_many`` (the same fields as ``EventLog.append``)."""

    type: str
    data: Any
    surface_op: SurfaceOp | None = None
    source_event_seqs: Sequence[int] | None = None
    ignorable: bool = False


@runtime_checkable
class EventLog(Protocol):
    """An append-only session log.

    ``events`` is the committed, ordered event list (``events[i].seq == i``). ``append``
    either commits the event durably and returns it, or raises ``LogWriteError`` and leaves
    the log exactly as it was; ``append_many`` does the same for a batch (all or nothing).
    ``surface`` is the live ``fsm_stage.log.surface.Surface`` the log validates surface ops
    against and folds as it commits (DESIGN.md §8): readers (``Session``, ``tokens``) use it
    instead of folding a second copy. ``MemoryLog`` and ``JsonlLog`` implement all of it; a
    host adapter delegating to one of them gets it by delegation.

    Writers differ in one default: ``allow_unknown_types`` is True on ``MemoryLog`` and False
    on ``JsonlLog`` (see their docstrings).
    """

    @property
    def header(self) -> SessionHeader: ...

    @property
    def events(self) -> Sequence[Event]: ...

    @property
    def surface(self) -> Surface: ...

    def __len__(self) -> int: ...

    def append_many(
        self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None
    ) -> list[Event]: ...

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
        expect_last_seq: int | None = None,
    ) -> Event: ...

    def refresh(self) -> int: ...


Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Current wall-clock time in integer epoch milliseconds."""
    return int(_time.time() * 1000)


def check_last_seq(expected: int | None, length: int) -> None:
    """Raise ``AppendConflictError(expected, length - 1)`` unless ``expected`` is None or the
    log of ``length`` events ends at seq ``expected`` (``-1`` = empty)."""
    if expected is not None and expected != length - 1:
        raise AppendConflictError(expected, length - 1)


class MemoryLog:
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
    ``ignorable=True`` raises ``InvalidEventError`` on a file. Pass
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
        from fsm_stage.log.surface import Surface  # local: surface imports this module

        self._ignorable_types = frozenset(ignorable_types)
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

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
        expect_last_seq: int | None = None,
    ) -> Event:
        """Append one event; raises ``LogWriteError`` (log unchanged) when ``fail_next`` is set
        or the surface op cannot apply, ``AppendConflictError`` as ``append_many``."""
        return self.append_many([NewEvent(type, data, surface_op, source_event_seqs, ignorable)],
                                expect_last_seq=expect_last_seq)[0]

    def refresh(self) -> int:
        """Catch up with other writers: a ``MemoryLog`` has none, so always 0 (design B §2)."""
        return 0

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        """Append a batch atomically (all or nothing); raises ``LogWriteError`` (log unchanged),
        ``InvalidEventError`` for an event a strict reader would refuse. With
        ``expect_last_seq`` (the seq of the last event the writer saw, ``-1`` for an empty log)
        the batch is written only if the log still ends there, else ``AppendConflictError``."""
        from fsm_stage.log.writer_checks import prepare_batch  # local: it imports this module

        check_last_seq(expect_last_seq, len(self._events))
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            name = specs[0].type if specs else "?"
            raise LogWriteError(f"append of {name!r} refused: {err}") from err
        evs = prepare_batch(
            specs,
            next_seq=len(self._events),
            now=self._clock(),
            surface=self.surface,
            ignorable_types=self._ignorable_types,
            allow_unknown=self._allow_unknown_types,
        )
        self._events.extend(evs)
        self.surface.extend(evs)
        return evs
