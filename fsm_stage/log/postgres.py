"""``PostgresLog``: an ``EventLog`` many processes share, on PostgreSQL (psycopg 3).

Location: ``postgresql://USER@HOST:PORT/DB?session=ID`` (or ``postgres://``), any libpq URL;
``host=/socket/dir`` and ``port=`` may sit in the query string. ``session`` is removed before
the rest goes to libpq. Rows keep the exact DSH JSONL line text (``pg_schema``), so
``export_session`` gives back the bytes a ``JsonlLog`` would have written.

Appends are conditional: a batch gets the seqs after the end this process has read, and the
``(session, seq)`` primary key refuses it when another writer got there first (nothing
written). Plain ``append_many`` then catches up (``refresh``), re-runs the writer checks on the
real state and retries; with ``expect_last_seq`` it raises ``AppendConflictError`` instead.
No lock is held between appends. An append ``NOTIFY``s ``pg_schema.NOTIFY_CHANNEL`` (once per
batch) only when someone waits on its session: ``wait_for_events`` holds the session's
``pg_schema.listener_lock`` shared while it listens, and an append that can take that lock
for its own transaction has no one to wake (PostgreSQL serialises every notifying commit of a
cluster, so unconditional notifies kept distinct sessions from scaling). psycopg is imported
only when a log is opened.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from types import TracebackType
from typing import Any, TypeVar

from fsm_stage.errors import (
    AppendConflictError,
    DatabaseError,
    LogFormatError,
    LogWriteError,
    UserError,
    _SeqTakenSignal,
)
from fsm_stage.log.dsh import ReadResult
from fsm_stage.log.events import Clock, Event, LogBase, NewEvent, SessionHeader, wall_clock_ms
from fsm_stage.log.jsonl import encode_line
from fsm_stage.log.pg_checkpoints import CHECKPOINT_EVERY, Restored, Seeds, checkpointed, encode, restore
from fsm_stage.log.pg_connect import (
    INSTALL_HINT,
    SCHEMES,
    check_session_id,
    connect,
    db_error,
    first_line,
    is_disconnect,
    psycopg_module,
    redact,
    split_location,
)
from fsm_stage.log.pg_events import (
    LazyEvents,
    decode_rows,
    event_range,
    header_line,
    split_header,
    stored_header,
)
from fsm_stage.log.pg_listen import Listening, close_quietly
from fsm_stage.log.pg_schema import NOTIFY_CHANNEL, check_schema, listener_lock
from fsm_stage.log.surface import Surface
from fsm_stage.log.writer_checks import prepare_batch

__all__ = ["INSTALL_HINT", "SCHEMES", "PostgresLog", "connect", "open_postgres_log", "redact",
           "split_location"]

MAX_APPEND_ATTEMPTS = 10_000
"""Plain appends retry after a lost race at most this often (each loss means another writer
made progress, so this bounds only pathological contention)."""

_psycopg = psycopg_module
T = TypeVar("T")


_CREATE_HINT = " (pass create= to start one)"
"""The Python API's advice on a missing session; readers (``read_postgres``) reword it."""
_READ_HINT = " (the store has no session with that id: check ?session=)"
_OPEN_SQL = (  # the header, the newest checkpoint and the stored row holding its watermark event
    "SELECT s.header, c.seq, c.body, e.seq, e.n, e.line FROM fsm_sessions s "
    "LEFT JOIN LATERAL (SELECT seq, body FROM fsm_checkpoints WHERE session = s.session "
    "ORDER BY seq DESC LIMIT 1) c ON true "
    "LEFT JOIN LATERAL (SELECT seq, n, line FROM fsm_events WHERE session = s.session AND seq <= c.seq "
    "ORDER BY seq DESC LIMIT 1) e ON true WHERE s.session = %s")


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


class PostgresLog(Listening, LogBase):
    """A shared, durable ``EventLog`` for one session in a PostgreSQL database.

    ``PostgresLog(conninfo, session, create=header)``: ``conninfo`` a libpq URL without
    ``session``; ``session`` a valid id (``pg_connect.check_session_id``: at most 200
    characters, no control character); ``create`` the header to start the session with when the
    database does not have it (else ``LogFormatError`` "no such session log"); an existing
    session is read from its newest valid checkpoint on (``pg_checkpoints``: only the rows after
    it; ``checkpoint_note`` says whether one was used; none, or one that does not validate: the
    whole session, so no wrong state is ever served; ``strict`` always reads it whole) and a
    ``create`` with another id is a ``LogFormatError``. ``events`` is a ``pg_events.LazyEvents``:
    the events after the newest checkpoint held in memory, older ones read on demand.
    ``projection_seed`` starts ``Session.read`` cursors at the checkpoint. ``pool``: a
    ``psycopg_pool.ConnectionPool`` (``pg_connect.connection_pool``) to borrow a connection from
    per call instead of holding one. Options as ``JsonlLog`` (``clock``, ``ignorable_types``,
    ``protect_system_head``, ``allow_unknown_types`` — False: what DSH's strict reader refuses
    is refused here too — and ``strict``).

    Every database failure is a one-line ``DatabaseError`` (``transient`` set when the server
    is unreachable or dropped the connection: retry later); reads (``refresh``,
    ``export_bytes``) reconnect and retry once after a dropped connection. Raises ``UserError``
    (a bad session id, missing psycopg), ``LogFormatError`` (not a session log; no, older or
    newer schema). ``append``/``append_many`` raise ``LogWriteError`` (an invalid event, a
    surface op that cannot apply, a ``DatabaseError``) with the log unchanged,
    ``AppendConflictError`` when ``expect_last_seq`` is not the session's last seq.
    """

    checkpoint_every = CHECKPOINT_EVERY
    """An append stores a checkpoint once this many events follow the newest one."""

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
        pool: Any = None,
    ) -> None:
        self.conninfo = conninfo
        self.session = check_session_id(session, redact(conninfo))
        self.source = f"{redact(conninfo)} session {session!r}"
        self._clock = clock
        self._ignorable_types = frozenset(ignorable_types)
        self._allow_unknown_types = allow_unknown_types
        self._strict = strict
        self._pool = pool
        self._mutex = threading.RLock()
        self._listen_mutex = threading.Lock()  # one waiter at a time on the LISTEN connection
        self._listen: Any = None
        self._lock_key = listener_lock(self.session)
        self._closed = False
        self.warnings: list[str] = []
        self.surface = Surface(protect_system_head=protect_system_head)
        self._events = LazyEvents(self._read_range)
        self._seeds = Seeds(self._events, None)
        self._cp_seq = -1  # the newest checkpoint this log opened from or wrote (-1: none)
        self._last_row: tuple[int, int, str] | None = None  # the stored row ending at last_seq
        self._cp_sent: int | None = None  # the checkpoint the last successful insert stored
        self.checkpoint_note = "no checkpoint"
        if create is not None and create.id != session:
            raise LogFormatError(
                f"{self.source}: session id {session!r} does not match the header's {create.id!r}"
            )
        self._conn: Any = None
        try:
            self._call("opening the session", lambda conn: self._open(conn, create), retry=True)
        except BaseException:
            self._drop_conn()
            raise

    # -- connections ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _borrow(self) -> Iterator[Any]:
        """A connection for one call: the pool's, or this log's own (reconnected, schema checked
        and caught up when the server dropped it)."""
        if self._closed:
            raise LogWriteError(f"{self.source}: log is closed")
        if self._pool is not None:
            psycopg = _psycopg()
            try:
                conn = self._pool.getconn()
            except psycopg.Error as err:
                raise db_error(self.source, "getting a pooled connection", err) from None
            except Exception as err:  # the pool's own timeout (PoolTimeout) and closed-pool errors
                why = first_line(err)
                raise DatabaseError(f"{self.source}: no pooled connection: {why}", transient=True) from None
            try:
                yield conn
            finally:
                self._pool.putconn(conn)  # a broken connection is replaced, an open transaction rolled back
            return
        if self._conn is None or self._conn.closed:
            fresh = self._conn is not None
            self._drop_conn()
            self._conn = connect(self.conninfo)
            if fresh:  # a dropped connection: the schema may have changed, a batch may have landed
                check_schema(self._conn, redact(self.conninfo))
                if hasattr(self, "_header_text"):
                    self._read_new(self._conn)
        yield self._conn

    def _drop_conn(self) -> None:
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def _call(self, doing: str, fn: Callable[[Any], T], *, retry: bool) -> T:
        """``fn(conn)`` on a borrowed connection; a psycopg error becomes a ``DatabaseError``.
        ``retry`` (idempotent reads only): once more on a new connection after a dropped one."""
        psycopg = _psycopg()
        for attempt in (0, 1):
            conn = None
            try:
                with self._borrow() as conn:
                    return fn(conn)
            except psycopg.Error as err:
                if retry and attempt == 0 and is_disconnect(err, conn):
                    self._drop_conn()
                    continue
                raise db_error(self.source, doing, err, conn) from None
            except DatabaseError as err:
                if not err.transient:
                    raise
                if retry and attempt == 0:
                    self._drop_conn()
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _open(self, conn: Any, create: SessionHeader | None) -> None:
        check_schema(conn, redact(self.conninfo))
        if create is not None:
            conn.execute("INSERT INTO fsm_sessions (session, header) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                         (self.session, header_line(create)))
        row = conn.execute(_OPEN_SQL, (self.session,)).fetchone()
        if row is None:
            raise LogFormatError(f"{self.source}: no such session log{_CREATE_HINT}")
        self._header_text = str(row[0])
        self._header = stored_header(self._header_text, source=self.source, strict=self._strict,
                                     warnings=self.warnings)
        if self._header.id != self.session:
            raise LogFormatError(f"{self.source}: stored header has id {self._header.id!r}")
        restored = self._restore(*row[1:])
        self.surface = Surface(protect_system_head=self.surface.protect_system_head) if restored is None \
            else restored.surface
        self._events.reset(0 if restored is None else restored.seq + 1)
        self._seeds = Seeds(self._events, restored)
        self._cp_seq = -1 if restored is None else restored.seq
        self._read_new(conn)

    def _restore(self, seq: Any, body: Any, row_seq: Any, n: Any, line: Any) -> Restored | None:
        """The newest checkpoint if it validates (``pg_checkpoints.restore``), else None (read
        from the start); ``checkpoint_note`` says which."""
        if seq is None:
            self.checkpoint_note = "no checkpoint"
            return None
        if self._strict:
            self.checkpoint_note = "strict read: every row is decoded"
            return None
        row = None if row_seq is None else (int(row_seq), int(n), str(line))
        restored, note = restore(int(seq), str(body), row, self._header_text, projections=checkpointed(),
                                 protect_system_head=self.surface.protect_system_head)
        self.checkpoint_note = note or f"opened from the checkpoint at seq {seq}"
        self._last_row = row if restored is not None else None
        return restored

    # -- reading ---------------------------------------------------------------------------
    def _read_new(self, conn: Any) -> int:
        start = len(self._events)
        rows = conn.execute(
            "SELECT seq, n, line FROM fsm_events WHERE session = %s AND seq >= %s ORDER BY seq",
            (self.session, start),
        ).fetchall()
        if not rows and start > 0:
            return 0
        evs = decode_rows(self._header_text, rows, next_seq=start, source=self.source, strict=self._strict)
        try:
            self.surface.extend(evs)
        except LogWriteError as err:
            raise LogFormatError(f"{self.source}: invalid surface op in the stored log: {err}") from None
        self._events.extend(evs)
        if rows:
            seq, n, line = rows[-1]
            self._last_row = (int(seq), int(n), str(line))
        return len(evs)

    def _read_range(self, lo: int, hi: int) -> list[Event]:
        """Events ``lo .. hi-1`` read again from the database (``LazyEvents``: events before the
        ones held in memory). Raises ``DatabaseError``, ``LogFormatError`` (rows gone)."""
        with self._mutex:
            rows = self._call("reading stored events", lambda conn: conn.execute(
                "SELECT seq, n, line FROM fsm_events WHERE session = %s AND seq >= (SELECT "
                "coalesce(max(seq), 0) FROM fsm_events WHERE session = %s AND seq <= %s) AND seq < %s "
                "ORDER BY seq",
                (self.session, self.session, lo, hi)).fetchall(), retry=True)
        return event_range(self._header_text, rows, lo, hi, source=self.source, strict=self._strict)

    def projection_seed(self, projection: object) -> tuple[Any, int] | None:
        """``(state, watermark)`` to start a cursor of ``projection`` from (``runtime.Session.read``
        asks): the checkpointed state when ``projection`` folds exactly as a checkpointed one
        (``pg_checkpoints.Seeds.seed``), else None (fold from the start)."""
        return self._seeds.seed(projection)

    def checkpoint(self) -> bool:
        """Write a checkpoint at the end this log has read (one statement; appends write one
        every ``CHECKPOINT_EVERY`` events by themselves). Returns False when the log is empty or
        its end is checkpointed already. Raises ``DatabaseError``."""
        with self._mutex:
            cp = self._due_checkpoint(1)
            if cp is None:
                return False
            self._call("writing a checkpoint", lambda conn: conn.execute(
                "WITH cp AS (INSERT INTO fsm_checkpoints (session, seq, body) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING) DELETE FROM fsm_checkpoints WHERE session = %s AND seq < %s",
                (self.session, *cp, self.session, cp[0])), retry=False)
            self._checkpointed(cp[0])
            return True

    def _due_checkpoint(self, every: int | None = None) -> tuple[int, str] | None:
        """``(seq, body)`` of a checkpoint at the local end when ``every`` (default
        ``checkpoint_every``) events follow the newest one, else None."""
        end = len(self._events) - 1
        if end < 0 or end - self._cp_seq < (every or self.checkpoint_every) or self._last_row is None:
            return None
        self._seeds.read_all()
        return end, encode(end, self._last_row, self._header_text, self.surface, self._seeds.cursors)

    def _checkpointed(self, seq: int) -> None:
        """A checkpoint at ``seq`` is stored: hold only the events after the previous one."""
        self._events.trim(self._cp_seq + 1)
        self._cp_seq = seq

    def refresh(self) -> int:
        """Read the events other writers appended since this log last read; returns how many.
        Cost: one indexed query for the rows after the local end (retried once on a new
        connection after a dropped one). Raises ``LogFormatError``, ``DatabaseError``."""
        with self._mutex:
            return self._call("reading new events", self._read_new, retry=True)

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
        queue instead of racing again. A connection dropped during the write (a server restart)
        is healed once: on a new connection the batch is looked up (committed: done) or written
        again. Raises ``LogWriteError`` (``DatabaseError`` with ``transient`` set when the server stays
        unreachable: the batch may have committed; the next call shows it).
        """
        with self._mutex:
            if self._closed:
                raise LogWriteError(f"{self.source}: log is closed")
            if not specs:
                return []
            sent: list[tuple[list[int], list[str]]] = []  # the rows of each write attempt
            unsure: tuple[list[int], list[str]] | None = None  # the write whose connection broke
            for attempt in range(MAX_APPEND_ATTEMPTS):
                if expect_last_seq is not None and expect_last_seq != self.last_seq:
                    if unsure is not None and (mine := self._if_landed(unsure)) is not None:
                        return mine
                    raise AppendConflictError(expect_last_seq, self.last_seq)
                try:  # optimistic first (one round trip); after a lost race, queue on the row lock
                    locked = expect_last_seq is None and attempt > 0
                    evs = self._call(f"append of {len(specs)} event(s)",
                                     (lambda conn: self._write_locked(conn, specs, sent)) if locked else
                                     (lambda conn: self._write(conn, specs, sent, expect_last_seq)),
                                     retry=False)
                except DatabaseError as err:
                    if not err.transient or unsure is not None or not sent:
                        raise
                    unsure = sent[-1]  # one dropped connection (a server restart): did the batch land?
                    if (mine := self._if_landed(unsure)) is not None:
                        return mine
                    self.refresh()
                    continue  # not written (yet): write again on the new connection
                except _SeqTakenSignal:
                    self.refresh()
                    if unsure is not None and (mine := self._if_landed(unsure)) is not None:
                        return mine  # the write whose connection broke committed after all
                    if expect_last_seq is not None and expect_last_seq != self.last_seq:
                        raise AppendConflictError(expect_last_seq, self.last_seq) from None
                    continue  # plain: retry at the real end; conditional: rolled back, end unchanged
                self._events.extend(evs)
                for ev in evs:
                    self.surface.apply(ev)
                self._last_row = (evs[-1].seq, 1, sent[-1][1][-1])
                if self._cp_sent is not None:
                    self._checkpointed(self._cp_sent)
                return evs
            raise LogWriteError(f"{self.source}: append lost {MAX_APPEND_ATTEMPTS} races in a row; giving up")

    def _if_landed(self, attempt: tuple[list[int], list[str]]) -> list[Event] | None:
        """The events of the write ``attempt`` (its seqs and lines) when it is stored exactly as
        sent, else None.

        A write whose connection broke may still commit later: its server process can be
        waiting on a lock when the client gives up on it. It can only land at the seqs it was
        sent for, so once those seqs are taken (the retry's seq is taken, or the log moved past
        the expected end) it is asked about again before anything is written elsewhere: an
        append never lands twice."""
        seqs, lines = attempt
        if not self._landed(seqs, lines):
            return None
        self.refresh()
        return list(self._events[seqs[0]:seqs[0] + len(seqs)])

    def _landed(self, seqs: list[int], lines: list[str]) -> bool:
        """Whether the rows of an unconfirmed write are stored exactly as sent (read again on a
        new connection): then it committed before the connection broke."""
        rows = self._call("checking an unconfirmed append", lambda conn: conn.execute(
            "SELECT line FROM fsm_events WHERE session = %s AND seq = ANY(%s) ORDER BY seq",
            (self.session, seqs)).fetchall(), retry=True)
        return [r[0] for r in rows] == lines

    def _write_locked(self, conn: Any, specs: Sequence[NewEvent],
                      sent: list[tuple[list[int], list[str]]]) -> list[Event]:
        """A plain append: lock the session row for this one transaction (writers queue there
        instead of racing), catch up, run the writer checks on the real end, insert.

        ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: the events' foreign-key checks take ``KEY
        SHARE`` on the same row, and an optimistic writer blocked there while this one waits on
        its uncommitted seq would deadlock."""
        psycopg = _psycopg()
        try:
            with conn.transaction():
                conn.execute("SELECT 1 FROM fsm_sessions WHERE session = %s FOR NO KEY UPDATE",
                             (self.session,))
                self._read_new(conn)
                return self._write(conn, specs, sent)
        except psycopg.errors.TransactionRollback:  # deadlock / serialization: nothing written
            raise _SeqTakenSignal from None

    def _write(self, conn: Any, specs: Sequence[NewEvent], sent: list[tuple[list[int], list[str]]],
               expect_last_seq: int | None = None) -> list[Event]:
        """Check and insert the batch after the local end (its rows noted in ``sent`` first);
        ``_SeqTakenSignal`` when that seq is taken, or when the local end is no longer
        ``expect_last_seq`` (a reconnect reads the events written meanwhile: a conditional
        append must not then land after them)."""
        if expect_last_seq is not None and expect_last_seq != len(self._events) - 1:
            raise _SeqTakenSignal
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
        sent.append(([ev.seq for ev in evs], lines))
        cp = self._due_checkpoint()
        self._cp_sent = None
        if not self._insert(conn, sent[-1][0], lines, cp):
            raise _SeqTakenSignal
        self._cp_sent = None if cp is None else cp[0]
        return evs

    def _insert(self, conn: Any, seqs: list[int], lines: list[str], cp: tuple[int, str] | None) -> bool:
        """Insert the rows in one statement that notifies when someone waits on the session (the
        listener lock is held: ``pg_schema.listener_lock``) and stores the checkpoint ``cp``
        (``(seq, body)``, replacing older ones) if given; False when a row's seq is taken."""
        psycopg = _psycopg()
        cp_sql, cp_args = "", ()  # type: tuple[str, tuple[Any, ...]]
        if cp is not None:
            cp_sql = (", cp AS (INSERT INTO fsm_checkpoints (session, seq, body) VALUES (%s, %s, %s) "
                      "ON CONFLICT DO NOTHING), old AS (DELETE FROM fsm_checkpoints WHERE session = %s "
                      "AND seq < %s)")
            cp_args = (self.session, cp[0], cp[1], self.session, cp[0])
        rows_args: tuple[Any, ...]
        if len(lines) == 1:  # one row: plain parameters (no array to encode and unnest)
            rows_sql, rows_args = "VALUES (%s, %s, 1, %s)", (self.session, seqs[0], lines[0])
        else:
            rows_sql = "SELECT %s, s, 1, l FROM unnest(%s::bigint[], %s::text[]) AS t(s, l)"
            rows_args = (self.session, seqs, lines)
        try:
            conn.execute(
                f"WITH ins AS (INSERT INTO fsm_events (session, seq, n, line) {rows_sql}){cp_sql} "
                "SELECT CASE WHEN pg_try_advisory_xact_lock(%s, %s) THEN NULL "
                "ELSE pg_notify(%s, %s) END",
                (*rows_args, *cp_args, *self._lock_key, NOTIFY_CHANNEL, self.session),
            )
        except (psycopg.errors.UniqueViolation, psycopg.errors.TransactionRollback):
            return False  # the seq is taken, or the server rolled the statement back: nothing written
        except psycopg.errors.ForeignKeyViolation:
            raise LogWriteError(f"{self.source}: the session was deleted from the database") from None
        except psycopg.OperationalError as err:
            if not is_disconnect(err, conn):
                raise
            raise DatabaseError(
                f"{self.source}: append of {len(lines)} event(s) failed: {redact(first_line(err))}; if "
                "the server committed it before the connection broke, the next call (which reconnects) "
                "shows it", transient=True) from None
        return True

    # -- export ------------------------------------------------------------------------------
    def export_bytes(self) -> bytes:
        """The session as DSH JSONL bytes (header line + every stored line, as stored)."""
        with self._mutex:
            rows = self._call("export", lambda conn: conn.execute(
                "SELECT line FROM fsm_events WHERE session = %s ORDER BY seq", (self.session,)
            ).fetchall(), retry=True)
        return (self._header_text + "".join(r[0] for r in rows)).encode("utf-8")

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._closed

    def close(self) -> None:
        """Close this log's database connections (idempotent; a pool stays open: its owner closes it)."""
        with self._mutex:
            self._closed = True
            self._drop_conn()
            self._drop_listener()

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
