"""Listing the sessions of a fleet store and their state (``fsm-stage sessions``).

The state is a fold of each log (``records.session_state``), kept as a checkpoint so a listing
refolds only the sessions that changed since the last one:

* a folder: ``DIR/.fleet/listing.json`` maps each file to ``[size, mtime_ns, state, review,
  runs]``; a file whose size or mtime changed is read again (without its writer lock);
* PostgreSQL: the table ``fsm_fleet_state(session, seq, state, review, runs)`` with an index on
  ``state``; one query finds the sessions whose last seq differs from the row's (an index
  lookup per session on ``fsm_events``' primary key), those are refolded and upserted, then
  ``--state`` is answered by the indexed query.

The checkpoint is only a cache of the logs: deleting it loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from typing import Any

import attrs

from fsm_stage.fleet.records import STATES, fold, session_state
from fsm_stage.fleet.store import SESSION_ID, Store

__all__ = ["DAMAGED", "SessionInfo", "list_sessions"]

DAMAGED = "damaged"
"""The listed state of a session whose log cannot be read (a damaged line or row: ``fsm-stage
state`` names it): listed, never dropped, and never left at the state it had before."""

_PG_TABLE = (
    "CREATE TABLE IF NOT EXISTS fsm_fleet_state (session text PRIMARY KEY REFERENCES fsm_sessions "
    "(session) ON DELETE CASCADE, seq bigint, state text NOT NULL, review text, runs integer NOT NULL)",
    "CREATE INDEX IF NOT EXISTS fsm_fleet_state_by_state ON fsm_fleet_state (state)",
)


@attrs.frozen
class SessionInfo:
    """One session in a listing: ``id``, ``state`` (``records.STATES``, or ``DAMAGED``), ``review_id`` (for
    ``waiting-review``), ``runs`` (ended runs, the current workflow's run number), ``events``
    (how many)."""

    id: str
    state: str
    review_id: str | None
    runs: int
    events: int

    def to_json(self) -> dict[str, Any]:
        """``{id, state, review_id, runs, events}``."""
        return attrs.asdict(self)


def _info(session_id: str, events: Any) -> SessionInfo:
    state, review = session_state(events)
    return SessionInfo(session_id, state, review, fold(events).runs, len(events))


def list_sessions(store: Store | str | os.PathLike[str], *,
                  states: Iterable[str] | None = None) -> list[SessionInfo]:
    """The sessions of ``store`` (sorted by id), only those in ``states`` when given. Raises
    ``UserError`` for an unknown state name or a bad location, ``UserError`` for an
    unreachable database."""
    from fsm_stage.errors import UserError

    store = store if isinstance(store, Store) else Store(store)
    wanted = None if states is None else frozenset(states)
    known = (*STATES, DAMAGED)
    if wanted is not None and not wanted <= set(known):
        bad = sorted(wanted - set(known))
        raise UserError(f"unknown session state {bad[0]!r}: one of {', '.join(known)}")
    infos = _postgres(store, wanted) if store.kind == "postgres" else _folder(store)
    return [i for i in infos if wanted is None or i.state in wanted]


def _folder(store: Store) -> list[SessionInfo]:
    from fsm_stage.errors import UserError
    from fsm_stage.log.locations import read_location

    folder = store.folder
    if folder is None or not folder.is_dir():
        raise UserError(f"{store.shown}: no such folder of session logs")
    cache_path = store.fleet_dir / "listing.json"
    try:
        cache = json.loads(cache_path.read_text(encoding="utf-8"))
        cache = cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        cache = {}
    fresh: dict[str, Any] = {}
    out: list[SessionInfo] = []
    for path in sorted(folder.glob("*.jsonl")):
        sid = path.stem
        if not SESSION_ID.fullmatch(sid):
            continue
        try:
            st = path.stat()
        except OSError:
            continue
        row = cache.get(sid)
        if isinstance(row, list) and len(row) == 6 and row[:2] == [st.st_size, st.st_mtime_ns]:
            info = SessionInfo(sid, row[2], row[3], row[4], row[5])
        else:
            try:
                read = read_location(path)
            except UserError:  # unreadable (an empty file is a log being created: left out)
                if st.st_size == 0:
                    continue
                read = None
            except OSError:
                continue
            if read is None or (read.damaged_line is not None and read.lines_after_damage > 0):
                info = SessionInfo(sid, DAMAGED, None, 0, 0)  # damage, not a torn tail
            else:
                info = _info(sid, read.events)
        fresh[sid] = [st.st_size, st.st_mtime_ns, info.state, info.review_id, info.runs, info.events]
        out.append(info)
    with contextlib.suppress(OSError):
        from fsm_stage.fileio import atomic_write

        store.fleet_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_path, json.dumps(fresh).encode("utf-8"))
    return out


def _postgres(store: Store, wanted: frozenset[str] | None) -> list[SessionInfo]:
    from fsm_stage.errors import UserError
    from fsm_stage.log.postgres import connect, read_postgres

    with connect(store.conninfo) as conn:
        for sql in _PG_TABLE:
            conn.execute(sql)
        stale = conn.execute(  # each session's last seq read once, then compared with the cache
            "SELECT s.session, m.last FROM fsm_sessions s "
            "CROSS JOIN LATERAL (SELECT max(e.seq) AS last FROM fsm_events e WHERE e.session = s.session) m "
            "LEFT JOIN fsm_fleet_state f ON f.session = s.session "
            "WHERE f.session IS NULL OR f.seq IS DISTINCT FROM m.last"
        ).fetchall()
        for sid, last in stale:
            if not SESSION_ID.fullmatch(str(sid)):
                continue
            try:
                events = read_postgres(store.location_of(str(sid))).events
                info, seq = _info(str(sid), events), (events[-1].seq if events else None)
            except UserError:  # a damaged row: listed as such until the session moves
                info, seq = SessionInfo(str(sid), DAMAGED, None, 0, 0), last
            conn.execute(
                "INSERT INTO fsm_fleet_state (session, seq, state, review, runs) "
                "VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (session) DO UPDATE SET seq = excluded.seq, state = excluded.state, "
                "review = excluded.review, runs = excluded.runs",
                (sid, seq, info.state, info.review_id, info.runs))
        if wanted is None:
            rows = conn.execute("SELECT session, state, review, runs, seq FROM fsm_fleet_state "
                                "ORDER BY session").fetchall()
        else:
            rows = conn.execute("SELECT session, state, review, runs, seq FROM fsm_fleet_state "
                                "WHERE state = ANY(%s) ORDER BY session", (sorted(wanted),)).fetchall()
    return [SessionInfo(str(r[0]), str(r[1]), r[2], int(r[3]), 0 if r[4] is None else int(r[4]) + 1)
            for r in rows]
