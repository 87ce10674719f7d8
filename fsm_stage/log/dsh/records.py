"""Decoding DSH session-log records: the header line and body event records.

``parse_header`` validates a ``type: "session"`` line: ``version`` 0 or absent (a newer one
is a ``LogFormatError`` unless ``allow_newer``), ``delegationDepth`` optional. A
``RecordDecoder`` turns body records into ``Event``s with the running seq: packed chunk rows
(``text-chunks``, ``reasoning-chunks``, ``tool-call-chunks``) expand into
``assistant/chunk`` events; absent ``seq``/``time`` are synthesised; replace ops read as
``{op, start, end}`` or ``{op, startSeq, endSeq}`` (``parse_surface_op``). Unknown types are
kept and counted; ``strict=True`` refuses them without ``ignorable: true``, along with
unknown envelope keys, missing header fields and retired ones. ``ReadResult`` is what a
reader returns.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import accumulate, repeat
from typing import Any, overload

import attrs

from fsm_stage.constants import KNOWN_EVENT_TYPES, SESSION_FORMAT_VERSION, SESSION_HEADER_TYPE
from fsm_stage.errors import LogFormatError, _LogLineDefect
from fsm_stage.log.events import Event, Replace, SessionHeader, SurfaceOp

PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
"""Storage-only packed chunk row tags (docs/session-log.md)."""

ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})
"""The seven keys a DSH event envelope may have."""

HEADER_KEYS = frozenset(
    {"type", "version", "id", "createdAt", "cwd", "delegationDepth", "parentSession", "seedLength", "origin"}
)
RETIRED_HEADER_KEYS = frozenset({"sandboxMode", "approvalPolicy"})

_DECODER = json.JSONDecoder()
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]  # set in JSONDecoder.__init__
_JSON_SPACE = " \t\n\r"


def _json_decode(s: str) -> Any:
    """``json.JSONDecoder().decode(s)``, one shared decoder (no per-call encoding detection).

    A line that starts with ``{`` (every line a writer produces) is scanned directly: the same
    scanner and the same checks as ``decode`` (a value at 0, only JSON whitespace after it),
    without its two whitespace regex matches; anything else goes through ``decode`` itself."""
    if s[:1] != "{":
        return _DECODER.decode(s)
    try:
        obj, end = _scan_once(s, 0)
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", s, err.value) from None
    if end != len(s):
        rest = s[end:]
        tail = rest.lstrip(_JSON_SPACE)
        if tail:
            raise json.JSONDecodeError("Extra data", s, end + len(rest) - len(tail))
    return obj

_INT_ONLY = frozenset({int})
"""``set(map(type, xs)) <= _INT_ONLY``: every item is an int and none a bool, checked in C."""

_UNPARSABLE = (ValueError, RecursionError)
"""What decoding a line may raise for bad input: ``ValueError`` (incl. ``JSONDecodeError`` and
``UnicodeDecodeError``) and ``RecursionError`` for nesting deeper than the parser's recursion
limit: such a line is unparsable like any other."""


@attrs.frozen
class ReadResult:
    """What ``read_log``/``read_stream`` found.

    ``events[i].seq == i``. ``line_offsets[i]`` is the byte offset of the start of the line
    holding event ``i`` (members of a packed row share one). ``good_end`` is the offset just
    past the last good line; ``torn_tail_offset`` equals it when a tail was dropped, else None.
    ``warnings`` are one-line human-readable notes (torn tail, unknown types, legacy header,
    unknown envelope keys). ``damaged_line``/``damage``/``lines_after_damage``: see
    ``opening.BodyScan`` (a dropped tail that starts at a damaged line, and what follows it).
    """

    header: SessionHeader
    raw_header: Mapping[str, Any]
    events: list[Event]
    warnings: tuple[str, ...]
    torn_tail_offset: int | None
    good_end: int
    unknown_types: Mapping[str, int]
    line_offsets: array[int]
    compressed: bool = False
    damaged_line: int | None = None
    damage: str | None = None
    lines_after_damage: int = 0


def parse_surface_op(raw: Any) -> SurfaceOp:
    """Decode a ``surfaceOp`` value: ``"append"`` or a replace (``start``/``end`` or ``startSeq``/``endSeq``).

    Raises ``ValueError`` for anything else.
    """
    if raw == "append":
        return "append"
    if isinstance(raw, dict) and raw.get("op") == "replace":
        start = raw.get("start", raw.get("startSeq"))
        end = raw.get("end", raw.get("endSeq"))
        if (
            isinstance(start, int)
            and isinstance(end, int)
            and not isinstance(start, bool)
            and not isinstance(end, bool)
            and start >= 0
            and end >= 0
        ):
            return Replace(start, end)
    raise ValueError(f"invalid surfaceOp {raw!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_header(
    rec: Mapping[str, Any],
    *,
    source: str = "<log>",
    allow_newer: bool = False,
    strict: bool = False,
    warnings: list[str] | None = None,
) -> SessionHeader:
    """Validate a ``type: "session"`` header line (docs/session-log.md).

    Raises ``LogFormatError``: newer version ("written by a newer harness"), non-string id,
    bad createdAt/delegationDepth types, or (``strict``) retired fields / missing fields.
    """
    warn = warnings if warnings is not None else []
    version = rec.get("version")
    if version is not None:
        if not _is_int(version) or version < 0:
            raise LogFormatError(f"{source}: invalid session log version {version!r}")
        if version > SESSION_FORMAT_VERSION:
            msg = (
                f"{source}: session log version {version} was written by a newer harness "
                f"(this reader understands version {SESSION_FORMAT_VERSION}); upgrade fsm_stage"
            )
            if not allow_newer:
                raise LogFormatError(msg)
            warn.append(msg + " — read anyway (allow_newer)")
    elif strict:
        raise LogFormatError(f"{source}: session header has no version")
    sid = rec.get("id")
    if not isinstance(sid, str) or not sid:
        raise LogFormatError(f"{source}: session header has no string id")
    created = rec.get("createdAt", 0)
    if not _is_int(created) or created < 0:
        raise LogFormatError(
            f"{source}: session header createdAt must be a non-negative integer, got {created!r}"
        )
    depth = rec.get("delegationDepth")
    if depth is None:
        if strict:
            raise LogFormatError(f"{source}: session header has no delegationDepth")
        depth = 0
    elif not _is_int(depth) or depth < 0:
        raise LogFormatError(f"{source}: delegationDepth must be a non-negative integer, got {depth!r}")
    retired = sorted(RETIRED_HEADER_KEYS & rec.keys())
    if retired:
        msg = f"{source}: session header has retired field(s) {', '.join(retired)}"
        if strict:
            raise LogFormatError(msg)
        warn.append(msg)
    cwd = rec.get("cwd")
    parent = rec.get("parentSession")
    origin = rec.get("origin")
    seed = rec.get("seedLength")
    return SessionHeader(
        id=sid,
        created_at=created,
        cwd=cwd if isinstance(cwd, str) else None,
        delegation_depth=depth,
        parent_session=parent if isinstance(parent, str) else None,
        origin=origin if isinstance(origin, str) else None,
        seed_length=seed if _is_int(seed) else None,
        version=version,
        extra={k: v for k, v in rec.items() if k not in HEADER_KEYS},
    )


def unknown_keys_warning(source: str, decoder: RecordDecoder) -> str:
    """The one-line warning for envelope keys outside DSH's seven that a reader ignored."""
    from fsm_stage.text import visible

    listed = ", ".join(
        f"{visible(json.dumps(k, ensure_ascii=False))} ×{n} (first on line {decoder.unknown_key_lines[k]})"
        for k, n in sorted(decoder.unknown_keys.items())
    )
    return (
        f"{source}: unknown event envelope key(s) ignored (damage? the events may be misread; "
        f"--strict refuses them): {listed}"
    )


class RecordDecoder:
    """Decodes body records into ``Event``s, keeping the running seq (``next_seq``).

    ``decode(rec, line_no)`` returns the events of one storage record; raises ``_LogLineDefect``
    (torn-or-corrupt, decided by the caller) or ``LogFormatError`` (always fatal: malformed
    packed row, strict-mode vocabulary violation). With ``lazy_packed`` a packed row is checked
    just as strictly but returned as a ``PackedRow`` whose events are built only when read.
    ``unread`` (event types nobody downstream reads, e.g. ``Routes.unread``): a plain event of
    such a type in the common ``{type, seq, time, data}`` envelope is checked just as strictly
    but returned as an ``UnreadEvent``, built only when read.
    """

    def __init__(
        self, *, source: str, next_seq: int = 0, strict: bool = False, lazy_packed: bool = False,
        unread: frozenset[str] = frozenset(),
    ) -> None:
        self.source = source
        self.lazy_packed = lazy_packed
        self.unread = unread
        self.next_seq = next_seq
        self.strict = strict
        self.unknown: Counter[str] = Counter()
        #: envelope keys outside DSH's seven met on event lines, and the first line
        #: of each: a reader keeps the event but warns (a bit flip in ``surfaceOp`` changes folds)
        self.unknown_keys: Counter[str] = Counter()
        self.unknown_key_lines: dict[str, int] = {}

    def decode(self, rec: Any, line_no: int) -> Sequence[Event]:
        # Hot path (every line of every log): exact ``type(...) is`` checks (which also
        # exclude bools from ints) and one dict lookup per field.
        if type(rec) is not dict:
            raise _LogLineDefect(f"line {line_no} is not a JSON object")
        get = rec.get
        t = get("type")
        if type(t) is not str:
            raise _LogLineDefect(f"line {line_no} has no string type")
        if len(rec) == 4 and t in KNOWN_EVENT_TYPES:
            # the common envelope ``{type, seq, time, data}`` of a known type has nothing
            # optional to read; anything else about it falls through to the full checks
            seq, tm = get("seq"), get("time")
            if type(seq) is int and seq == self.next_seq and type(tm) is int and "data" in rec:
                self.next_seq = seq + 1
                if t in self.unread:
                    return UnreadEvent(t, seq, tm, rec["data"])
                return [Event(t, seq, tm, rec["data"], None, None, False)]
        if t in PACKED_ROW_TYPES:
            return self._packed(t, rec, line_no)
        if t == SESSION_HEADER_TYPE:
            raise _LogLineDefect(f"line {line_no} is a second session header")
        expected = self.next_seq
        seq = get("seq", expected)
        if seq != expected or type(seq) is not int:
            raise _LogLineDefect(f"line {line_no} has seq {seq!r} where {expected} was expected")
        tm = get("time", 0)
        if type(tm) is not int:
            raise _LogLineDefect(f"line {line_no} has non-integer time {tm!r}")
        op: SurfaceOp | None = None
        raw_op = get("surfaceOp")
        if raw_op is not None:
            try:
                op = parse_surface_op(raw_op)
            except ValueError as err:
                raise _LogLineDefect(f"line {line_no}: {err}") from None
        srcs = get("sourceEventSeqs")
        if srcs is not None:
            if type(srcs) is not list or not set(map(type, srcs)) <= _INT_ONLY:
                raise _LogLineDefect(f"line {line_no}: sourceEventSeqs must be a list of integers")
            srcs = tuple(srcs)
        ignorable = get("ignorable") is True
        if not ignorable and t not in KNOWN_EVENT_TYPES:
            if self.strict:
                raise LogFormatError(
                    f"{self.source}:{line_no}: unknown event type {t!r} without ignorable:true "
                    "(likely written by a newer harness)"
                )
            self.unknown[t] += 1
        # cheap on the hot path: the common {type, seq, time, data} envelope has nothing extra
        if len(rec) != 4 or "data" not in rec or "seq" not in rec or "time" not in rec:
            extra = sorted(rec.keys() - ENVELOPE_KEYS)
            if extra:
                if self.strict:
                    raise LogFormatError(
                        f"{self.source}:{line_no}: invalid event envelope key(s) {', '.join(extra)}"
                    )
                for key in extra:
                    self.unknown_keys[key] += 1
                    self.unknown_key_lines.setdefault(key, line_no)
        self.next_seq = seq + 1
        return [Event(t, seq, tm, get("data"), op, srcs, ignorable)]

    def _packed(self, t: str, rec: dict[str, Any], line_no: int) -> Sequence[Event]:
        def bad(why: str) -> LogFormatError:
            return LogFormatError(f"{self.source}:{line_no}: malformed {t} row: {why}")

        if set(rec) - {"type", "seq0", "time0", "data"}:
            raise bad(f"unexpected keys {sorted(set(rec) - {'type', 'seq0', 'time0', 'data'})}")
        d = rec.get("data")
        if not isinstance(d, dict):
            raise bad("data is not an object")
        seq0 = rec.get("seq0")
        if seq0 is None:
            seq0 = self.next_seq
        elif not _is_int(seq0) or seq0 != self.next_seq:
            raise _LogLineDefect(f"line {line_no} has seq0 {seq0!r} where {self.next_seq} was expected")
        t0 = rec.get("time0", 0)
        members = d.get("args") if t == "tool-call-chunks" else d.get("texts")
        dt = d.get("dt")
        # ``map(isinstance, …)`` is the same check as a generator of ``isinstance`` calls, run in C
        # (the hot path of real logs, where a third of the events arrive in packed rows)
        if not isinstance(members, list) or not members or not all(map(isinstance, members, repeat(str))):
            raise bad("member list must be a non-empty list of strings")
        if (not isinstance(dt, list) or len(dt) != len(members) - 1
                or not all(map(isinstance, dt, repeat(int))) or any(map(isinstance, dt, repeat(bool)))):
            raise bad("dt must hold one integer gap fewer than the members")
        if not _is_int(t0) or not all(_is_int(d.get(k)) for k in ("turn", "step", "index")):
            raise bad("turn, step, index and time0 must be integers")
        if t == "tool-call-chunks" and not isinstance(d.get("id"), str):
            raise bad("tool-call row needs a string id")
        self.next_seq = seq0 + len(members)
        if self.lazy_packed:
            return PackedRow(t, d, seq0, t0, len(members))
        return _expand(t, d, seq0, t0)


def _expand(t: str, d: dict[str, Any], seq0: int, t0: int) -> list[Event]:
    """The ``assistant/chunk`` events of a validated packed row ``d`` of tag ``t``."""
    turn, step, index = d["turn"], d["step"], d["index"]
    members = d["args"] if t == "tool-call-chunks" else d["texts"]
    times = accumulate(d["dt"], initial=t0)
    if t == "tool-call-chunks":
        head = {"type": "tool-call-delta", "index": index, "id": d["id"]}
        if "name" in d:
            head["name"] = d["name"]
        return [Event("assistant/chunk", seq0 + k, tm,
                      {"turn": turn, "step": step, "chunk": {**head, "argumentsDelta": m}})
                for k, (m, tm) in enumerate(zip(members, times, strict=True))]
    kind = "text-delta" if t == "text-chunks" else "reasoning-delta"
    return [Event("assistant/chunk", seq0 + k, tm,
                  {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": m}})
            for k, (m, tm) in enumerate(zip(members, times, strict=True))]


class PackedRow(Sequence[Event]):
    """The ``assistant/chunk`` events of one packed chunk row, validated but built only when read.

    What ``RecordDecoder(lazy_packed=True)`` returns for a packed row: ``seq0`` is the first
    event's seq and ``size`` (= ``len``) the number of members. Indexing or iterating builds
    the same ``Event``s the eager decoder returns (once, then kept), so a caller that needs
    them loses nothing; a fold whose projections do not read ``assistant/chunk`` skips the row
    by its span alone.
    """

    __slots__ = ("_data", "_events", "_tag", "_time0", "seq0", "size")

    def __init__(self, tag: str, data: dict[str, Any], seq0: int, time0: int, count: int) -> None:
        self._tag, self._data, self.seq0, self._time0, self.size = tag, data, seq0, time0, count
        self._events: list[Event] | None = None

    def _built(self) -> list[Event]:
        if self._events is None:
            self._events = _expand(self._tag, self._data, self.seq0, self._time0)
        return self._events

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        return self._built()[i]


class UnreadEvent(Sequence[Event]):
    """One plain event of a type nobody downstream reads, validated but built only when read.

    What ``RecordDecoder(unread=...)`` returns for such an event: ``seq0`` is its seq and
    ``size`` (= ``len``) is 1, as for a ``PackedRow``. Indexing or iterating builds the same
    ``Event`` the eager decoder returns, so a caller that needs it loses nothing; a fold skips
    it by its seq alone.
    """

    __slots__ = ("_data", "_time", "_type", "seq0")

    size = 1

    def __init__(self, type_: str, seq: int, time: int, data: Any) -> None:
        self._type, self.seq0, self._time, self._data = type_, seq, time, data

    def __len__(self) -> int:
        return 1

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        return [Event(self._type, self.seq0, self._time, self._data, None, None, False)][i]


LAZY_ROWS: tuple[type, ...] = (PackedRow, UnreadEvent)
"""The decoder's lazily built returns: ``type(events) in LAZY_ROWS`` means skip by ``seq0``/``size``."""
