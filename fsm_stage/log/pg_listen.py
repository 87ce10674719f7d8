"""The waiting side of ``PostgresLog``: ``wait_for_events`` on a ``LISTEN`` connection of its own.

An append ``NOTIFY``s ``pg_schema.NOTIFY_CHANNEL`` only while someone waits on its session: the
waiter holds the session's ``pg_schema.listener_lock`` shared on its listening connection
(docs/postgres.md, Guarantees: followers are cheap).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from fsm_stage.errors import DatabaseError, LogWriteError
from fsm_stage.log.pg_connect import connect, db_error, is_disconnect, psycopg_module
from fsm_stage.log.pg_schema import NOTIFY_CHANNEL

RECONNECT_PAUSE = (0.05, 1.0)
"""``wait_for_events`` retries a lost server after this pause, doubling up to the second value."""


class Listening:
    """``wait_for_events`` for ``PostgresLog`` (which sets the attributes below and ``refresh``)."""

    conninfo: str
    session: str
    source: str
    _mutex: threading.RLock
    _listen_mutex: threading.Lock
    _listen: Any
    _lock_key: tuple[int, int]
    _closed: bool

    def refresh(self) -> int:
        raise NotImplementedError

    def wait_for_events(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for another writer's append to this session (``LISTEN``
        on a second connection), then catch up; returns how many new events were read (0 when
        the time ran out). Appends from other threads are not blocked while it waits. A lost
        connection heals: the listener reconnects (pausing while the server is down), listens
        again and catches up; a transient ``DatabaseError`` only when the time runs out while the
        server is unreachable."""
        psycopg = psycopg_module()
        deadline = time.monotonic() + max(0.0, timeout)
        pause = RECONNECT_PAUSE[0]
        with self._listen_mutex:
            while True:
                try:
                    listen = self._listener()
                    n = self.refresh()  # after LISTEN: an append from now on is either read or notified
                except DatabaseError as err:
                    if not err.transient:
                        raise
                    self._drop_listener()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise
                    time.sleep(min(pause, remaining))
                    pause = min(pause * 2, RECONNECT_PAUSE[1])
                    continue
                remaining = deadline - time.monotonic()
                if n or remaining <= 0:
                    return n
                try:
                    woke = any(note.payload == self.session for note in _until_first(
                        listen.notifies(timeout=remaining), self.session))
                except psycopg.Error as err:
                    self._drop_listener()
                    if not is_disconnect(err, listen):
                        raise db_error(self.source, "waiting for events", err, listen) from None
                    continue  # heal: reconnect, LISTEN again, catch up
                if not woke:
                    return self.refresh()

    def _listener(self) -> Any:
        with self._mutex:
            if self._closed:
                raise LogWriteError(f"{self.source}: log is closed")
            if self._listen is None or self._listen.closed:
                self._drop_listener()
                conn = connect(self.conninfo)
                try:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    # held while this connection listens; taken before the caller catches up, so
                    # an append either sees it (and notifies) or committed before the catch-up
                    conn.execute("SELECT pg_advisory_lock_shared(%s, %s)", self._lock_key)
                except psycopg_module().Error as err:
                    conn.close()
                    raise db_error(self.source, "listening for events", err, conn) from None
                self._listen = conn
            return self._listen

    def _drop_listener(self) -> None:
        conn, self._listen = self._listen, None
        close_quietly(conn)


def close_quietly(conn: Any) -> None:
    """Close ``conn`` (None: nothing), ignoring any error (it is being dropped)."""
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


def _until_first(notes: Iterator[Any], session: str) -> Iterator[Any]:
    """The notifications of ``notes`` up to and including the first for ``session``."""
    for note in notes:
        yield note
        if note.payload == session:
            return
