"""``PostgresLog``: an ``EventLog`` many processes share, on PostgreSQL (psycopg 3).

Location: ``postgresql://USER@HOST:PORT/DB?session=ID`` (or ``postgres://``), any libpq URL;
``host=/socket/dir`` and ``port=`` may sit in the query string. ``session`` is removed before
the rest goes to libpq. Rows keep the exact DSH JSONL line text (``pg_schema``), so
``export_session`` gives back the bytes a ``JsonlLog`` would have written.

Appends are conditional: a batch gets the seqs after the end this process has read, and the
``(session, seq)`` primary key refuses it when another writer got there first (nothing
written). Plain ``append_many`` then catches up (``refresh``), re-runs the writer checks on the
real state and retries; with ``expect_last_seq`` it raises ``AppendConflictError`` instead.
No lock is held between appends. Every append ``NOTIFY``s ``pg_schema.NOTIFY_CHANNEL``;
``wait_for_events`` sleeps on it. psycopg is imported only when a log is opened.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Collection, Iterator, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import attrs

from fsm_stage.errors import AppendConflictError, LogFormatError, LogWriteError, UserError, _SeqTakenSignal
from fsm_stage.log.dsh import ReadResult, RecordDecoder, parse_header
from fsm_stage.log.events import Clock, Event, LogBase, NewEvent, SessionHeader, wall_clock_ms
from fsm_stage.log.jsonl import encode_line
from fsm_stage.log.pg_schema import NOTIFY_CHANNEL, check_schema
from fsm_stage.log.surface import Surface
from fsm_stage.log.writer_checks import prepare_batch

__all__ = ["PostgresLog", "connect", "open_postgres_log", "split_location"]

SCHEMES = ("postgresql", "postgres")
MAX_APPEND_ATTEMPTS = 10_000
"""Plain appends retry after a lost race at most this often (each loss means another writer
made progress, so this bounds only pathological contention)."""

INSTALL_HINT = "PostgreSQL logs need psycopg: pip install 'fsm_stage[postgres]'"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return psycopg


def split_location(location: str) -> tuple[str, str | None]:
    """``(conninfo, session)``: the libpq URL without its ``session`` query parameter, and that
    parameter (None when absent). Raises ``UserError`` for a non-PostgreSQL URL or an empty or
    repeated ``session``."""
    parts = urlsplit(location)
    if parts.scheme.lower() not in SCHEMES:
        raise UserError(f"{redact(location)}: not a PostgreSQL URL (postgresql://USER@HOST:PORT/DB?session=ID)")
    base, _, rest = location.partition("?")
    query, hash_, fragment = rest.partition("#")
    kept, sessions = [], []
    for item in query.split("&") if query else []:
        key, _, value = item.partition("=")
        if unquote(key) == "session":
            sessions.append(unquote(value))
        else:
            kept.append(item)  # passed to libpq exactly as written
    if len(sessions) > 1:
        raise UserError(f"{redact(location)}: `session` given {len(sessions)} times")
    if sessions and not sessions[0]:
        raise UserError(f"{redact(location)}: empty `session` (write ?session=ID)")
    conninfo = base + ("?" + "&".join(kept) if kept else "") + hash_ + fragment
    return conninfo, (sessions[0] if sessions else None)


def redact(location: str) -> str:
    """``location`` with any password replaced by ``***`` (for messages)."""
    try:
        parts = urlsplit(location)
    except ValueError:
        return "<postgresql location>"
    if parts.password is None:
        return location
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


_CREATE_HINT = " (pass create= to start one)"
"""The Python API's advice on a missing session; readers (``read_postgres``) reword it."""
_READ_HINT = " (the store has no session with that id: check ?session=)"


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """Reword a missing session's ``LogFormatError`` for read-only callers (the CLI's
    ``state``, ``draw --log``, ``export``), which cannot pass ``create=``."""
    try:
        yield
    except LogFormatError as err:
        text = str(err)
        if not text.endswith(_CREATE_HINT):
            raise
        raise LogFormatError(text[: -len(_CREATE_HINT)] + _READ_HINT) from None


def connect(conninfo: str, *, autocommit: bool = True) -> Any:
    """A psycopg connection to ``conninfo`` (a libpq URL or keyword string). Raises
    ``UserError`` (one line: where and why) when the server cannot be reached."""
    psycopg = _psycopg()
    try:
        return psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.Error as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        why = lines[0] if lines else "connection failed"  # libpq's first line names host/socket
        raise UserError(f"{redact(conninfo)}: cannot connect to PostgreSQL: {why}") from None


def header_line(header: SessionHeader) -> str:
    """The header's JSONL line, exactly as ``JsonlLog`` writes it (with the newline)."""
    return json.dumps(header.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n"


def split_header(text: str) -> tuple[str, str]:
    """``(header line, the rest)`` of a stored header text (blank lines may precede the header
    line in an imported DSH file; lines after it hold no events)."""
    lead = len(text) - len(text.lstrip())
    line, _, rest = text[lead:].partition("\n")
    return line, rest


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


class PostgresLog(LogBase):
    """A shared, durable ``EventLog`` for one session in a PostgreSQL database.

    ``PostgresLog(conninfo, session, create=header)``: ``conninfo`` a libpq URL without
    ``session``; ``create`` the header to start the session with when the database does not
    have it (else ``LogFormatError`` "no such session log"); an existing session is read whole
    and a ``create`` with another id is a ``LogFormatError``. Options as ``JsonlLog``
    (``clock``, ``ignorable_types``, ``protect_system_head``, ``allow_unknown_types`` — False:
    what DSH's strict reader refuses is refused here too — and ``strict``).

    Raises ``UserError`` (unreachable server, missing psycopg), ``LogFormatError`` (no,
    older or newer schema), ``LogFormatError``. ``append``/``append_many`` raise
    ``LogWriteError`` (an invalid event, a surface op that cannot apply, a database error) with the
    log unchanged, ``AppendConflictError`` when ``expect_last_seq`` is not the session's last seq.
    """

    def __init__(
        self,
        conninfo: str,
        session: str,
        *,
        create: SessionHeader | None = None,
        clock: Clock = wall_clock_ms,
        ignorable_types: Collection[str] = (),
        protect_system_head: bool = True,
        allow_unknown_types: bool = False,
        strict: bool = False,
    ) -> None:
        self.conninfo = conninfo
        self.session = session
        self.source = f"{redact(conninfo)} session {session!r}"
        self._clock = clock
        self._ignorable_types = frozenset(ignorable_types)
        self._allow_unknown_types = allow_unknown_types
        self._strict = strict
        self._mutex = threading.RLock()
        self._listen_mutex = threading.Lock()  # one waiter at a time on the LISTEN connection
        self._listen: Any = None
        self.warnings: list[str] = []
        self.surface = Surface(protect_system_head=protect_system_head)
        self._events: list[Event] = []
        if create is not None and create.id != session:
            raise LogFormatError(
                f"{self.source}: session id {session!r} does not match the header's {create.id!r}"
            )
        self._conn = connect(conninfo)
        try:
            check_schema(self._conn, redact(conninfo))
            self._open(create)
        except BaseException:
            self._conn.close()
            raise

    def _open(self, create: SessionHeader | None) -> None:
        conn = self._conn
        if create is not None:
            conn.execute("INSERT INTO fsm_sessions (session, header) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                         (self.session, header_line(create)))
        row = conn.execute("SELECT header FROM fsm_sessions WHERE session = %s", (self.session,)).fetchone()
        if row is None:
            raise LogFormatError(f"{self.source}: no such session log{_CREATE_HINT}")
        self._header_text = str(row[0])
        try:
            rec = json.loads(split_header(self._header_text)[0])
        except ValueError:
            raise LogFormatError(f"{self.source}: stored header is not JSON") from None
        if not isinstance(rec, dict) or rec.get("type") != "session":
            raise LogFormatError(f"{self.source}: stored header is not a session header")
        self._header = parse_header(rec, source=self.source, strict=self._strict, warnings=self.warnings)
        if self._header.id != self.session:
            raise LogFormatError(f"{self.source}: stored header has id {self._header.id!r}")
        self._read_new()

    # -- reading ---------------------------------------------------------------------------
    def _read_new(self) -> int:
        start = len(self._events)
        psycopg = _psycopg()
        try:
            rows = self._conn.execute(
                "SELECT seq, n, line FROM fsm_events WHERE session = %s AND seq >= %s ORDER BY seq",
                (self.session, start),
            ).fetchall()
        except psycopg.Error as err:
            why = (str(err).strip().splitlines() or ["database error"])[0]
            raise LogWriteError(f"{self.source}: cannot read new events: {why}") from err
        if not rows and start > 0:
            return 0
        evs = decode_rows(self._header_text, rows, next_seq=start, source=self.source, strict=self._strict)
        try:
            self.surface.extend(evs)
        except LogWriteError as err:
            raise LogFormatError(f"{self.source}: invalid surface op in the stored log: {err}") from None
        self._events.extend(evs)
        return len(evs)

    def refresh(self) -> int:
        """Read the events other writers appended since this log last read; returns how many.
        Cost: one indexed query for the rows after the local end. Raises ``LogFormatError``."""
        with self._mutex:
            self._check_open()
            return self._read_new()

    def wait_for_events(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for another writer's append to this session (``LISTEN``
        on a second connection), then catch up; returns how many new events were read (0 when
        the time ran out). Appends from other threads are not blocked while it waits."""
        import time

        deadline = time.monotonic() + max(0.0, timeout)
        with self._listen_mutex:
            with self._mutex:
                self._check_open()
                if self._listen is None:
                    self._listen = connect(self.conninfo)
                    self._listen.execute(f"LISTEN {NOTIFY_CHANNEL}")
                listen = self._listen
            while True:
                n = self.refresh()  # after LISTEN: an append from now on is either read or notified
                remaining = deadline - time.monotonic()
                if n or remaining <= 0:
                    return n
                woke = False
                for note in listen.notifies(timeout=remaining):
                    if note.payload == self.session:
                        woke = True
                        break
                if not woke:
                    return self.refresh()

    # -- EventLog ----------------------------------------------------------------------------
    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def events(self) -> Sequence[Event]:
        return self._events

    @property
    def last_seq(self) -> int:
        """The seq of the last event read (``-1`` for an empty log)."""
        return len(self._events) - 1

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        """Append a batch atomically (one statement: all rows or none) after the session's end.

        With ``expect_last_seq`` (the last seq the caller folded from, ``-1`` for empty) the
        batch is written only if the session still ends there, else ``AppendConflictError``
        (after a ``refresh``, so ``events`` shows the winner's events). Without it a lost race
        is retried on the caught-up log, writer checks included: the retry holds the session
        row's lock for its one transaction (catch up, check, insert), so contending writers
        queue instead of racing again. Raises ``LogWriteError``.
        """
        with self._mutex:
            self._check_open()
            if not specs:
                return []
            for attempt in range(MAX_APPEND_ATTEMPTS):
                if expect_last_seq is not None and expect_last_seq != self.last_seq:
                    raise AppendConflictError(expect_last_seq, self.last_seq)
                try:  # optimistic first (one round trip); after a lost race, queue on the row lock
                    evs = self._write(specs) if expect_last_seq is not None or not attempt else \
                        self._write_locked(specs)
                except _SeqTakenSignal:
                    self._read_new()
                    if expect_last_seq is not None and expect_last_seq != self.last_seq:
                        raise AppendConflictError(expect_last_seq, self.last_seq) from None
                    continue  # plain: retry at the real end; conditional: rolled back, end unchanged
                self._events.extend(evs)
                for ev in evs:
                    self.surface.apply(ev)
                return evs
            raise LogWriteError(f"{self.source}: append lost {MAX_APPEND_ATTEMPTS} races in a row; giving up")

    def _write_locked(self, specs: Sequence[NewEvent]) -> list[Event]:
        """A plain append: lock the session row for this one transaction (writers queue there
        instead of racing), catch up, run the writer checks on the real end, insert.

        ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: the events' foreign-key checks take ``KEY
        SHARE`` on the same row, and an optimistic writer blocked there while this one waits on
        its uncommitted seq would deadlock."""
        psycopg = _psycopg()
        try:
            with self._conn.transaction():
                self._conn.execute(
                    "SELECT 1 FROM fsm_sessions WHERE session = %s FOR NO KEY UPDATE", (self.session,)
                )
                self._read_new()
                return self._write(specs)
        except psycopg.errors.TransactionRollback:  # deadlock / serialization: nothing written
            raise _SeqTakenSignal from None
        except psycopg.Error as err:
            why = (str(err).strip().splitlines() or ["database error"])[0]
            raise LogWriteError(f"{self.source}: append of {len(specs)} event(s) failed: {why}") from err

    def _write(self, specs: Sequence[NewEvent]) -> list[Event]:
        """Check and insert the batch after the local end; ``_SeqTakenSignal`` when that seq is taken."""
        evs = prepare_batch(
            specs,
            next_seq=len(self._events),
            now=self._clock(),
            surface=self.surface,
            ignorable_types=self._ignorable_types,
            allow_unknown=self._allow_unknown_types,
            check_json=False,  # encode_line refuses non-JSON data the same way
        )
        lines = [encode_line(ev).decode("utf-8") for ev in evs]
        if not self._insert([ev.seq for ev in evs], lines):
            raise _SeqTakenSignal
        return evs

    def _insert(self, seqs: list[int], lines: list[str]) -> bool:
        """Insert the rows and notify in one statement; False when a row's seq is taken."""
        psycopg = _psycopg()
        try:
            self._conn.execute(
                "WITH ins AS (INSERT INTO fsm_events (session, seq, n, line) "
                "SELECT %s, s, 1, l FROM unnest(%s::bigint[], %s::text[]) AS t(s, l)) "
                "SELECT pg_notify(%s, %s)",
                (self.session, seqs, lines, NOTIFY_CHANNEL, self.session),
            )
        except (psycopg.errors.UniqueViolation, psycopg.errors.TransactionRollback):
            return False  # the seq is taken, or the server rolled the statement back: nothing written
        except psycopg.errors.ForeignKeyViolation:
            raise LogWriteError(f"{self.source}: the session was deleted from the database") from None
        except psycopg.OperationalError as err:
            if not self._conn.closed:
                raise LogWriteError(f"{self.source}: append of {len(lines)} event(s) failed: {err}") from err
            why = (str(err).strip().splitlines() or ["connection lost"])[0]
            raise LogWriteError(
                f"{self.source}: append of {len(lines)} event(s) failed: {why}; if the server "
                "committed it before the connection broke, the next call (which reconnects) shows it"
            ) from err
        except psycopg.Error as err:
            why = (str(err).strip().splitlines() or ["database error"])[0]
            raise LogWriteError(f"{self.source}: append of {len(lines)} event(s) failed: {why}") from err
        return True

    # -- export ------------------------------------------------------------------------------
    def export_bytes(self) -> bytes:
        """The session as DSH JSONL bytes (header line + every stored line, as stored)."""
        with self._mutex:
            self._check_open()
            rows = self._conn.execute(
                "SELECT line FROM fsm_events WHERE session = %s ORDER BY seq", (self.session,)
            ).fetchall()
        return (self._header_text + "".join(r[0] for r in rows)).encode("utf-8")

    # -- lifecycle -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        """Refuse a closed log; replace a connection the server dropped (then catch up, so a
        batch whose commit was never confirmed shows up in ``events`` if it did commit)."""
        if self._conn is None:
            raise LogWriteError(f"{self.source}: log is closed")
        if self._conn.closed:
            self._conn = connect(self.conninfo)
            check_schema(self._conn, redact(self.conninfo))
            self._read_new()

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._conn is None

    def close(self) -> None:
        """Close the database connections (idempotent)."""
        with self._mutex:
            for conn in (self._conn, self._listen):
                if conn is not None:
                    conn.close()
            self._conn = self._listen = None

    def __enter__(self) -> PostgresLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresLog({self.source!r}, events={len(self._events)})"


def open_postgres_log(location: str, *, create: SessionHeader | None = None, **options: Any) -> PostgresLog:
    """``open_log``'s opener for ``postgresql://…?session=ID`` (see ``PostgresLog``). Without
    ``session`` in the URL the ``create`` header's id is used; neither is a ``UserError``."""
    conninfo, session = split_location(location)
    if session is None:
        if create is None:
            raise UserError(f"{redact(location)}: no session in the URL (add ?session=ID)")
        session = create.id
    return PostgresLog(conninfo, session, create=create, **options)


def is_postgres_location(location: object) -> bool:
    """Whether ``location`` is a ``postgresql:`` / ``postgres:`` URL string (no psycopg needed)."""
    return isinstance(location, str) and location.partition(":")[0].lower() in SCHEMES and ":" in location


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


def read_postgres(location: str, *, strict: bool = False) -> ReadResult:
    """Read the whole session at ``location`` as ``read_log`` reads a file (for reports such as
    ``fsm-stage state``): ``line_offsets`` are empty and ``good_end`` is 0 (there is no file).
    Raises what ``open_postgres_log`` raises."""
    from array import array
    from collections import Counter

    from fsm_stage.constants import KNOWN_EVENT_TYPES
    from fsm_stage.log.dsh import unknown_types_warning

    with reading(), open_postgres_log(location, strict=strict) as log:
        events = list(log.events)
        raw = json.loads(split_header(log._header_text)[0])
        warnings = list(log.warnings)
        source = log.source
    unknown = Counter(e.type for e in events if not e.ignorable and e.type not in KNOWN_EVENT_TYPES)
    if unknown:
        warnings.append(unknown_types_warning(source, unknown))
    return ReadResult(header=log.header, raw_header=raw, events=events, warnings=tuple(warnings),
                      torn_tail_offset=None, good_end=0, unknown_types=dict(unknown), line_offsets=array("q"))
