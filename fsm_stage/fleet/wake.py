"""Answers given outside the fleet's own client wake the session too (``on_answer`` hooks).

``FleetClient.answer`` (``fsm-stage answer``) logs an answer and sends the DBOS wake-up at
once; an answer logged by another channel (the web inbox, ``fsm-stage inbox approve-all``) is
otherwise only seen at the waiting workflow's next poll (``--poll``, 30 s by default).
``fleet_waker(location)`` returns a ``Waker`` — an ``on_answer(session_id, review_id)`` hook
that starts the session's run workflow (idempotent) and sends the wake-up on the review's
topic with the review id as idempotency key, exactly as ``FleetClient.answer`` does — when a
fleet is configured for ``location``, else None:

* ``FSM_STAGE_FLEET_DBOS`` names the DBOS system database (``sqlite:///…`` or
  ``postgresql://…``; ``off`` disables the wake-up);
* else this process runs fleet workflows (``fsm_stage.fleet.workflows.configure``) on the same
  store: its database;
* else a folder that holds ``.fleet/dbos.sqlite`` (a worker ran there) or a PostgreSQL
  database that holds the ``dbos`` schema.

DBOS (extra ``[fleet]``) is imported only when a fleet is found; without it there is no
waker. A wake-up that fails never undoes the answer: the hook returns the one-line reason and
the workflow still finds the answer in the log at its poll.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from typing import Any

from fsm_stage.fleet.store import Store

__all__ = ["ENV", "Waker", "fleet_dbos_url", "fleet_waker"]

ENV = "FSM_STAGE_FLEET_DBOS"
"""Environment variable naming the fleet's DBOS system database (``off``: no wake-ups)."""
_OFF = ("off", "0", "none", "no", "false")


def fleet_dbos_url(store: Store) -> str | None:
    """The DBOS system database of the fleet configured for ``store`` (the module docstring's
    order), or None. Never creates anything; an unreachable database counts as none."""
    named = os.environ.get(ENV, "").strip()
    if named:
        return None if named.lower() in _OFF else named
    workflows = sys.modules.get("fsm_stage.fleet.workflows")
    app = getattr(workflows, "_APP", None) if workflows is not None else None
    if app is not None and app.store.kind == store.kind and _same(app.store, store):
        return str(app.store.dbos_url)
    if store.kind == "jsonl":
        path = store.fleet_dir / "dbos.sqlite"
        return f"sqlite:///{path.resolve()}" if path.is_file() else None
    from fsm_stage.log.postgres import connect

    try:
        with connect(store.conninfo) as conn:
            row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'dbos'").fetchone()
    except Exception:
        return None
    return store.conninfo if row is not None else None


def _one_line(err: Exception) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return text[:300]


def _same(a: Store, b: Store) -> bool:
    if a.folder is not None and b.folder is not None:
        return a.folder.resolve() == b.folder.resolve()
    return a.conninfo == b.conninfo


class Waker:
    """An ``on_answer(session_id, review_id) -> warning | None`` hook over one fleet store and
    its DBOS database ``dbos_url`` (a ``FleetClient``, connected on first use or by
    ``connect()``; thread-safe). ``close()`` when done."""

    def __init__(self, store: Store, dbos_url: str) -> None:
        self.store = store
        self.dbos_url = dbos_url
        self._client: Any = None
        self._lock = threading.Lock()

    def connect(self) -> str | None:
        """Load DBOS and make the client now rather than at the first wake-up (that takes about
        a second, which would delay the first session woken): a long-lived server such as
        ``fsm-stage inbox serve`` calls it at start. Returns None, or why it could not (one
        line; the next wake-up tries again). An unreachable database shows at the wake-up."""
        with self._lock:
            try:
                if self._client is None:
                    from fsm_stage.fleet.workflows import FleetClient

                    self._client = FleetClient(self.store, dbos_url=self.dbos_url)
            except Exception as err:
                return _one_line(err)
        return None

    def __call__(self, session_id: str, review_id: str) -> str | None:
        """Wake ``session_id`` on ``review_id``'s topic; returns None, or why it could not
        (one line; the answer stands)."""
        failed = self.connect()
        if failed is not None:
            return failed
        try:
            self._client.wake_answered(session_id, review_id)
        except Exception as err:
            return _one_line(err)
        return None

    def close(self) -> None:
        """Disconnect from the DBOS database."""
        if self._client is not None:
            self._client.close()
            self._client = None


def fleet_waker(location: str | os.PathLike[str], *, dbos_url: str | None = None) -> Waker | None:
    """A ``Waker`` for the fleet configured at ``location`` (or for ``dbos_url``), or None when
    there is no fleet there or DBOS is not installed. Raises ``UserError`` for a location that
    is not a fleet store (a file, a URL naming one session)."""
    if importlib.util.find_spec("dbos") is None:
        return None
    store = Store(location)
    url = dbos_url or fleet_dbos_url(store)
    return Waker(store, url) if url else None
