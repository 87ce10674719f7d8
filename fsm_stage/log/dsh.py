"""Reader for DeepSeek Harness (DSH) session logs: real on-disk logs and DSH's test fixtures.

Follows dsh-log-format.md §9.1:

* **Header** (line 1, ``type: "session"``): ``version`` 0 or absent; any other integer is a
  ``LogFormatError`` saying the log was written by a newer harness (``allow_newer=True``
  reads it anyway, with a warning). ``delegationDepth`` is not required.
* **Body**: one storage record per line. Packed chunk rows (``text-chunks``,
  ``reasoning-chunks``, ``tool-call-chunks``) are expanded into ``assistant/chunk`` events so
  seqs stay right (§1.3). Explicit ``seq``/``seq0`` must equal the running count; absent
  ones (DSH's projected snapshots) are synthesised from it; absent ``time`` reads as 0.
  Replace ops are read as ``{op, start, end}`` or ``{op, startSeq, endSeq}``.
* **Unknown event types** are kept (so seqs stay right) and folds ignore them; they are
  counted in ``ReadResult.unknown_types``. ``strict=True`` mirrors DSH's loader: it refuses
  an unknown type that lacks ``ignorable: true`` (§8.6), unknown envelope keys, a header
  without ``version`` or ``delegationDepth`` and retired header fields.
* **Legacy shapes** (pre-identity messages, ``turn/start.trigger``) are kept verbatim; the
  folds only read fields they tolerate being absent.
* **Torn tail** (§8.3): a last line without ``\\n`` is dropped and reported. A complete but
  unparsable line, a seq gap or a malformed record is dropped with everything after it when
  no later ``turn/end`` exists; otherwise it is corruption (``LogFormatError``). The reported
  ``torn_tail_offset`` is the byte offset just past the last good line (where a writer may
  truncate). A malformed packed row is always corruption (§8.4).
* **zstd** (``.jsonl.zstd``, detected by magic bytes) through the optional ``zstandard``
  extra, multi-frame; an incomplete last frame counts as a torn tail. Offsets then refer to
  the decompressed text.
* Files that are not session logs (ACP JSON-RPC transcripts, headless ``stream-json``
  envelopes, JSON-RPC ``session.event`` notifications) get a one-line ``LogFormatError``
  starting ``not a session log:``. The two live envelope forms are read by ``read_streams``
  (one ``ReadResult`` per session in the stream) and ``read_stream`` (the first one).
* ``iter_events`` streams ``(line_offset, event)`` pairs in constant memory and can resume at
  a byte offset (checkpoints).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import attrs

from fsm_stage.constants import SESSION_FORMAT_VERSION, SESSION_HEADER_TYPE, TURN_END
from fsm_stage.errors import LogFormatError
from fsm_stage.log.events import Event, Replace, SessionHeader, SurfaceOp

PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
"""Storage-only packed chunk row tags (dsh-log-format.md §1.3 b)."""

ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})
"""The seven keys a DSH event envelope may have (§1.3 a)."""

HEADER_KEYS = frozenset(
    {"type", "version", "id", "createdAt", "cwd", "delegationDepth", "parentSession", "seedLength", "origin"}
)
RETIRED_HEADER_KEYS = frozenset({"sandboxMode", "approvalPolicy"})

KNOWN_EVENT_TYPES = frozenset(
    [
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    ]
)
"""DSH HEAD's known event vocabulary (48 names, dsh-log-format.md §2.2/§8.6)."""

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_json_decode = json.JSONDecoder().decode
"""One shared decoder: skips ``json.loads``'s per-call encoding detection on the hot path."""

_UNPARSABLE = (ValueError, RecursionError)
"""What decoding a line may raise for bad input: ``ValueError`` (incl. ``JSONDecodeError`` and
``UnicodeDecodeError``) and ``RecursionError`` for nesting deeper than the parser's recursion
limit: such a line is unparsable like any other (§8.3)."""


@attrs.frozen
class ReadResult:
    """What ``read_log``/``read_stream`` found.

    ``events[i].seq == i``. ``line_offsets[i]`` is the byte offset of the start of the line
    holding event ``i`` (members of a packed row share one). ``good_end`` is the offset just
    past the last good line; ``torn_tail_offset`` equals it when a tail was dropped, else None.
    ``warnings`` are one-line human-readable notes (torn tail, unknown types, legacy header).
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


class _Defect(Exception):
    """A bad line: torn tail if no later ``turn/end`` exists, else corruption."""


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
    """Validate a ``type: "session"`` header line (dsh-log-format.md §1.2, §8.1–2).

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


class RecordDecoder:
    """Decodes body records into ``Event``s, keeping the running seq (``next_seq``).

    ``decode(rec, line_no)`` returns the events of one storage record; raises ``_Defect``
    (torn-or-corrupt, decided by the caller) or ``LogFormatError`` (always fatal: malformed
    packed row, strict-mode vocabulary violation).
    """

    def __init__(self, *, source: str, next_seq: int = 0, strict: bool = False) -> None:
        self.source = source
        self.next_seq = next_seq
        self.strict = strict
        self.unknown: Counter[str] = Counter()

    def decode(self, rec: Any, line_no: int) -> list[Event]:
        # Hot path (every line of every log): exact ``type(...) is`` checks (which also
        # exclude bools from ints) and one dict lookup per field.
        if type(rec) is not dict:
            raise _Defect(f"line {line_no} is not a JSON object")
        get = rec.get
        t = get("type")
        if type(t) is not str:
            raise _Defect(f"line {line_no} has no string type")
        if t in PACKED_ROW_TYPES:
            return self._packed(t, rec, line_no)
        if t == SESSION_HEADER_TYPE:
            raise _Defect(f"line {line_no} is a second session header")
        expected = self.next_seq
        seq = get("seq", expected)
        if seq != expected or type(seq) is not int:
            raise _Defect(f"line {line_no} has seq {seq!r} where {expected} was expected")
        tm = get("time", 0)
        if type(tm) is not int:
            raise _Defect(f"line {line_no} has non-integer time {tm!r}")
        op: SurfaceOp | None = None
        raw_op = get("surfaceOp")
        if raw_op is not None:
            try:
                op = parse_surface_op(raw_op)
            except ValueError as err:
                raise _Defect(f"line {line_no}: {err}") from None
        srcs = get("sourceEventSeqs")
        if srcs is not None:
            if type(srcs) is not list or not all(type(s) is int for s in srcs):
                raise _Defect(f"line {line_no}: sourceEventSeqs must be a list of integers")
            srcs = tuple(srcs)
        ignorable = get("ignorable") is True
        if not ignorable and t not in KNOWN_EVENT_TYPES:
            if self.strict:
                raise LogFormatError(
                    f"{self.source}:{line_no}: unknown event type {t!r} without ignorable:true "
                    "(likely written by a newer harness)"
                )
            self.unknown[t] += 1
        if self.strict:
            extra = sorted(rec.keys() - ENVELOPE_KEYS)
            if extra:
                raise LogFormatError(
                    f"{self.source}:{line_no}: invalid event envelope key(s) {', '.join(extra)}"
                )
        self.next_seq = seq + 1
        return [Event(t, seq, tm, get("data"), op, srcs, ignorable)]

    def _packed(self, t: str, rec: dict[str, Any], line_no: int) -> list[Event]:
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
            raise _Defect(f"line {line_no} has seq0 {seq0!r} where {self.next_seq} was expected")
        t0 = rec.get("time0", 0)
        members = d.get("args") if t == "tool-call-chunks" else d.get("texts")
        dt = d.get("dt")
        if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
            raise bad("member list must be a non-empty list of strings")
        if not isinstance(dt, list) or len(dt) != len(members) - 1 or not all(_is_int(x) for x in dt):
            raise bad("dt must hold one integer gap fewer than the members")
        if not _is_int(t0) or not all(_is_int(d.get(k)) for k in ("turn", "step", "index")):
            raise bad("turn, step, index and time0 must be integers")
        out: list[Event] = []
        tm = t0
        turn, step, index = d["turn"], d["step"], d["index"]
        for k, m in enumerate(members):
            if k:
                tm += dt[k - 1]
            chunk: dict[str, Any]
            if t == "tool-call-chunks":
                if not isinstance(d.get("id"), str):
                    raise bad("tool-call row needs a string id")
                chunk = {"type": "tool-call-delta", "index": index, "id": d["id"]}
                if "name" in d:
                    chunk["name"] = d["name"]
                chunk["argumentsDelta"] = m
            else:
                chunk = {
                    "type": "text-delta" if t == "text-chunks" else "reasoning-delta",
                    "index": index,
                    "text": m,
                }
            out.append(Event("assistant/chunk", seq0 + k, tm, {"turn": turn, "step": step, "chunk": chunk}))
        self.next_seq = seq0 + len(members)
        return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during a bulk read.

    Decoding allocates millions of small acyclic objects; generation-2 collections over the
    growing event list would otherwise make reading a 1M-event log several times slower.
    Reference counting still frees everything; the collector is restored afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@attrs.frozen
class OpenedLog:
    """A log opened for reading: the logical JSONL ``stream``, whether it was ``compressed``,
    whether a damaged or incomplete last zstd frame was dropped (``torn``) and ``warnings``."""

    stream: IO[bytes]
    compressed: bool
    torn: bool
    warnings: list[str]


def open_log_bytes(path: Path) -> OpenedLog:
    """Open ``path`` as a binary stream of the logical JSONL text.

    zstd logs (detected by magic bytes) are decoded frame by frame into memory; a frame is kept
    only when it decodes completely (one frame = one durable DSH append batch), so an
    incomplete or damaged last frame is dropped whole and reported as a torn tail. Raises
    ``LogFormatError`` when a zstd log is met without the ``zstandard`` extra.
    """
    fh = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    magic = fh.read(4)
    fh.seek(0)
    if magic != ZSTD_MAGIC:
        return OpenedLog(fh, False, False, [])
    with fh:
        data = fh.read()
    try:
        import zstandard
    except ImportError:
        raise LogFormatError(
            f"{path} is zstd-compressed; install the optional extra: pip install 'fsm_stage[zstd]'"
        ) from None
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    warnings: list[str] = []
    torn = False
    rest = data
    while rest:
        dobj = dctx.decompressobj()
        try:
            frame = dobj.decompress(rest)
        except zstandard.ZstdError as err:
            warnings.append(f"{path}: torn tail: damaged zstd frame dropped ({err})")
            torn = True
            break
        if not dobj.eof:
            warnings.append(f"{path}: torn tail: incomplete last zstd frame dropped")
            torn = True
            break
        out += frame
        rest = dobj.unused_data
    return OpenedLog(io.BytesIO(bytes(out)), True, torn, warnings)


def _classify_foreign(first: Mapping[str, Any]) -> str:
    # CLI and Python users alike read this message: no function names (the Python reader of
    # streams, ``read_stream``, is documented in the module docstring)
    if first.get("type") == "session_event":
        return (
            "a headless stream-json event stream (live output of a run), not a session log file; "
            "pass the session's own .jsonl log file"
        )
    if first.get("method") in ("session.event", "session.status"):
        return (
            "a JSON-RPC session.event notification stream (live output), not a session log file; "
            "pass the session's own .jsonl log file"
        )
    if "jsonrpc" in first:
        return "ACP JSON-RPC transcript"
    return "first line is not a session header"


def _later_turn_end(lines: Iterator[bytes]) -> bool:
    for raw in lines:
        if b"turn/end" not in raw:
            continue
        try:
            rec = json.loads(raw)
        except _UNPARSABLE:
            continue
        if isinstance(rec, dict) and rec.get("type") == TURN_END:
            return True
    return False


@attrs.define
class BodyScan:
    """Mutable bookkeeping of one body scan: current byte ``offset`` and ``line_no``, the
    shared ``warnings`` list, and ``torn_tail_offset`` once a tail was dropped."""

    offset: int
    line_no: int
    warnings: list[str]
    torn_tail_offset: int | None = None


def scan_body(
    lines: Iterator[bytes], decoder: RecordDecoder, scan: BodyScan
) -> Iterator[tuple[int, bytes, list[Event]]]:
    """Decode body lines, yielding ``(line_offset, raw_line, events)`` per good line; applies the
    torn-tail rule (raises ``LogFormatError`` on corruption)."""
    for raw in lines:
        scan.line_no += 1
        if not raw.endswith(b"\n"):
            if raw.strip():
                scan.torn_tail_offset = scan.offset
                scan.warnings.append(
                    f"{decoder.source}: torn tail: last line {scan.line_no} has no newline; "
                    f"dropped from byte {scan.offset}"
                )
            return
        if not raw.strip():
            scan.offset += len(raw)
            continue
        try:
            try:
                rec = _json_decode(raw.decode("utf-8"))
            except _UNPARSABLE:
                raise _Defect(f"line {scan.line_no} is not valid JSON") from None
            evs = decoder.decode(rec, scan.line_no)
        except _Defect as defect:
            if _later_turn_end(lines):
                raise LogFormatError(
                    f"{decoder.source}: corrupt session log: {defect} and a later turn/end exists"
                ) from None
            scan.torn_tail_offset = scan.offset
            scan.warnings.append(f"{decoder.source}: torn tail: {defect}; dropped from byte {scan.offset}")
            return
        yield scan.offset, raw, evs
        scan.offset += len(raw)


def unknown_types_warning(source: str, counts: Mapping[str, int]) -> str:
    """The one-line warning for event types outside DSH's vocabulary that a reader kept:
    ``"<source>: unknown event type(s) kept but ignored by folds: a/b ×2, c/d ×1"`` (types
    sorted). Shared by ``read_log`` and ``checkpoints.cold_fold`` (review D5)."""
    listed = ", ".join(f"{t} ×{n}" for t, n in sorted(counts.items()))
    return f"{source}: unknown event type(s) kept but ignored by folds: {listed}"


def read_header(fh: IO[bytes], source: str) -> tuple[dict[str, Any], int]:
    """Read and classify the first non-empty line; returns (header dict, offset after it).

    Raises ``LogFormatError`` ``not a session log: …`` for anything but a session header.
    """
    offset = 0
    for raw in fh:
        if not raw.strip():
            offset += len(raw)
            continue
        try:
            first = json.loads(raw)
        except _UNPARSABLE:
            raise LogFormatError(f"not a session log: {source}: first line is not JSON") from None
        if not isinstance(first, dict):
            raise LogFormatError(f"not a session log: {source}: first line is not a JSON object")
        if first.get("type") != SESSION_HEADER_TYPE:
            raise LogFormatError(f"not a session log: {source}: {_classify_foreign(first)}")
        if not raw.endswith(b"\n"):
            raise LogFormatError(f"not a session log: {source}: the header line is incomplete (torn)")
        return first, offset + len(raw)
    raise LogFormatError(f"not a session log: {source}: the file is empty")



@attrs.frozen
class OpenedSession:
    """A session log opened for reading with its header parsed: the ``log`` stream (positioned
    just after the header line), the ``raw_header`` mapping, ``body_start`` (byte offset of the
    first event line) and the validated ``header``."""

    log: OpenedLog
    raw_header: dict[str, Any]
    body_start: int
    header: SessionHeader


def open_session_log(path: Path, *, strict: bool = False, allow_newer: bool = False) -> OpenedSession:
    """Open ``path``, read and validate its header line (shared by ``read_log`` and ``cold_fold``).

    The caller closes ``result.log.stream`` (use it as a context manager). Raises
    ``LogFormatError`` like ``read_header`` / ``parse_header``; the stream is closed then.
    """
    source = str(path)
    opened = open_log_bytes(path)
    try:
        raw_header, body_start = read_header(opened.stream, source)
        header = parse_header(
            raw_header, source=source, allow_newer=allow_newer, strict=strict, warnings=opened.warnings
        )
    except BaseException:
        opened.stream.close()
        raise
    return OpenedSession(opened, raw_header, body_start, header)

def read_log(
    path: str | os.PathLike[str],
    *,
    strict: bool = False,
    allow_newer: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> ReadResult:
    """Read a DSH session log (plain or zstd) into memory; see the module docstring for the rules.

    ``on_progress(bytes_read)`` is called every few thousand lines (for a progress bar).
    Raises ``LogFormatError`` (one line) for non-session files, newer versions, corruption and
    strict-mode violations; ``FileNotFoundError`` propagates.
    """
    p = Path(path)
    source = str(p)
    session = open_session_log(p, strict=strict, allow_newer=allow_newer)
    opened, raw_header, header = session.log, session.raw_header, session.header
    offset = session.body_start
    fh, compressed, warnings = opened.stream, opened.compressed, opened.warnings
    with fh:
        decoder = RecordDecoder(source=source, strict=strict)
        events: list[Event] = []
        offsets: array[int] = array("q")
        scan = BodyScan(offset=offset, line_no=1, warnings=warnings)
        with gc_paused():
            for n, (off, _raw, evs) in enumerate(scan_body(iter(fh), decoder, scan), 1):
                if len(evs) == 1:
                    events.append(evs[0])
                    offsets.append(off)
                else:
                    events.extend(evs)
                    offsets.extend([off] * len(evs))
                if on_progress is not None and n % 4096 == 0:
                    on_progress(off)
    if opened.torn and scan.torn_tail_offset is None:
        scan.torn_tail_offset = scan.offset
    if decoder.unknown:
        warnings.append(unknown_types_warning(source, decoder.unknown))
    return ReadResult(
        header=header,
        raw_header=raw_header,
        events=events,
        warnings=tuple(warnings),
        torn_tail_offset=scan.torn_tail_offset,
        good_end=scan.offset,
        unknown_types=dict(decoder.unknown),
        line_offsets=offsets,
        compressed=compressed,
    )


def iter_events(
    path: str | os.PathLike[str],
    *,
    start_offset: int | None = None,
    first_seq: int = 0,
    strict: bool = False,
    allow_newer: bool = False,
) -> Iterator[tuple[int, Event]]:
    """Stream ``(line_offset, event)`` pairs without keeping the log in memory.

    With ``start_offset`` the header is still validated, then reading resumes at that byte
    offset (which must be a line start) with the running seq ``first_seq``. Torn tails end
    the iteration silently; corruption raises ``LogFormatError``. Plain files only when
    resuming (zstd cannot seek).
    """
    p = Path(path)
    source = str(p)
    opened = open_log_bytes(p)
    fh, warnings = opened.stream, opened.warnings
    with fh:
        raw_header, offset = read_header(fh, source)
        parse_header(raw_header, source=source, allow_newer=allow_newer, strict=strict, warnings=warnings)
        if start_offset is not None:
            fh.seek(start_offset)
            offset = start_offset
        decoder = RecordDecoder(source=source, next_seq=first_seq, strict=strict)
        scan = BodyScan(offset=offset, line_no=1, warnings=warnings)
        for off, _raw, evs in scan_body(iter(fh), decoder, scan):
            for ev in evs:
                yield off, ev


def unwrap_envelope(rec: Any) -> Any | None:
    """The session event inside a live envelope (``session_event.event`` or
    ``session.event`` ``params.event``), else None (status lines, results …)."""
    if not isinstance(rec, dict):
        return None
    if rec.get("type") == "session_event":
        return rec.get("event")
    if rec.get("method") == "session.event":
        params = rec.get("params")
        return params.get("event") if isinstance(params, dict) else None
    return None


def read_streams(path: str | os.PathLike[str], *, strict: bool = False) -> list[ReadResult]:
    """Read a live envelope stream (headless ``stream-json`` or JSON-RPC notifications).

    Unwraps each event (§9.1) and skips other lines (``session.status``, results). A stream
    may interleave several sessions (a parent and its in-process subagents); events are routed
    by ``sessionId`` and, within one id, to the session whose running seq they continue (a
    ``seq`` of 0 that continues none starts a new session). Returns one ``ReadResult`` per
    session in order of appearance, each with a synthetic header (id = the ``sessionId``).
    Raises ``LogFormatError`` for an unparsable line, a seq that continues no session, or a
    file with no envelope at all.
    """
    p = Path(path)
    source = str(p)
    streams: list[tuple[str, RecordDecoder, list[Event], array[int]]] = []
    last: tuple[str, RecordDecoder, list[Event], array[int]] | None = None
    offset = 0
    with open(p, "rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            try:
                rec = json.loads(raw) if raw.strip() else None
            except _UNPARSABLE:
                raise LogFormatError(f"{source}:{line_no}: line is not valid JSON") from None
            ev = unwrap_envelope(rec)
            if ev is not None:
                assert isinstance(rec, dict)
                params = rec.get("params")
                sid = str(
                    rec.get("sessionId")
                    or (params.get("sessionId") if isinstance(params, dict) else "")
                    or ""
                )
                seq = ev.get("seq") if isinstance(ev, dict) else None
                target = None
                if seq is None:
                    target = last
                else:
                    for st in streams:
                        if st[0] == sid and st[1].next_seq == seq:
                            target = st
                            break
                if target is None:
                    if seq not in (None, 0):
                        raise LogFormatError(
                            f"{source}:{line_no}: seq {seq} continues no session in the stream"
                        )
                    target = (sid, RecordDecoder(source=source, strict=strict), [], array("q"))
                    streams.append(target)
                try:
                    evs = target[1].decode(ev, line_no)
                except _Defect as defect:
                    raise LogFormatError(f"{source}: {defect}") from None
                target[2].extend(evs)
                target[3].extend([offset] * len(evs))
                last = target
            offset += len(raw)
    if not streams:
        raise LogFormatError(f"not a session event stream: {source}: no session_event/session.event lines")
    return [
        ReadResult(
            header=SessionHeader(id=sid or "<stream>", version=None),
            raw_header={},
            events=evs,
            warnings=(),
            torn_tail_offset=None,
            good_end=offset,
            unknown_types=dict(dec.unknown),
            line_offsets=offs,
        )
        for sid, dec, evs, offs in streams
    ]


def read_stream(path: str | os.PathLike[str], *, strict: bool = False) -> ReadResult:
    """The first (primary) session of a live envelope stream; see ``read_streams``."""
    return read_streams(path, strict=strict)[0]
