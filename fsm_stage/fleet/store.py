"""``Store``: where a fleet's session logs live — a folder of JSONL files (one machine) or a
PostgreSQL database (many machines) — and where its DBOS system database goes.

A folder ``DIR`` keeps session ``ID`` in ``DIR/ID.jsonl`` and DBOS in ``DIR/.fleet/dbos.sqlite``;
``postgresql://…`` keeps both the logs (``fsm_sessions`` / ``fsm_events``) and DBOS (schema
``dbos``) in that database. Session ids are 1–128 characters of ``A–Z a–z 0–9 . _ -`` not
starting with ``.`` (a file name and a URL parameter without escaping).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.log.events import SessionHeader

__all__ = ["SESSION_ID", "Store", "check_session_id"]

SESSION_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
"""A valid fleet session id (see the module docstring)."""


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` when valid, else raise ``UserError`` (one line, the id shortened)."""
    if isinstance(session_id, str) and SESSION_ID.fullmatch(session_id):
        return session_id
    shown = repr(session_id)[:40] + ("…" if len(repr(session_id)) > 40 else "")
    raise UserError(f"invalid session id {shown}: use 1-128 characters of A-Z a-z 0-9 . _ - "
                     "(not starting with '.')")


class Store:
    """A fleet store at ``location`` (a folder path or a ``postgresql://`` URL).

    ``kind`` is ``"jsonl"`` or ``"postgres"``; ``open(id)`` opens a session's log for writing
    (``create=`` a header to start a new one); ``session_ids()`` lists the sessions;
    ``dbos_url`` is the DBOS system database URL. Raises ``UserError`` for an empty location
    or a path that exists and is not a folder."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        from fsm_stage.log.postgres import is_postgres_location, split_location

        text = os.fspath(location)
        if not text:
            raise UserError("empty store location: give a folder or a postgresql:// URL")
        self.location = text
        if is_postgres_location(text):
            conninfo, session = split_location(text)
            if session is not None:
                raise UserError("a fleet store URL names the database, not one session: drop ?session=")
            self.kind = "postgres"
            self.conninfo = conninfo
            self.folder: Path | None = None
        else:
            from fsm_stage.log.locations import file_location

            folder = file_location(text, "fleet store")  # a mistyped URL is not made a folder tree
            if folder.exists() and not folder.is_dir():
                raise UserError(f"{text}: a fleet store is a folder (or a postgresql:// URL), not a file")
            self.kind = "jsonl"
            self.conninfo = ""
            self.folder = folder

    def __repr__(self) -> str:
        return f"Store({self.shown!r})"

    @property
    def shown(self) -> str:
        """The location for messages (a password redacted)."""
        from fsm_stage.log.postgres import redact

        return redact(self.location) if self.kind == "postgres" else self.location

    def path(self, session_id: str) -> Path:
        """The JSONL file of ``session_id`` (folder stores)."""
        assert self.folder is not None
        return self.folder / f"{check_session_id(session_id)}.jsonl"

    def location_of(self, session_id: str) -> str:
        """The ``open_log`` location of ``session_id``."""
        if self.kind == "postgres":
            from fsm_stage.reviews._answer import pg_location

            return pg_location(self.conninfo, check_session_id(session_id))
        return str(self.path(session_id))

    def open(self, session_id: str, *, create: SessionHeader | None = None, lock_timeout: float = 0.0) -> Any:
        """Open ``session_id``'s log for appending (``create``: start it when missing). Raises
        ``UserError`` for an unknown session without ``create``, ``LogLockedError`` when a
        JSONL file's writer lock stays taken ``lock_timeout`` seconds, ``LogWriteError``."""
        from fsm_stage.log.locations import open_log

        location = self.location_of(session_id)
        options: dict[str, Any] = {}
        if self.kind == "jsonl":
            assert self.folder is not None
            if create is None and not Path(location).exists():
                if not self.folder.is_dir():  # a mistyped store, not a missing session
                    raise UserError(f"{self.shown}: no such store folder (give the folder the worker "
                                    "serves; --new starts a session in it)")
                raise UserError(f"{self.shown}: no session {session_id!r}")
            self.folder.mkdir(parents=True, exist_ok=True)
            options["lock_timeout"] = lock_timeout
        try:
            return open_log(location, create=create, **options)
        except LogFormatError as err:
            if create is None and "no such session" in str(err):
                raise UserError(f"{self.shown}: no session {session_id!r}") from None
            raise

    def session_ids(self) -> list[str]:
        """Every session id in the store, sorted."""
        if self.kind == "postgres":
            from fsm_stage.log.postgres import connect

            with connect(self.conninfo) as conn:
                rows = conn.execute("SELECT session FROM fsm_sessions ORDER BY session").fetchall()
            return [str(r[0]) for r in rows if SESSION_ID.fullmatch(str(r[0]))]
        if self.folder is None or not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.jsonl") if SESSION_ID.fullmatch(p.stem))

    @property
    def fleet_dir(self) -> Path:
        """``DIR/.fleet`` of a folder store (DBOS database, listing checkpoints)."""
        assert self.folder is not None
        return self.folder / ".fleet"

    @property
    def dbos_url(self) -> str:
        """The DBOS system database: ``sqlite:///DIR/.fleet/dbos.sqlite`` or the PostgreSQL URL."""
        if self.kind == "postgres":
            return self.conninfo
        self.fleet_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{self.fleet_dir.resolve() / 'dbos.sqlite'}"
