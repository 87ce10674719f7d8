"""Stored rows of ``PostgresLog`` as events: header and row decoding, and ``LazyEvents``,
the event sequence a checkpointed open holds only the tail of (docs/postgres.md, Checkpoints).

``LazyEvents`` is ``PostgresLog.events``: events ``0 .. base-1`` stay in the database and are
read on demand in blocks of ``BLOCK`` events (the last ``KEEP_BLOCKS`` blocks read are kept);
events from ``base`` on are held in memory. It is a ``collections.abc.Sequence``
(``events[i].seq == i``, slices, iteration), so projection cursors and the driver read it as
they read a list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from fsm_stage.errors import LogFormatError
from fsm_stage.log.dsh import RecordDecoder, parse_header
from fsm_stage.log.events import Event, SessionHeader

BLOCK = 512
"""Events per database read of an event before ``LazyEvents.base``."""
KEEP_BLOCKS = 4
"""Blocks of older events a ``LazyEvents`` keeps (oldest read dropped first)."""


def header_line(header: SessionHeader) -> str:
    """The header's JSONL line, exactly as ``JsonlLog`` writes it (with the newline)."""
    return json.dumps(header.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n"


def split_header(text: str) -> tuple[str, str]:
    """``(header line, the rest)`` of a stored header text (blank lines may precede the header
    line in an imported DSH file; lines after it hold no events)."""
    lead = len(text) - len(text.lstrip())
    line, _, rest = text[lead:].partition("\n")
    return line, rest


def stored_header(text: str, *, source: str, strict: bool = False,
                  warnings: list[str] | None = None) -> SessionHeader:
    """The ``SessionHeader`` of a stored header text (``fsm_sessions.header``; ``parse_header``'s
    checks). Raises ``LogFormatError`` for text that is not JSON or not a session header."""
    try:
        rec = json.loads(split_header(text)[0])
    except ValueError:
        raise LogFormatError(f"{source}: stored header is not JSON") from None
    if not isinstance(rec, dict) or rec.get("type") != "session":
        raise LogFormatError(f"{source}: stored header is not a session header")
    return parse_header(rec, source=source, strict=strict, warnings=warnings)


def decode_rows(
    header_text: str,
    rows: Sequence[tuple[int, int, str]],
    *,
    next_seq: int,
    source: str,
    strict: bool = False,
) -> list[Event]:
    """Decode stored rows ``(seq, n, line)`` (and any body lines kept after the header's first
    line) into events. Raises ``LogFormatError`` when a row does not decode to its ``n`` events
    at ``seq`` (the store was written by something else)."""
    decoder = RecordDecoder(source=source, next_seq=next_seq, strict=strict)
    out: list[Event] = []

    def body(text: str, seq: int | None, n: int | None) -> None:
        got = len(out)
        for raw in text.split("\n"):  # only \n ends a JSONL line (not U+2028)
            if not raw.strip():
                continue
            try:
                out.extend(decoder.decode(json.loads(raw), 0))
            except LogFormatError:
                raise
            except Exception as err:  # the reader's private defect type, JSON errors, deep nesting
                raise LogFormatError(f"{source}: stored row at seq {seq} does not decode: {err}") from None
        if seq is not None and (len(out) - got != n or out[got].seq != seq):
            raise LogFormatError(f"{source}: stored row at seq {seq} does not hold events {seq}…")

    extra = split_header(header_text)[1]
    if next_seq == 0 and extra.strip():
        body(extra, None, None)
    for seq, n, line in rows:
        body(line, seq, n)
    return out


class LazyEvents(Sequence[Event]):
    """The committed events of one session: ``tail`` (events ``base ..``) in memory, older ones
    read through ``fetch(lo, hi)`` (the events ``lo .. hi-1``, a ``list``) when indexed.

    ``fetch`` may raise what the store raises (``DatabaseError``, ``LogFormatError``,
    ``LogWriteError`` on a closed log). Not thread-safe by itself: the owning log serialises
    ``fetch`` and the mutating calls (``extend``, ``reset``, ``trim``).
    """

    __slots__ = ("_base", "_blocks", "_fetch", "_tail")

    def __init__(self, fetch: Callable[[int, int], list[Event]]) -> None:
        self._fetch = fetch
        self._base = 0
        self._tail: list[Event] = []
        self._blocks: dict[int, list[Event]] = {}

    @property
    def base(self) -> int:
        """The seq of the first event held in memory (0 when all are)."""
        return self._base

    @property
    def held(self) -> int:
        """How many events are held in memory (the tail)."""
        return len(self._tail)

    def reset(self, base: int) -> None:
        """Forget every event; the next ``extend`` holds events from seq ``base`` on."""
        self._base, self._tail, self._blocks = base, [], {}

    def extend(self, events: Iterable[Event]) -> None:
        """Append committed events (the next seqs) to the tail."""
        self._tail.extend(events)

    def trim(self, keep_from: int) -> None:
        """Drop the tail's events before seq ``keep_from`` (they are read on demand again)."""
        drop = min(keep_from, len(self)) - self._base
        if drop > 0:
            del self._tail[:drop]
            self._base += drop

    def __len__(self) -> int:
        return self._base + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("event index out of range")
        if i >= self._base:
            return self._tail[i - self._base]
        return self._block(i // BLOCK, i % BLOCK)[i % BLOCK]

    def _block(self, b: int, need: int) -> list[Event]:
        got = self._blocks.get(b)
        if got is None or need >= len(got):
            lo = b * BLOCK
            got = self._fetch(lo, min(lo + BLOCK, self._base))
            if len(self._blocks) >= KEEP_BLOCKS:
                self._blocks.pop(next(iter(self._blocks)))
            self._blocks[b] = got
        return got

    def __iter__(self) -> Iterator[Event]:
        i = 0
        while i < len(self):
            yield self[i]
            i += 1

    def __repr__(self) -> str:
        return f"LazyEvents(len={len(self)}, held from seq {self._base})"


def event_range(header_text: str, rows: Sequence[tuple[int, int, str]], lo: int, hi: int, *,
                source: str, strict: bool = False) -> list[Event]:
    """The events ``lo .. hi-1`` of the stored ``rows`` (``(seq, n, line)`` in seq order, the
    first holding event ``lo``); ``LogFormatError`` when they do not hold exactly those events
    (rows deleted or changed since they were read)."""
    if not rows:
        raise LogFormatError(f"{source}: stored events {lo}..{hi - 1} are gone (the session was changed)")
    evs = decode_rows(header_text, rows, next_seq=rows[0][0], source=source, strict=strict)
    out = evs[lo - rows[0][0]: hi - rows[0][0]]
    if len(out) != hi - lo or (out and out[0].seq != lo):
        raise LogFormatError(f"{source}: stored events {lo}..{hi - 1} are gone (the session was changed)")
    return out
