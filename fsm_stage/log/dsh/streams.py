"""Reading live envelope streams: headless ``stream-json`` and JSON-RPC notifications.

``read_streams(path)`` unwraps each session event (``session_event.event`` or
``session.event`` ``params.event``), routes it by ``sessionId`` and running seq, and
returns one ``ReadResult`` per session in the stream; ``read_stream`` returns the first.
"""

from __future__ import annotations

import json
import os
from array import array
from pathlib import Path
from typing import Any

from fsm_stage.errors import LogFormatError, _LogLineDefect
from fsm_stage.log.dsh.records import _UNPARSABLE, ReadResult, RecordDecoder
from fsm_stage.log.events import Event, SessionHeader


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

    Unwraps each event and skips other lines (``session.status``, results). A stream
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
                except _LogLineDefect as defect:
                    raise LogFormatError(f"{source}: {defect}") from None
                target[2].extend(evs)
                target[3].extend([offset] * len(evs))
                last = target
            offset += len(raw)
    if not streams:
        raise LogFormatError(f"not a session event stream: {source}: no session_event/session.event lines")
    return [
        ReadResult(
            header=SessionHeader(id=sid or "<stream>", created_at=0, version=None),
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
