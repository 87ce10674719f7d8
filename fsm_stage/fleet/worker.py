"""``run_worker``: the ``fsm-stage worker`` process (needs ``dbos``).

A worker launches DBOS on the store's system database with its own executor id, listens on
the ``fsm-stage-fleet`` queue (at most ``sessions`` session workflows held, ``slots`` drives
at once) and, every ``HEARTBEAT`` seconds:

* writes its heartbeat row (``fsm_fleet_workers``, in the DBOS database);
* takes over an executor silent for ``dead_after`` seconds: deletes its row (conditionally,
  so one worker wins) and asks DBOS to recover that executor's pending workflows, which
  re-enqueues them for any worker (an executor holding pending workflows that never wrote a
  row, killed before its first beat, is taken over after ``dead_after`` seconds too) — so a
  dead worker's sessions resume within about ``dead_after + HEARTBEAT + queue polling``
  seconds (``docs/fleet.md``);
* every ``SWEEP`` seconds, starts the workflow of any session whose log shows work (a queued
  input, an answered review, a crashed turn) — the wake-up of a sender that died after
  writing the log. Enqueueing by workflow id is idempotent, so sweeps of many workers agree.

A worker that is merely slow and taken over cannot corrupt a log: its appends are fenced
(``fence``), the newer claim wins. A worker whose DBOS meets its database gone in the middle of
a workflow operation exits with ``EX_TEMPFAIL`` (75) at once (crash-only: DBOS would otherwise
record the workflow as failed); run workers under a supervisor that restarts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from dbos import DBOS

from fsm_stage.fleet import workflows
from fsm_stage.fleet.listing import list_sessions

__all__ = ["HEARTBEAT", "SWEEP", "Heartbeats", "run_worker"]

HEARTBEAT: Final = 1.0
"""Seconds between a worker's heartbeats and takeover checks."""
EX_TEMPFAIL: Final = 75
"""Exit status of a worker whose DBOS lost its database mid-workflow (restart it)."""
SWEEP: Final = 5.0
"""Seconds between sweeps for sessions with work but no running workflow."""
_TABLE = ("CREATE TABLE IF NOT EXISTS fsm_fleet_workers (executor text PRIMARY KEY, "
          "seen double precision NOT NULL)")


class Heartbeats:
    """The ``fsm_fleet_workers`` table on SQLite (``sqlite:///PATH``) or PostgreSQL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite:///")
        self._conn: Any = None

    def _db(self) -> Any:
        if self._conn is None:
            if self.sqlite:
                self._conn = sqlite3.connect(self.url[len("sqlite:///"):], timeout=10, isolation_level=None)
            else:
                from fsm_stage.log.postgres import connect

                self._conn = connect(self.url)
            self._conn.execute(_TABLE)
        return self._conn

    def _sql(self, text: str) -> str:
        return text.replace("%s", "?") if self.sqlite else text

    def _run(self, text: str, args: tuple[Any, ...]) -> Any:
        try:
            return self._db().execute(self._sql(text), args)
        except Exception:
            self.close()  # a dropped connection: reconnect next time
            raise

    def beat(self, executor: str) -> None:
        """Record that ``executor`` is alive now."""
        self._run("INSERT INTO fsm_fleet_workers (executor, seen) VALUES (%s, %s) "
                  "ON CONFLICT (executor) DO UPDATE SET seen = excluded.seen", (executor, time.time()))

    def dead(self, older_than: float) -> list[tuple[str, float]]:
        """Executors whose last heartbeat is older than ``older_than`` seconds."""
        rows = self._run("SELECT executor, seen FROM fsm_fleet_workers WHERE seen < %s",
                         (time.time() - older_than,)).fetchall()
        return [(str(r[0]), float(r[1])) for r in rows]

    def known(self) -> set[str]:
        """Every executor with a row (alive, or dead and not taken over yet)."""
        return {str(r[0]) for r in self._run("SELECT executor FROM fsm_fleet_workers", ()).fetchall()}

    def take(self, executor: str, seen: float) -> bool:
        """Remove ``executor``'s row if it is still the one read; True for the one taker."""
        cur = self._run("DELETE FROM fsm_fleet_workers WHERE executor = %s AND seen = %s", (executor, seen))
        return bool(cur.rowcount == 1)

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def executor_name() -> str:
    """A new executor id: ``<host>-<pid>-<random>``."""
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


async def run_worker(app: workflows.FleetApp, *, sessions: int = 64, dead_after: float = 5.0,
                     pool: int = 6,
                     stop: asyncio.Event | None = None, on_ready: Callable[[], None] | None = None) -> None:
    """Run a worker until ``stop`` is set (or forever): see the module docstring. ``app.worker``
    is used as the DBOS executor id; ``pool`` is its DBOS connection pool size (the worker
    also opens one connection per drive in progress, one for heartbeats, one for its sweep).
    Raises what DBOS raises on launch (an unreachable database)."""
    store = app.store
    workflows.configure(app)
    url = store.dbos_url
    config: Any = {"name": "fsm-stage-fleet", "system_database_url": url, "executor_id": app.worker,
                   "application_version": workflows.APP_VERSION, "log_level": "WARNING",
                   "notification_listener_polling_interval_sec": 0.1, "sys_db_pool_size": pool}
    DBOS(config=config)
    DBOS.launch()
    try:
        await DBOS.register_queue_async(workflows.QUEUE, worker_concurrency=sessions,
                                        polling_interval_sec=0.2)
        beats = Heartbeats(url)
        client = workflows.FleetClient(store)
        if on_ready is not None:
            on_ready()
        last_sweep = 0.0
        unseen: dict[str, float] = {}
        stop = stop or asyncio.Event()
        while not stop.is_set():
            if app.lost is not None:
                os._exit(EX_TEMPFAIL)  # crash-only: the pending workflows go to live workers
            with contextlib.suppress(Exception):  # a database restart: the next beat retries
                await asyncio.to_thread(_tend, beats, app.worker, dead_after, unseen)
            if time.monotonic() - last_sweep >= SWEEP:
                last_sweep = time.monotonic()
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(sweep, client)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), HEARTBEAT)
        beats.close()
        client.close()
    finally:
        DBOS.destroy()


def _tend(beats: Heartbeats, me: str, dead_after: float, unseen: dict[str, float]) -> None:
    """Beat, then take over silent executors: those whose row is stale, and those holding
    pending workflows without ever having written a row (killed before their first beat)
    once they have stayed so for ``dead_after`` seconds (``unseen``: when first noticed)."""
    beats.beat(me)
    for executor, seen in beats.dead(dead_after):
        if executor != me and beats.take(executor, seen):
            DBOS._recover_pending_workflows([executor])
    now = time.monotonic()
    known = beats.known()
    pending = DBOS.list_workflows(status="PENDING", load_input=False, load_output=False,
                                  app_version=workflows.APP_VERSION)
    holders = {w.executor_id for w in pending}
    for executor in sorted(e for e in holders if e and e != me and e not in known):
        first = unseen.setdefault(executor, now)
        if now - first >= dead_after:
            unseen.pop(executor, None)
            DBOS._recover_pending_workflows([executor])
    for executor in [e for e in unseen if e not in holders or e in known]:
        unseen.pop(executor, None)


def sweep(client: workflows.FleetClient) -> int:
    """Start the workflow of every session of ``client.store`` with work waiting (idempotent
    by workflow id); returns how many were started or found existing."""
    started = 0
    for info in list_sessions(client.store, states=("queued", "running")):
        with contextlib.suppress(Exception):
            client.start(info.id, info.runs)
            started += 1
    return started
