"""The projection protocol, folding, cursors and the header-relative wrapper.

A ``Projection`` is a pure reducer: ``init()`` is the state of an empty log,
``apply(state, event)`` returns the next state and returns **the same object** when the event
is irrelevant (change detection is by identity), ``view(state)`` is the client value, and
``dump``/``load`` convert the state to and from plain JSON for checkpoints. Bump
``STATE_VERSION`` when the state shape or the fold semantics change: checkpoints from another
version are discarded and the key is refolded from the log. ``ProjectionCursor(projection,
log)`` keeps a watermark, so ``read()`` after k new events costs O(k); ``fold(projection,
events, end)`` folds any prefix (time travel). ``HeaderRelative(inner)`` adds ``inner``'s
state at the last ``request/header`` ("what the model was last told", read with ``told``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeGuard, TypeVar, runtime_checkable

import attrs

from fsm_stage.constants import (
    ASSISTANT_CHUNK,
    KNOWN_EVENT_TYPES,
    REQUEST_HEADER,
)
from fsm_stage.log.events import Event, EventLog

S = TypeVar("S")


@runtime_checkable
class Projection(Protocol[S]):
    """A pure incremental fold of the log (docs/session-log.md).

    ``key`` names the unit (checkpoint rows are keyed by it); ``STATE_VERSION`` is a
    non-negative int. ``apply`` must return the same object for irrelevant events and must
    never mutate ``state``. ``load`` raises ``ValueError`` for a state it cannot accept.
    An optional ``READS`` (a frozenset of event types) promises that only events of those
    types, or with a surface op or source seqs, can change the state: cold folds (``routes``)
    hand the projection nothing else.
    """

    key: str
    STATE_VERSION: int

    def init(self) -> S: ...

    def apply(self, state: S, event: Event) -> S: ...

    def view(self, state: S) -> Any: ...

    def dump(self, state: S) -> Any: ...

    def load(self, raw: Any) -> S: ...


@attrs.frozen
class Routes:
    """Which of a fold's projections (by index) each event goes to (``routes``).

    ``by_type`` maps every event type some projection declares in ``READS`` to the indexes of
    those projections, in order; it is None when a projection declares no ``READS``, and then
    every event goes to ``every`` (all indexes). An event with a surface op or source seqs goes
    to ``every`` too; one of a type outside ``by_type`` goes nowhere. ``skip_packed`` is True
    when no projection reads ``assistant/chunk`` (packed chunk rows can be skipped whole);
    ``unread`` names the known types no projection reads (their plain events need not be built).
    """

    by_type: Mapping[str, tuple[int, ...]] | None
    every: tuple[int, ...]

    @property
    def skip_packed(self) -> bool:
        return self.by_type is not None and ASSISTANT_CHUNK not in self.by_type

    @property
    def unread(self) -> frozenset[str]:
        """The known event types no projection reads (empty when ``by_type`` is None): a
        plain event of one of them, without a surface op or source seqs, goes nowhere."""
        if self.by_type is None:
            return frozenset()
        return KNOWN_EVENT_TYPES - self.by_type.keys()


def routes(projections: Sequence[Projection[Any]]) -> Routes:
    """The ``Routes`` of ``projections`` from their optional ``READS``."""
    every = tuple(range(len(projections)))
    declared = [getattr(p, "READS", None) for p in projections]
    if any(r is None for r in declared):
        return Routes(None, every)
    by_type: dict[str, list[int]] = {}
    for i, reads in enumerate(declared):
        for t in reads or ():
            by_type.setdefault(t, []).append(i)
    return Routes({t: tuple(ix) for t, ix in by_type.items()}, every)


def fold(projection: Projection[S], events: Sequence[Event], end: int | None = None) -> S:
    """The state after ``events[0:end]`` (``end`` defaults to ``len(events)``)."""
    state = projection.init()
    apply = projection.apply
    stop = len(events) if end is None else max(0, min(end, len(events)))
    for i in range(stop):
        state = apply(state, events[i])
    return state


class ProjectionCursor(Generic[S]):
    """Incremental reader of one projection over a growing log.

    ``log`` is an ``EventLog`` or a plain event sequence. ``read()`` applies only the events
    appended since the last read (O(k) for k new events) and returns the state. ``state``/
    ``watermark`` may seed the cursor from a checkpoint (``watermark`` = last seq reflected,
    -1 for none). If the log is shorter than the watermark (a checkpoint seeded over a
    shorter log, or a swapped sequence), the cursor refolds from ``init``.

    Thread safety: the state and the next seq to fold live in **one** attribute,
    read once and assigned once per ``read()``, so concurrent readers (a controller under its
    lock, a runtime view without one) each fold from a consistent pair and never apply an
    event twice or skip one; at worst two readers fold the same new events in parallel.
    ``snapshot`` gives the pair without folding.
    """

    __slots__ = ("_at", "_is_sequence", "_source", "projection")

    def __init__(
        self,
        projection: Projection[S],
        log: EventLog | Sequence[Event],
        *,
        state: S | None = None,
        watermark: int = -1,
    ) -> None:
        self.projection = projection
        # Resolve the event source once: a runtime Protocol isinstance check per read would
        # cost more than folding a few events. A flag, not a closure: a cursor per session
        # per projection stays small.
        self._source = log
        self._is_sequence = isinstance(log, Sequence)
        # (state, next seq to fold): one attribute so a reader never sees half an update
        self._at: tuple[S, int] = (projection.init(), 0) if state is None else (state, watermark + 1)

    def read(self) -> S:
        """The state reflecting every committed event (folds only the new ones)."""
        source = self._source
        events: Sequence[Event] = source if self._is_sequence else source.events  # type: ignore[union-attr,assignment]
        n = len(events)
        state, nxt = self._at
        if n == nxt:
            return state
        if n < nxt:
            state, nxt = self.projection.init(), 0
        apply = self.projection.apply
        for i in range(nxt, n):
            state = apply(state, events[i])
        self._at = (state, n)
        return state

    def view(self) -> Any:
        """``projection.view(read())``."""
        return self.projection.view(self.read())

    @property
    def watermark(self) -> int:
        """The last seq reflected in the state (-1 before any event)."""
        return self._at[1] - 1

    @property
    def state(self) -> S:
        """The state as of ``watermark`` (no read)."""
        return self._at[0]

    @property
    def snapshot(self) -> tuple[S, int]:
        """``(state, watermark)`` as one consistent pair (no read)."""
        state, nxt = self._at
        return state, nxt - 1


def _data(event: Event) -> Mapping[str, Any]:
    d = event.data
    return d if isinstance(d, dict) else {}


class Fold(Protocol[S]):
    """A pure incremental fold (docs/session-log.md): ``init()``, ``apply(state, event)`` — the
    part of a ``Projection`` that folding needs (``Session.read`` and ``HeaderRelative``
    accept any). ``apply`` returns the same object when the event is irrelevant."""

    def init(self) -> S: ...

    def apply(self, state: S, event: Event) -> S: ...


@attrs.frozen
class HeaderRelativeState(Generic[S]):
    """``current`` inner state, the inner state at the last header, and whether one exists."""

    current: S
    at_last_header: S | None = None
    has_header: bool = False


class HeaderRelative(Generic[S]):
    """Projection wrapper remembering ``inner``'s state at the last ``request/header``
    ("what the model was last told", docs/contracts.md).

    The header event is applied to ``inner`` first, so the remembered state includes it.
    Returns the same state object for events that change neither part. The single
    implementation behind plan mode's told state, ``StageProjection.stage_at_last_header`` and
    ``ToldProjection``; ``fsm_stage.driver._pending`` re-exports it.
    """

    def __init__(self, inner: Fold[S], header_type: str = REQUEST_HEADER) -> None:
        self.inner = inner
        self.header_type = header_type

    def init(self) -> HeaderRelativeState[S]:
        return HeaderRelativeState(self.inner.init())

    def apply(self, state: HeaderRelativeState[S], event: Event) -> HeaderRelativeState[S]:
        current = self.inner.apply(state.current, event)
        if event.type == self.header_type:
            return HeaderRelativeState(current, current, True)
        if current is state.current:
            return state
        return HeaderRelativeState(current, state.at_last_header, state.has_header)


def told(state: HeaderRelativeState[S], default: S | None = None) -> S | None:
    """What the model was last told: the state at the last header, else ``default`` (also
    used when the header came before any value, i.e. ``at_last_header is None``)."""
    if not state.has_header or state.at_last_header is None:
        return default
    return state.at_last_header


def _int(value: Any) -> TypeGuard[int]:
    """An int that is not a bool (JSON integers)."""
    return isinstance(value, int) and not isinstance(value, bool)
