"""Move a session between a DSH JSONL file and PostgreSQL, byte for byte; read or start a whole one.

``import_jsonl`` stores each line of the file's good part verbatim (one row per line holding
events; a packed chunk row stays one row, its ``n`` the events it expands to; blank lines stay
with the row before them), so ``export_jsonl`` returns exactly the bytes read (minus a torn
tail, which is reported and dropped as every reader drops it). zstd logs are refused. An
import ends with a checkpoint (``PostgresLog.checkpoint``), so the next open reads no rows.
``open_new_session`` starts a session for a writer of a whole log (the simulator).
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs

from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.log.dsh import read_log_data
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.pg_schema import NOTIFY_CHANNEL, check_schema
from fsm_stage.log.postgres import PostgresLog, connect, reading, redact, split_location

__all__ = ["ImportResult", "export_jsonl", "import_jsonl", "open_new_session"]


@attrs.frozen
class ImportResult:
    """What ``import_jsonl`` stored: the session id, its event and row counts, and the reader's
    warnings (a dropped torn tail, unknown types)."""

    session: str
    events: int
    rows: int
    warnings: tuple[str, ...]


def import_jsonl(
    data: bytes, location: str, *, source: str = "<jsonl>", replace: bool = False
) -> ImportResult:
    """Store the session log ``data`` (JSONL bytes named ``source``) at ``location``
    (``postgresql://…``; its ``session`` defaults to the header's id and must match it).

    One transaction: all rows or none. Raises ``LogFormatError`` (not a session log, zstd, not
    UTF-8, corruption), ``UserError`` (the session exists and not ``replace``; id mismatch;
    unreachable server), ``LogFormatError``.
    """
    res = read_log_data(data, source=source)
    if res.compressed:
        raise LogFormatError(f"{source}: zstd logs cannot be imported; decompress the file first")
    conninfo, session = split_location(location)
    if session is not None and session != res.header.id:
        raise UserError(f"{source}: session id {res.header.id!r} does not match {session!r} in the location")
    session = res.header.id
    good = data[: res.good_end]
    starts = sorted(set(res.line_offsets))
    first_seq: dict[int, int] = {}
    for seq, off in enumerate(res.line_offsets):
        first_seq.setdefault(off, seq)
    bounds = [*starts, len(good)]
    try:
        header_text = good[: bounds[0]].decode("utf-8")
        lines = [good[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
    except UnicodeDecodeError as err:
        raise LogFormatError(f"{source}: not UTF-8 ({err.reason} at byte {err.start})") from None
    seqs = [first_seq[off] for off in starts]
    counts = [b - a for a, b in zip(seqs, [*seqs[1:], len(res.events)], strict=False)]
    with connect(conninfo) as conn:
        check_schema(conn, redact(conninfo))
        _store(conn, session, header_text, seqs, counts, lines, replace=replace, where=redact(location))
    with PostgresLog(conninfo, session) as log:  # read back through the store's own decoder
        if list(log.events) != res.events:
            raise LogFormatError(f"{source}: the stored session does not read back as the file")
        log.checkpoint()
    return ImportResult(session, len(res.events), len(lines), res.warnings)


def _store(conn: Any, session: str, header_text: str, seqs: list[int], counts: list[int], lines: list[str],
           *, replace: bool, where: str) -> None:
    import psycopg

    taken = UserError(f"{where}: session {session!r} already exists; pass --force to replace it")
    with conn.transaction():
        exists = conn.execute(
            "SELECT 1 FROM fsm_sessions WHERE session = %s FOR UPDATE", (session,)
        ).fetchone()
        if exists and not replace:
            raise taken
        if exists:
            conn.execute("DELETE FROM fsm_sessions WHERE session = %s", (session,))
        try:
            conn.execute("INSERT INTO fsm_sessions (session, header) VALUES (%s, %s)", (session, header_text))
        except psycopg.errors.UniqueViolation:  # another import created it meanwhile
            raise taken from None
        conn.execute(
            "INSERT INTO fsm_events (session, seq, n, line) "
            "SELECT %s, s, c, l FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS t(s, c, l)",
            (session, seqs, counts, lines),
        )
        conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, session))


def export_jsonl(location: str) -> bytes:
    """The session at ``location`` (``postgresql://…?session=ID``) as DSH JSONL bytes.

    The bytes are read back as a log before they are returned (a session opened from a
    checkpoint does not decode its older rows): a damaged or missing row is a
    ``LogFormatError``, never an exported file no reader accepts. Raises ``LogFormatError``
    (no such session, undecodable rows), ``UserError``.
    """
    from fsm_stage.log.dsh import read_log_data

    conninfo, session = split_location(location)
    if session is None:
        raise UserError(f"{redact(location)}: no session in the URL (add ?session=ID)")
    with reading(), PostgresLog(conninfo, session) as log:
        data = log.export_bytes()
    read = read_log_data(data)
    if read.damaged_line is not None:
        raise LogFormatError(f"{redact(location)}: the stored session is damaged at line {read.damaged_line} "
                             f"of its export ({read.damage}); nothing was exported")
    return data


def open_new_session(location: str, header: SessionHeader, *, replace: bool = False) -> PostgresLog:
    """Start a new session at ``location`` for a writer that produces a whole log (the
    simulator's ``--log``): the URL's ``session`` (default ``header.id``) becomes the header's id.
    An existing session with events is a ``UserError`` unless ``replace`` (then it is deleted
    first)."""
    conninfo, session = split_location(location)
    header = attrs.evolve(header, id=session or header.id)
    with connect(conninfo) as conn:
        check_schema(conn, redact(conninfo))
        with conn.transaction():
            row = conn.execute("SELECT count(*) FROM fsm_events WHERE session = %s", (header.id,)).fetchone()
            if row[0] and not replace:
                raise UserError(
                    f"{redact(location)}: session {header.id!r} already has {row[0]} event(s); "
                    "pass --force to replace it"
                )
            conn.execute("DELETE FROM fsm_sessions WHERE session = %s", (header.id,))
    return PostgresLog(conninfo, header.id, create=header)
