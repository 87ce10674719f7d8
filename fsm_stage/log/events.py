"""Events, the session header and the ``EventLog`` protocol every store implements.

An event is one line of a DSH session log (docs/session-log.md): ``type``, ``seq``
(contiguous from 0), ``time`` (integer epoch ms, not necessarily monotonic), ``data`` (any
JSON), and on the three surface types a ``surface_op`` (``"append"`` or ``Replace``) plus
optional ``source_event_seqs``. Event types fsm_stage invents carry ``ignorable=True``.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:  # both import this module
    from fsm_stage.log.memory import MemoryLog as MemoryLog
    from fsm_stage.log.surface import Surface


@attrs.frozen
class Replace:
    """Surface op replacing the inclusive run of surface nodes ``start`` … ``end`` (both seqs)."""

    start: int
    end: int


SurfaceOp = Literal["append"] | Replace


@attrs.frozen
class Event:
    """One logical session event (docs/session-log.md)."""

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


def _header_id(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"SessionHeader.{attr.name} must be a non-empty str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"SessionHeader.{attr.name} must be a non-empty str, got ''")


def _header_opt_str(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"SessionHeader.{attr.name} must be a str or None, got {type(value).__name__}")


def _header_count(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attr.name in ("seed_length", "version"):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "int or None" if attr.name in ("seed_length", "version") else "int"
        raise TypeError(f"SessionHeader.{attr.name} must be a non-negative {kind}, "
                        f"got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"SessionHeader.{attr.name} must be a non-negative int, got {value}")


def _header_extra(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"SessionHeader.{attr.name} must be a mapping, got {type(value).__name__}")


def wall_clock_ms() -> int:
    """Current wall-clock time in integer epoch milliseconds."""
    return int(_time.time() * 1000)


#: ``SessionHeader.extra`` of a header without unmodelled keys (one shared read-only mapping).
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})

@attrs.frozen
class SessionHeader:
    """The session header line (docs/session-log.md). ``extra`` keeps unmodelled keys.

    Checked at construction as ``read_log(strict=True)`` checks a header line: ``id`` a
    non-empty str (``ValueError`` when empty), ``cwd``/``parent_session``/``origin`` a str or
    None, ``created_at``/``delegation_depth`` non-negative ints, ``seed_length``/``version``
    a non-negative int or None, ``extra`` a mapping (``TypeError`` naming the field otherwise).
    ``created_at`` is epoch milliseconds, now (``wall_clock_ms()``) when not given; a header
    read from a log keeps the logged value (0 when the line has none)."""

    id: str = attrs.field(validator=_header_id)
    created_at: int = attrs.field(factory=wall_clock_ms, validator=_header_count)
    cwd: str | None = attrs.field(default=None, validator=_header_opt_str)
    delegation_depth: int = attrs.field(default=0, validator=_header_count)
    parent_session: str | None = attrs.field(default=None, validator=_header_opt_str)
    origin: str | None = attrs.field(default=None, validator=_header_opt_str)
    seed_length: int | None = attrs.field(default=None, validator=_header_count)
    version: int | None = attrs.field(default=0, validator=_header_count)
    # read-only; one shared empty mapping when the header has no unmodelled keys
    extra: Mapping[str, Any] = attrs.field(factory=lambda: _NO_EXTRA, validator=_header_extra)

    @property
    def is_subagent(self) -> bool:
        """True for delegated children: origin ``subagent`` or ``delegation_depth > 0``
        (docs/contracts.md)."""
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


def check_header(header: Any, what: str, *, optional: bool = False) -> None:
    """Refuse a ``header`` argument that is not a ``SessionHeader`` (``None`` too when
    ``optional``) with a ``TypeError`` naming ``what`` and the type given."""
    if isinstance(header, SessionHeader) or (optional and header is None):
        return
    expected = "a SessionHeader or None" if optional else "a SessionHeader"
    raise TypeError(f"{what} must be {expected}, got {type(header).__name__} "
                    "(build one with SessionHeader(id, cwd=...))")


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
    against and folds as it commits (docs/architecture.md): readers (``Session``, ``tokens``) use it
    instead of folding a second copy. ``MemoryLog`` and ``JsonlLog`` implement all of it; a
    host adapter delegating to one of them gets it by delegation.

    ``expect_last_seq`` (docs/session-log.md) makes an append conditional: written only when the log
    still ends at that seq (``-1`` = empty), else ``AppendConflictError`` with nothing written.
    ``refresh()`` catches up with other writers' events and returns how many it read.

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


def log_now(log: object) -> int:
    """Epoch ms by the clock that stamps ``log``'s events: its ``now()`` (``LogBase``, or a log
    that wraps one, such as the fleet's ``FencedLog``), else the wall clock. Deadlines compare
    event times with it."""
    now = getattr(log, "now", None)
    return int(now()) if callable(now) else wall_clock_ms()


class LogBase:
    """What every store shares: ``append`` is a one-event ``append_many``; length and iteration
    read ``events``; ``now()`` reads the clock that stamps its events. A store subclasses it,
    implements ``events`` and ``append_many`` and sets ``_clock`` when it takes one."""

    _clock: Clock = staticmethod(lambda: wall_clock_ms())

    def now(self) -> int:
        """Epoch ms by the clock that stamps this log's events (wall clock unless the store was
        given another): deadlines compare event times with it."""
        return self._clock()

    @property
    def events(self) -> Sequence[Event]:
        raise NotImplementedError

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

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
        """Append one event (``append_many`` of one); returns it. Raises ``LogWriteError`` (the
        log unchanged), ``AppendConflictError`` when ``expect_last_seq`` no longer holds."""
        spec = NewEvent(type, data, surface_op, source_event_seqs, ignorable)
        return self.append_many([spec], expect_last_seq=expect_last_seq)[0]


Clock = Callable[[], int]


def answered_call_id(ev: Event) -> str | None:
    """The call id a ``tool/result`` answers (current ``message.source.callId`` /
    ``toolCallId`` shapes and the legacy ``{callId, content, isError}`` shape), else None."""
    data = ev.data if isinstance(ev.data, Mapping) else {}
    if isinstance(data.get("callId"), str):
        return str(data["callId"])
    msg = data.get("message")
    if isinstance(msg, Mapping):
        source = msg.get("source")
        if isinstance(source, Mapping) and isinstance(source.get("callId"), str):
            return str(source["callId"])
        for block in msg.get("content") or ():
            if isinstance(block, Mapping) and isinstance(block.get("toolCallId"), str):
                return str(block["toolCallId"])
    return None


def check_last_seq(expected: int | None, length: int) -> None:
    """Raise ``AppendConflictError(expected, length - 1)`` unless ``expected`` is None or the
    log of ``length`` events ends at seq ``expected`` (``-1`` = empty)."""
    if expected is not None and expected != length - 1:
        from fsm_stage.errors import AppendConflictError

        raise AppendConflictError(expected, length - 1)


def __getattr__(name: str) -> Any:
    """``MemoryLog`` lives in ``fsm_stage.log.memory``; this keeps ``events.MemoryLog`` importable."""
    if name == "MemoryLog":
        from fsm_stage.log.memory import MemoryLog

        return MemoryLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
