"""Opening DSH session-log files for reading: zstd, foreign files, the torn-tail rule.

``open_session_log(path)`` opens a log (plain, or zstd detected by magic bytes through the
optional ``zstandard`` extra, multi-frame: an incomplete last frame counts as a torn tail and
offsets refer to the decompressed text) and validates its header. Files that are not session
logs (ACP JSON-RPC transcripts, ``stream-json`` envelopes, ``session.event`` notifications)
get a one-line ``LogFormatError`` starting ``not a session log:``. ``scan_body`` applies the
torn-tail rule: a last line without a newline is dropped and reported; a bad line is
dropped with everything after it when no later ``turn/end`` exists, else it is corruption.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import io
import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from fsm_stage.constants import SESSION_HEADER_TYPE, TURN_END
from fsm_stage.errors import LogFormatError, _LogLineDefect
from fsm_stage.log.dsh.records import _UNPARSABLE, RecordDecoder, _json_decode, parse_header
from fsm_stage.log.events import Event, SessionHeader

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


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
    fh = _open_regular(path)
    magic = fh.read(4)
    fh.seek(0)
    if magic != ZSTD_MAGIC:
        return OpenedLog(fh, False, False, [])
    with fh:
        data = fh.read()
    return _decompressed(data, str(path))


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # none on Windows, which has no FIFO to block on
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def _open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file: a FIFO, socket or device is
    refused (``LogFormatError``) instead of blocking the reader for ever; a folder raises
    ``IsADirectoryError`` as ``open`` does."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC | _BINARY)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise LogFormatError(f"{path}: not a regular file (a FIFO, socket or device is never read "
                                 "as a session log)")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_log_data(data: bytes, source: str) -> OpenedLog:
    """``open_log_bytes`` for a log already in memory (standard input); ``source`` names it
    in messages."""
    if data[:4] != ZSTD_MAGIC:
        return OpenedLog(io.BytesIO(data), False, False, [])
    return _decompressed(data, source)


def _decompressed(data: bytes, path: str) -> OpenedLog:
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


def _rest_after_defect(lines: Iterator[bytes]) -> tuple[bool, int]:
    """Read the lines after a bad one: ``(a later turn/end exists, how many non-empty lines)``."""
    later_end = False
    rest = 0
    for raw in lines:
        if not raw.strip():
            continue
        rest += 1
        if later_end or b"turn/end" not in raw:
            continue
        try:
            rec = json.loads(raw)
        except _UNPARSABLE:
            continue
        if isinstance(rec, dict) and rec.get("type") == TURN_END:
            later_end = True
    return later_end, rest


@attrs.define
class BodyScan:
    """Mutable bookkeeping of one body scan: current byte ``offset`` and ``line_no``, the
    shared ``warnings`` list, and ``torn_tail_offset`` once a tail was dropped. When the dropped
    tail starts at a damaged line, ``damaged_line`` is its number, ``damage`` what is wrong with
    it and ``lines_after_damage`` how many non-empty (maybe intact) lines follow it: a writer
    may cut a tail only when that is 0 (``JsonlLog``)."""

    offset: int
    line_no: int
    warnings: list[str]
    torn_tail_offset: int | None = None
    damaged_line: int | None = None
    damage: str | None = None
    lines_after_damage: int = 0


def scan_body(
    lines: Iterator[bytes], decoder: RecordDecoder, scan: BodyScan
) -> Iterator[tuple[int, bytes, Sequence[Event]]]:
    """Decode body lines, yielding ``(line_offset, raw_line, events)`` per good line; applies the
    torn-tail rule (raises ``LogFormatError`` on corruption)."""
    for raw in lines:
        scan.line_no += 1
        if not raw.endswith(b"\n"):
            if not raw.isspace() and raw:
                scan.torn_tail_offset = scan.offset
                scan.warnings.append(
                    f"{decoder.source}: torn tail: last line {scan.line_no} has no newline; "
                    f"dropped from byte {scan.offset}"
                )
            return
        if raw.isspace():  # blank (``bytes.isspace`` is ``not raw.strip()`` without the copy)
            scan.offset += len(raw)
            continue
        try:
            try:
                rec = _json_decode(raw.decode("utf-8"))
            except _UNPARSABLE:
                raise _LogLineDefect(f"line {scan.line_no} is not valid JSON") from None
            evs = decoder.decode(rec, scan.line_no)
        except _LogLineDefect as defect:
            later_end, rest = _rest_after_defect(lines)
            if later_end:
                raise LogFormatError(
                    f"{decoder.source}: corrupt session log: {defect} and a later turn/end exists "
                    "(fsm-stage repair LOG removes a single stray line, saving it aside)"
                ) from None
            scan.torn_tail_offset = scan.offset
            scan.damaged_line, scan.damage, scan.lines_after_damage = scan.line_no, str(defect), rest
            after = f" with the {rest} line(s) after it" if rest else ""
            scan.warnings.append(
                f"{decoder.source}: torn tail: {defect}; dropped from byte {scan.offset}{after}"
            )
            return
        yield scan.offset, raw, evs
        scan.offset += len(raw)


def unknown_types_warning(source: str, counts: Mapping[str, int]) -> str:
    """The one-line warning for event types outside DSH's vocabulary that a reader kept:
    ``"<source>: unknown event type(s) kept but ignored by folds: a/b ×2, c/d ×1"`` (types
    sorted). Shared by ``read_log`` and ``checkpoints.cold_fold``."""
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
    return _with_header(open_log_bytes(path), str(path), strict=strict, allow_newer=allow_newer)


def open_session_data(
    data: bytes, source: str, *, strict: bool = False, allow_newer: bool = False
) -> OpenedSession:
    """``open_session_log`` for a log already in memory (standard input), named ``source``."""
    return _with_header(open_log_data(data, source), source, strict=strict, allow_newer=allow_newer)


def _with_header(opened: OpenedLog, source: str, *, strict: bool, allow_newer: bool) -> OpenedSession:
    try:
        raw_header, body_start = read_header(opened.stream, source)
        header = parse_header(
            raw_header, source=source, allow_newer=allow_newer, strict=strict, warnings=opened.warnings
        )
    except BaseException:
        opened.stream.close()
        raise
    return OpenedSession(opened, raw_header, body_start, header)
