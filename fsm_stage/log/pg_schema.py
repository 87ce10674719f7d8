"""The PostgreSQL schema of ``PostgresLog`` and its versioned migrations.

``fsm_schema(id = 1, version)`` holds the schema version. Version 1:

* ``fsm_sessions(session text primary key, header text, created timestamptz)``: ``header`` is
  the exact header line text (with its newline) of the DSH JSONL form;
* ``fsm_events(session, seq bigint, n int, line text, primary key (session, seq))``: one row
  per JSONL line, ``seq`` its first event's seq and ``n`` how many events it holds (1 for every
  line fsm_stage writes; more for an imported packed chunk row), ``line`` the exact line text.

``migrate(conn)`` (``fsm-stage db init``) applies the missing steps in one transaction under a
transaction-scoped advisory lock; ``check_schema(conn)`` refuses a missing, older or newer one.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fsm_stage.errors import LogFormatError

SCHEMA_VERSION = 2
"""The schema version this fsm_stage reads and writes."""

NOTIFY_CHANNEL = "fsm_events"
"""``LISTEN`` channel an append notifies when someone waits on its session (payload: the
session id; ``listener_lock``)."""

LISTENER_LOCK_CLASS = 0x66736D6C  # "fsml": the first key of every session's listener lock


def listener_lock(session: str) -> tuple[int, int]:
    """The two-key advisory lock a waiter on ``session`` holds *shared* on its ``LISTEN``
    connection (``pg_advisory_lock_shared(k1, k2)``) before it catches up and sleeps.

    An append notifies ``NOTIFY_CHANNEL`` only when it cannot take this lock exclusively for its
    transaction (``pg_try_advisory_xact_lock``): someone waits (or another writer of the session,
    or a session whose key collides, is committing — a notification too many, never one too few).
    A waiter that locks after an append's try blocks until that append commits, so its catch-up
    reads it. An outside ``LISTEN`` client takes the same lock to be notified.
    """
    digest = hashlib.blake2b(session.encode("utf-8"), digest_size=4, person=b"fsm-listen").digest()
    return LISTENER_LOCK_CLASS, int.from_bytes(digest, "big", signed=True)

_MIGRATION_LOCK = 0x66736D5F  # "fsm_": pg_advisory_xact_lock key held while migrating

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE IF NOT EXISTS fsm_sessions (
               session text PRIMARY KEY,
               header text NOT NULL,
               created timestamptz NOT NULL DEFAULT now())""",
        """CREATE TABLE IF NOT EXISTS fsm_events (
               session text NOT NULL REFERENCES fsm_sessions (session) ON DELETE CASCADE,
               seq bigint NOT NULL CHECK (seq >= 0),
               n integer NOT NULL DEFAULT 1 CHECK (n >= 1),
               line text NOT NULL,
               PRIMARY KEY (session, seq))""",
    ),
    2: (
        """CREATE TABLE IF NOT EXISTS fsm_checkpoints (
               session text NOT NULL REFERENCES fsm_sessions (session) ON DELETE CASCADE,
               seq bigint NOT NULL CHECK (seq >= 0),
               body text NOT NULL,
               PRIMARY KEY (session, seq))""",
    ),
}
"""version -> the SQL statements that bring the schema from ``version - 1`` to ``version``."""

TABLES: dict[str, dict[str, str]] = {
    "fsm_sessions": {"session": "text", "header": "text", "created": "timestamp with time zone"},
    "fsm_events": {"session": "text", "seq": "bigint", "n": "integer", "line": "text"},
    "fsm_checkpoints": {"session": "text", "seq": "bigint", "body": "text"},
}
"""The columns (name -> ``information_schema`` data type) of each table at ``SCHEMA_VERSION``."""


def schema_version(conn: Any) -> int | None:
    """The database's fsm_stage schema version, None when it has none (``conn``: a psycopg
    connection)."""
    row = conn.execute("SELECT to_regclass('fsm_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    row = conn.execute("SELECT version FROM fsm_schema WHERE id = 1").fetchone()
    return None if row is None else int(row[0])


def migrate(conn: Any) -> tuple[int | None, int]:
    """Create or upgrade the schema to ``SCHEMA_VERSION``; returns ``(old, new)`` versions.

    Runs in one transaction (all steps or none). A half-made schema (tables left without a
    version row, e.g. by an interrupted manual set-up) is completed when its tables have
    fsm_stage's columns. Raises ``LogFormatError`` for a newer schema or a table of the same
    name that is not fsm_stage's (nothing changed). Concurrent ``migrate`` calls serialise on
    an advisory transaction lock.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS fsm_schema (id integer PRIMARY KEY CHECK (id = 1), "
                     "version integer NOT NULL)")
        old = schema_version(conn)
        current = old or 0
        if current > SCHEMA_VERSION:
            raise LogFormatError(_newer(current))
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for sql in MIGRATIONS[version]:
                conn.execute(sql)
        check_tables(conn)
        conn.execute("INSERT INTO fsm_schema (id, version) VALUES (1, %s) "
                     "ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version", (SCHEMA_VERSION,))
    return old, SCHEMA_VERSION


def check_tables(conn: Any) -> None:
    """Raise ``LogFormatError`` (one line) unless every table of ``TABLES`` has exactly
    its columns and types."""
    for table, want in TABLES.items():
        rows = conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                            "WHERE table_schema = current_schema() AND table_name = %s", (table,)).fetchall()
        have = {str(name): str(kind) for name, kind in rows}
        if have != want:
            diff = sorted(set(have.items()) ^ set(want.items()))
            raise LogFormatError(
                f"table {table} exists but is not fsm_stage's (columns differ: "
                f"{', '.join(f'{n} {k}' for n, k in diff)}); drop or rename it, or use another database")


def check_schema(conn: Any, where: str) -> None:
    """Raise ``LogFormatError`` unless the database at ``where`` (for the message) has
    exactly ``SCHEMA_VERSION``."""
    version = schema_version(conn)
    if version is None:
        raise LogFormatError(
            f"{where}: no fsm_stage schema in this database; run `fsm-stage db init DSN`"
        )
    if version > SCHEMA_VERSION:
        raise LogFormatError(f"{where}: {_newer(version)}")
    if version < SCHEMA_VERSION:
        raise LogFormatError(
            f"{where}: fsm_stage schema version {version} is older than {SCHEMA_VERSION}; "
            "run `fsm-stage db init DSN` to migrate it"
        )


def _newer(version: int) -> str:
    return (f"fsm_stage schema version {version} is newer than this fsm_stage understands "
            f"({SCHEMA_VERSION}); upgrade fsm_stage")
