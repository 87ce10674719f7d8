"""Reading DSH session logs into memory (``read_log``) or as a stream (``iter_events``).

Both follow docs/session-log.md (header and records: ``records``; zstd, foreign files and
torn tails: ``opening``). ``ReadResult.torn_tail_offset`` is the byte offset just past the
last good line (where a writer may truncate); legacy shapes (pre-identity messages,
``turn/start.trigger``) are kept verbatim. ``iter_events`` streams ``(line_offset, event)``
pairs in constant memory and can resume at a byte offset (checkpoints).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

from fsm_stage.log.dsh.opening import (
    BodyScan,
    OpenedSession,
    gc_paused,
    open_log_bytes,
    open_session_data,
    open_session_log,
    read_header,
    scan_body,
    unknown_types_warning,
)
from fsm_stage.log.dsh.records import ReadResult, RecordDecoder, parse_header, unknown_keys_warning
from fsm_stage.log.events import Event


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
    return _read_session(
        open_session_log(p, strict=strict, allow_newer=allow_newer), str(p), strict, on_progress
    )


def read_log_data(
    data: bytes, *, source: str = "<stdin>", strict: bool = False, allow_newer: bool = False
) -> ReadResult:
    """``read_log`` for a log already in memory (e.g. standard input's bytes), named ``source``
    in messages; same rules and errors."""
    session = open_session_data(data, source, strict=strict, allow_newer=allow_newer)
    return _read_session(session, source, strict, None)


def _read_session(
    session: OpenedSession, source: str, strict: bool, on_progress: Callable[[int], None] | None
) -> ReadResult:
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
    if decoder.unknown_keys:
        warnings.append(unknown_keys_warning(source, decoder))
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
        damaged_line=scan.damaged_line,
        damage=scan.damage,
        lines_after_damage=scan.lines_after_damage,
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
