"""``Session``: one agent's session over an ``EventLog`` (docs/architecture.md; docs/contracts.md S1).

The log is the truth (docs/architecture.md invariant 1): ``Session`` holds no state of its own except
projection caches that a fold of the log rebuilds, so keep one ``Session`` per log for the
agent's lifetime (a new wrapper refolds from the start once). ``read(projection)`` costs
O(new events) (invariant 4): one cursor per projection object, advanced over the events
appended since the last read. The ``Session`` class docstring lists its members.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import marshal
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    SYSTEM_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
)
from fsm_stage.log.events import Event, EventLog, NewEvent, SessionHeader, SurfaceOp
from fsm_stage.log.projections import Fold, OpenTurn, ProjectionCursor, TurnState
from fsm_stage.observe import appended
from fsm_stage.runtime.prefix import PrefixView

S = TypeVar("S")

__all__ = ["TURN_FOLD", "Projection", "Session", "TurnFold", "TurnState"]


Projection = Fold
"""A pure incremental fold: ``init()``, ``apply(state, event)`` (``projections.Fold``).
``fsm_stage.log.projections.Projection`` (which adds ``key``, ``view``, ``dump``/``load``
for checkpoints) is one too; either can be passed to ``Session.read``."""


class TurnFold(OpenTurn):
    """The runtime's name for ``fsm_stage.log.projections.OpenTurn`` — the one turn fold
    (open turn, last turn number, header count). State: ``TurnState``."""


TURN_FOLD = TurnFold()

#: the sessions the running ``Session.one_refresh`` block has read the log of (None: no block)
_BLOCK: contextvars.ContextVar[set[Session] | None] = contextvars.ContextVar("fsm_stage_one_refresh",
                                                                             default=None)


#: The one empty history every session without model-visible messages hands out (no object per
#: session for it).
_NO_MESSAGES: PrefixView[dict[str, Any]] = PrefixView([], 0)


class Session:
    """An agent's session over an ``EventLog``.

    ``Session(log)``             wraps any ``EventLog`` (``MemoryLog``, ``JsonlLog``, a host adapter).
    ``session.id``               the header id (str).
    ``session.header``           the ``SessionHeader`` (cwd, origin, delegation depth, parent).
    ``session.events``           the committed events (``events[i].seq == i``).
    ``session.append(...)``      appends through the log; raises ``LogWriteError`` (log unchanged).
    ``session.append_many(b)``   appends a batch of ``NewEvent`` atomically (all or nothing).
    ``session.read(p)``          the projection ``p``'s folded state (cached, incremental).
    ``session.is_turn_open``     True when the last ``turn/start``/``turn/end`` is a ``turn/start``.
    ``session.surface()``        model-visible node seqs (a tuple copy of ``log.surface.nodes``: the
                                 log folds and validates the surface once);
                                 ``session.messages()`` their messages.
    ``session.refresh()``        catches up with other writers; ``with session.one_refresh():``
                                 makes only the block's first ``refresh()`` read the log.
    """

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._cursors: dict[int, ProjectionCursor[Any]] = {}
        # (surface, replace generation, nodes done, messages, the view of them handed last, the
        # view before it when this one only grew it, else None): what ``shared_messages`` built last
        self._messages: tuple[object, int, int, list[dict[str, Any]], PrefixView[dict[str, Any]],
                              PrefixView[dict[str, Any]] | None] | None = None
        # a shared empty tuple until a validator is added (a live session stays small)
        self._validators: list[Callable[[Event], None]] | tuple[()] = ()

    @property
    def log(self) -> EventLog:
        """The underlying event log."""
        return self._log

    @property
    def header(self) -> SessionHeader:
        """The session header (cwd, origin, delegation depth, parent)."""
        return self._log.header

    @property
    def id(self) -> str:
        """The session id from the header."""
        return self._log.header.id

    @property
    def events(self) -> Sequence[Event]:
        """Committed events in seq order."""
        return self._log.events

    def __len__(self) -> int:
        return len(self._log)

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
        """Append one event; raises ``LogWriteError`` and leaves the log unchanged on failure
        (``AppendConflictError`` when ``expect_last_seq`` is given and the log no longer ends
        at that seq).

        Installed validators see the would-be event first and may raise (nothing is appended).
        The committed event is then logged on the ``fsm_stage.*`` loggers and, when OpenTelemetry
        is loaded, traced (``fsm_stage.observe.appended``; docs/observability.md).
        """
        if self._validators:
            probe = Event(type=type, seq=len(self._log), time=0, data=data, surface_op=surface_op,
                          source_event_seqs=None if source_event_seqs is None else tuple(source_event_seqs),
                          ignorable=ignorable)
            for validate in list(self._validators):
                validate(probe)
        try:
            if expect_last_seq is None:
                event = self._log.append(type, data, surface_op=surface_op,
                                         source_event_seqs=source_event_seqs, ignorable=ignorable)
            else:
                event = self._log.append(
                    type, data, surface_op=surface_op, source_event_seqs=source_event_seqs,
                    ignorable=ignorable, expect_last_seq=expect_last_seq,
                )
        except BaseException:
            self.mark_stale()  # a lost race (or a failed write): the next refresh reads the log
            raise
        appended(self, (event,))
        return event

    def refresh(self) -> int:
        """Catch up with events other writers appended (``EventLog.refresh``); returns how many
        were read (0 for a log without other writers or without ``refresh``). Inside
        ``one_refresh`` only the first call reads the log (later ones return 0 until
        ``mark_stale``)."""
        block = _BLOCK.get()
        if block is not None and self in block:
            return 0
        refresh = getattr(self._log, "refresh", None)
        n = int(refresh()) if callable(refresh) else 0
        if block is not None:
            block.add(self)
        return n

    def one_refresh(self) -> contextlib.AbstractContextManager[None]:
        """A step or boundary that reads the log once: inside the block the first ``refresh()``
        catches up and the later ones return 0 (on PostgreSQL each refresh is a query; the
        review flow refreshes before every fold it decides on). Decisions in the block that
        write do so conditionally (``expect_last_seq``): a lost race raises, marks the session
        stale (``mark_stale``, also done by a failed append) and the re-fold reads the log again.
        Each block starts stale, so a block never relies on another's read. Call
        ``mark_stale()`` after waiting on anything outside the process (a reviewer).
        The block belongs to the running task (a context variable): another task reading the
        same session meanwhile (an MCP server listing reviews while one is asked) reads the log."""
        return _OneRefresh()

    def mark_stale(self) -> None:
        """Make the next ``refresh()`` read the log (see ``one_refresh``)."""
        block = _BLOCK.get()
        if block is not None:
            block.discard(self)

    @property
    def last_seq(self) -> int:
        """Seq of the last committed event, ``-1`` for an empty log (for ``expect_last_seq``)."""
        return len(self._log) - 1

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        """Append a batch atomically through ``EventLog.append_many`` (all or nothing);
        ``expect_last_seq`` as in ``append``.

        Installed validators see every would-be event first (with the seq it would get); the
        first refusal raises and nothing is appended. Raises ``LogWriteError`` (log unchanged).
        """
        if self._validators:
            base = len(self._log)
            for i, spec in enumerate(specs):
                seqs = spec.source_event_seqs
                probe = Event(type=spec.type, seq=base + i, time=0, data=spec.data,
                              surface_op=spec.surface_op,
                              source_event_seqs=None if seqs is None else tuple(seqs),
                              ignorable=spec.ignorable)
                for validate in list(self._validators):
                    validate(probe)
        try:
            if expect_last_seq is None:
                events = self._log.append_many(specs)
            else:
                events = self._log.append_many(specs, expect_last_seq=expect_last_seq)
        except BaseException:
            self.mark_stale()  # a lost race (or a failed write): the next refresh reads the log
            raise
        appended(self, events)
        return events

    def add_validator(self, validate: Callable[[Event], None]) -> Callable[[], None]:
        """Run ``validate(event)`` before every later append (raise to refuse); returns a disposer."""
        if not isinstance(self._validators, list):
            self._validators = []
        self._validators.append(validate)

        def dispose() -> None:
            if validate in self._validators and isinstance(self._validators, list):
                self._validators.remove(validate)

        return dispose

    def append_message(self, message: Mapping[str, Any], *, source_event_seqs: Sequence[int] | None = None,
                       surface_op: SurfaceOp = "append") -> Event:
        """Append a ``user/message`` carrying ``message`` (appended to the surface by default)."""
        return self.append(USER_MESSAGE, dict(message), surface_op=surface_op,
                           source_event_seqs=source_event_seqs)

    def read(self, projection: Projection[S]) -> S:
        """The folded state of ``projection`` over the whole log, cached per projection object.

        O(new events) per call. The projection object is held for the session's lifetime. A log
        with ``projection_seed(projection) -> (state, watermark) | None`` (``PostgresLog`` opened
        from a checkpoint) starts the cursor there instead of at the first event.
        """
        key = id(projection)
        cursor = self._cursors.get(key)
        if cursor is None or cursor.projection is not projection:
            seed = getattr(self._log, "projection_seed", None)  # a checkpointed store (PostgresLog)
            found = seed(projection) if seed is not None else None
            state0, watermark = (None, -1) if found is None else found
            cursor = ProjectionCursor(projection, self._log, state=state0,  # type: ignore[arg-type]
                                      watermark=watermark)
            self._cursors[key] = cursor
        state: S = cursor.read()
        return state

    @property
    def is_turn_open(self) -> bool:
        """True when the last ``turn/start``/``turn/end`` in the log is a ``turn/start``."""
        return self.read(TURN_FOLD).open

    @property
    def last_turn(self) -> int:
        """The highest turn number seen in the log (0 when none)."""
        return self.read(TURN_FOLD).last_turn

    @property
    def has_request_header(self) -> bool:
        """True when the log holds at least one ``request/header``."""
        return self.read(TURN_FOLD).headers > 0

    def surface(self) -> tuple[int, ...]:
        """Model-visible node seqs in order (append / replace ops folded): a snapshot copy
        of the log's live ``surface.nodes`` (O(surface); ``log.surface`` reads it in place)."""
        return tuple(self._log.surface.nodes)

    @property
    def head_is_system(self) -> bool:
        """True when surface node 0 is a ``system/message`` (the protected head, docs/contracts.md).

        O(1): read from the log's surface.
        """
        return self._log.surface.head_is_system

    def messages(self) -> list[dict[str, Any]]:
        """The model-visible messages of the surface nodes, in order, as deep copies: a caller
        may change them freely without touching the log's events, the next model request or
        what ``fork_log`` writes.

        ``user/message`` → ``data``; ``assistant/message`` / ``tool/result`` → ``data.message``
        (legacy shapes without ``message`` use ``data`` itself). Empty assistant messages
        (usage carriers) are skipped. O(surface size) per call (the copy); ``shared_messages``
        is the read-only, uncopied form.
        """
        return list(deep_copies(self.shared_messages()))

    def shared_messages(self) -> PrefixView[dict[str, Any]]:
        """``messages()`` without the copy, as an immutable sequence (``PrefixView``: equal to
        the tuple of the same messages; ``tuple(...)`` makes one): the dicts are shared with the
        log and later calls, so they are **read-only** by contract (the step driver reads them and
        copies once for a host).

        O(new surface nodes) per call: while the surface only grew (no replace), the messages
        built by the previous call are reused, only the new nodes are built and the result is a
        view of the first ``n`` of one growing list (no per-call copy of the history); a call
        with no new node returns the very view the previous call returned.
        """
        surface = self._log.surface
        nodes = surface.nodes
        cached = self._messages
        before: PrefixView[dict[str, Any]] | None = None
        if cached is not None and cached[0] is surface and cached[1] == surface.replace_generation:
            if cached[2] == len(nodes):
                return cached[4]
            out, start = (cached[3], cached[2]) if cached[2] < len(nodes) else ([], 0)
            before = cached[4] if start else None
        else:
            out, start = [], 0
        self._build_messages(nodes, start, out)
        shared = PrefixView(out, len(out)) if out else _NO_MESSAGES
        self._messages = (surface, surface.replace_generation, len(nodes), out, shared, before)
        return shared

    def extends(self, newer: Sequence[Any], older: Sequence[Any]) -> bool:
        """True when ``newer`` is the sequence ``shared_messages()`` returns now and ``older`` is
        that one or the one it returned just before, with the surface only grown in between:
        ``newer`` then starts with ``older``'s very messages (O(1), no comparison). False says
        nothing either way (compare them)."""
        cached = self._messages
        return cached is not None and newer is cached[4] and (older is newer or older is cached[5])

    def _build_messages(self, nodes: Sequence[int], start: int, out: list[dict[str, Any]]) -> None:
        events = self._log.events
        for seq in nodes[start:]:
            ev = events[seq]
            data = ev.data if isinstance(ev.data, Mapping) else {}
            if ev.type in (USER_MESSAGE, SYSTEM_MESSAGE):
                msg: Any = data
            elif ev.type in (ASSISTANT_MESSAGE, TOOL_RESULT):
                msg = data.get("message", data)
            else:  # pragma: no cover - the surface holds only message types
                continue
            if not isinstance(msg, Mapping):
                continue
            if ev.type == ASSISTANT_MESSAGE and not msg.get("content"):
                continue
            out.append(dict(msg))


def deep_copies(messages: Sequence[Any]) -> tuple[Any, ...]:
    """Deep copies of ``messages``. Messages are log data (JSON types): ``marshal`` copies those
    in C, several times faster than ``copy.deepcopy``, which takes anything else."""
    items = list(messages)
    try:
        return tuple(marshal.loads(marshal.dumps(items)))
    except (ValueError, TypeError):
        return tuple(copy.deepcopy(items))


class _OneRefresh(contextlib.ContextDecorator):
    """``Session.one_refresh``'s block: a fresh set of sessions already refreshed in it. Also a
    decorator, as a ``contextlib.contextmanager`` block is (each call gets a block of its own)."""

    def _recreate_cm(self) -> _OneRefresh:
        return _OneRefresh()

    def __enter__(self) -> None:
        self._token = _BLOCK.set(set())

    def __exit__(self, *exc: object) -> None:
        _BLOCK.reset(self._token)


_LOCKS: weakref.WeakValueDictionary[str, threading.RLock] = weakref.WeakValueDictionary()
_LOCKS_GUARD = threading.Lock()


def session_lock(session_id: str) -> threading.RLock:
    """The process-wide re-entrant lock of the session ``session_id``: the **one** per-session
    lock (docs/architecture.md "serialise per session") every controller holds.

    Hold it around fold → fire → append so two threads (or two ``Session`` wrappers of one
    log) never both apply a transition from the same folded state. Keyed by the session
    **id**, like the pending store, so wrappers of one log in one process and both plan mode
    and the stage switch share it. Re-entrant, so a controller may call another locked method
    of itself. The same id yields the same lock object while any caller still references it
    (a weak-value map: the registry does not grow with every session a long-lived host has
    seen). ``Runtime.session_lock(session_id)`` is the same lock.
    """
    lock = _LOCKS.get(session_id)  # the common case: held already, no guard needed to read
    if lock is not None:
        return lock
    with _LOCKS_GUARD:
        lock = _LOCKS.get(session_id)
        if lock is None:
            lock = threading.RLock()
            _LOCKS[session_id] = lock
        return lock
