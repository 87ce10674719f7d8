"""What the inbox reads: every session of a store, its open reviews, its stage history.

``SessionStore(location)`` lists the session logs of a JSONL folder (``*.jsonl``, one session
per file, read without the writer lock) or of a PostgreSQL database (``postgresql://…``: every
session of ``fsm_sessions``, keyed by its id) and keeps each log's fold until it changes (a
file's size or mtime; a session's last seq), so a queue page over 1,000 sessions re-reads only
the logs that moved. ``answer(...)`` records an answer through ``fsm_stage.reviews.vote_review``
(``answer_review`` when no reviewer is named) on the session's own log, the call the CLI and MCP
hosts use, so every review rule (approvers, quorum, not_requester, deadline) and race check
applies; ``on_answer(session_id, review_id)``, when given, runs after each logged answer (the
fleet's wake-up, ``fsm_stage.fleet.wake``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.errors import DatabaseError, FsmStageError, UserError
from fsm_stage.log.dsh import ReadResult, read_log
from fsm_stage.log.events import Event, SessionHeader
from fsm_stage.log.projections.stage import stage_from_event
from fsm_stage.reviews._fold import ReviewAnswer, ReviewRecord, ReviewState, fold_reviews
from fsm_stage.reviews._team import Reviewers, VoteResult, deadline_at

__all__ = ["OnAnswer", "OpenReview", "SessionStore", "SessionView"]

#: ``on_answer(session_id, review_id)``: called after an answer is logged; returns a one-line
#: warning (the answer stands) or None.
OnAnswer = Callable[[str, str], "str | None"]

#: Largest session log the inbox folds (bytes); a bigger one is listed as unreadable.
MAX_LOG_BYTES = 256 * 1024 * 1024


@attrs.frozen
class OpenReview:
    """One open review as the queue shows it: the session ``session_id`` and ``key`` (the log's
    file name), the ``record``, when it was asked (``asked_ms``, epoch ms), the logged
    ``rules`` (a mapping, or None when the request carries none) and the ``deadline_ms``."""

    session_id: str
    key: str
    record: ReviewRecord
    asked_ms: int
    rules: Mapping[str, Any] | None
    deadline_ms: int | None


@attrs.frozen
class SessionView:
    """A folded session log: ``key`` (file name; a PostgreSQL session's id), ``path`` (None on
    PostgreSQL), ``header``, ``events``, the review ``state``,
    the current ``stage`` (None without a stage record) and ``dropped``: what the reader left
    out of a log read only in part (a damaged line and what follows it, or an incomplete last
    line; one line), None when all of it was read."""

    key: str
    path: Path | None
    header: SessionHeader
    events: tuple[Event, ...]
    state: ReviewState
    stage: str | None
    dropped: str | None = None

    def open(self) -> tuple[OpenReview, ...]:
        """The open reviews of this session, in request order."""
        return open_of(self.header.id, self.key, self.state)

    def answers(self) -> Mapping[str, ReviewAnswer]:
        """Review id -> its logged answer."""
        return self.state.answered

    def stage_history(self) -> tuple[tuple[int, int, str], ...]:
        """``(seq, time ms, stage)`` of every stage record, in log order."""
        out = []
        for ev in self.events:
            name = stage_from_event(ev)
            if name is not None:
                out.append((ev.seq, ev.time, name))
        return tuple(out)


def open_of(session_id: str, key: str, state: ReviewState) -> tuple[OpenReview, ...]:
    """The open reviews of ``state`` (a session's review fold), in request order, with the
    time and rules of their requests as the fold records them (``rules_problem`` decides
    whether anyone may answer)."""
    return tuple(OpenReview(session_id, key, r, r.time, r.rules, deadline_at(r.rules, r.time))
                 for r in state.open)


class SessionStore:
    """The session logs at ``location``: a JSONL folder or a ``postgresql://`` database (see the
    module docstring). ``on_answer`` runs after every logged answer.

    Raises ``UserError`` (one line) for a location that is not a readable folder, a PostgreSQL
    URL naming one session (``?session=``) or another scheme.
    """

    def __init__(self, location: str | os.PathLike[str], *, on_answer: OnAnswer | None = None) -> None:
        from fsm_stage.log.postgres import is_postgres_location, redact, split_location

        loc = os.fspath(location)
        self.on_answer = on_answer
        self.conninfo: str | None = None
        self.root = Path(loc)
        self.shown = loc
        if is_postgres_location(loc):
            conninfo, session = split_location(loc)
            if session is not None:
                raise UserError(f"inbox: {redact(loc)} names one session; give the database URL "
                                "without ?session=")
            self.conninfo, self.shown = conninfo, redact(loc)
        elif "://" in loc:
            raise UserError(f"inbox: {loc.split('://')[0]}:// locations are not supported; "
                            "give a folder of JSONL session logs or a postgresql:// URL")
        elif not self.root.is_dir():
            raise UserError(f"inbox: {self.root} is not a folder of session logs")
        self._cache: dict[str, tuple[Any, SessionView | None]] = {}
        self._why: dict[str, str] = {}  # key -> why its log cannot be read (``load``)
        self._listed: frozenset[str] = frozenset()  # the keys of the last folder listing
        self._queue: Any = None  # PostgreSQL: the open reviews per session (``_pg_queue``)
        self._lock = threading.Lock()

    @property
    def postgres(self) -> bool:
        """Whether the sessions live in PostgreSQL."""
        return self.conninfo is not None

    def _stamps(self) -> dict[str, Any]:
        """Session key -> what tells that its log changed (size and mtime; the last seq)."""
        if self.conninfo is None:
            out: dict[str, Any] = {}
            failed: set[str] = set()
            for p in sorted(self.root.glob("*.jsonl")):
                try:
                    st = p.stat()
                except OSError as err:  # e.g. a dangling symlink: say so, never skip it silently
                    failed.add(p.name)
                    with self._lock:
                        self._why[p.name] = f"cannot read the file: {err.strerror or err}"
                    continue
                if p.is_file():
                    out[p.name] = (st.st_size, st.st_mtime_ns)
            self._listed = frozenset(out) | failed
            return out
        from fsm_stage.log.postgres import connect

        with connect(self.conninfo) as conn:
            return self._pg_stamps(conn)

    def _pg_stamps(self, conn: Any) -> dict[str, Any]:
        """Session id -> its last seq, for every session of the database (through ``conn``)."""
        rows = self._pg_query(conn, "listing the sessions", lambda: conn.execute(
            "SELECT s.session, (SELECT max(e.seq) FROM fsm_events e WHERE e.session = s.session) "
            "FROM fsm_sessions s ORDER BY s.session").fetchall())
        return {str(r[0]): r[1] for r in rows if _pg_key_ok(str(r[0]))}

    def _pg_query(self, conn: Any, doing: str, run: Callable[[], Any]) -> Any:
        """``run()`` with a psycopg error raised as one ``DatabaseError`` line."""
        from fsm_stage.log.pg_connect import db_error, psycopg_module

        try:
            return run()
        except psycopg_module().Error as err:
            raise db_error(self.shown, doing, err, conn) from None

    def sessions(self) -> list[SessionView]:
        """Every readable session log, by key (unreadable ones are left out of the list and
        named by ``unreadable()``). Raises ``DatabaseError`` when PostgreSQL cannot be reached."""
        out = []
        for key, stamp in self._stamps().items():
            view = self.load(key, stamp=stamp)
            if view is not None:
                out.append(view)
        return out

    def unreadable(self) -> dict[str, str]:
        """The ``*.jsonl`` files of the last folder listing (``sessions``, ``open_reviews``)
        that could not be read, file name -> why (one line): their reviews are not in the
        queue, and the caller must say so. On PostgreSQL: the sessions of the last
        ``open_reviews`` whose review rows do not decode, session id -> why."""
        if self.conninfo is not None:
            with self._lock:
                queue = self._queue
            return queue.unreadable() if queue is not None else {}
        with self._lock:
            return {key: self._why[key] for key in sorted(self._listed) if key in self._why}

    def damaged(self) -> dict[str, str]:
        """The ``*.jsonl`` files of the last folder listing that were read only in part (a
        damaged line: the reader keeps the lines before it), file name -> what was dropped (one
        line): reviews after the damage are not in the queue, and the caller must say so.
        Empty on PostgreSQL."""
        with self._lock:
            cached = {key: self._cache.get(key) for key in sorted(self._listed)}
        return {key: entry[1].dropped for key, entry in cached.items()
                if entry is not None and entry[1] is not None and entry[1].dropped is not None}

    def listed_nothing(self) -> bool:
        """Whether the last folder listing found no ``*.jsonl`` file at all (so "no open
        reviews" would hide a wrong folder). Always False on PostgreSQL."""
        with self._lock:
            return self.conninfo is None and not self._listed

    def why_unreadable(self, key: str) -> str | None:
        """Why ``load(key)`` found the log ``key`` unreadable (None: it was read, or is missing)."""
        with self._lock:
            return self._why.get(key)

    def load(self, key: str, *, stamp: Any = None) -> SessionView | None:
        """The folded log ``key`` (a file name in the folder; a PostgreSQL session id), None when
        missing or unreadable. ``stamp`` (from a listing) saves looking it up again."""
        if "\0" in key:  # no file name or PostgreSQL text holds NUL: nothing to look up
            return None
        if self.conninfo is not None:
            return self._load_pg(key, stamp)
        if "/" in key or "\\" in key or key.startswith(".") or not key.endswith(".jsonl"):
            return None
        path = self.root / key
        if stamp is None:
            try:
                st = path.stat()
            except OSError:
                with self._lock:
                    self._why.pop(key, None)  # gone: missing, not unreadable
                return None
            stamp = (st.st_size, st.st_mtime_ns)
        hit, cached = self._cached(key, stamp)
        if hit:
            return cached
        view: SessionView | None = None
        why: str | None = f"larger than {MAX_LOG_BYTES} bytes, the most the inbox reads"
        if stamp[0] <= MAX_LOG_BYTES:
            try:
                res = read_log(path)
            except OSError as err:
                why = f"cannot read the file: {err.strerror or err}"
            except (ValueError, UserError) as err:
                why = str(err).replace(f"{path}: ", "")  # the key names the file already
            else:
                why = None
                view = _view(key, path, res)
        return self._remember(key, stamp, view, why)

    def _remember(self, key: str, stamp: Any, view: SessionView | None,
                  why: str | None) -> SessionView | None:
        """Cache ``key``'s fold for ``stamp`` and why it could not be read (None: it was);
        returns ``view``."""
        with self._lock:
            self._cache[key] = (stamp, view)
            if why is None:
                self._why.pop(key, None)
            else:
                self._why[key] = one_line(why)
        return view

    def _cached(self, key: str, stamp: Any) -> tuple[bool, SessionView | None]:
        """``(hit, view)``: whether ``key``'s cached fold is for ``stamp``, and that fold."""
        with self._lock:
            cached = self._cache.get(key)
        return (True, cached[1]) if cached is not None and cached[0] == stamp else (False, None)

    def _load_pg(self, key: str, stamp: Any) -> SessionView | None:
        from fsm_stage.log.postgres import connect, read_postgres
        from fsm_stage.reviews._answer import pg_location

        assert self.conninfo is not None
        if not _pg_key_ok(key):
            return None
        if stamp is None:
            with connect(self.conninfo) as conn:
                row = self._pg_query(conn, "reading the session", lambda: conn.execute(
                    "SELECT (SELECT max(seq) FROM fsm_events WHERE session = %s) "
                    "FROM fsm_sessions WHERE session = %s", (key, key)).fetchone())
            if row is None:
                with self._lock:
                    self._why.pop(key, None)  # gone: missing, not unreadable
                return None
            stamp = row[0]
        hit, cached = self._cached(key, stamp)
        if hit:
            return cached
        view: SessionView | None = None
        why: str | None = None
        try:
            res = read_postgres(pg_location(self.conninfo, key))
        except DatabaseError:
            raise  # the database failed, not the session: nothing is cached, the page says 503
        except (FsmStageError, ValueError) as err:  # rows that no longer fold: named, with why
            why = str(err)
        else:
            view = _view(key, None, res)
        return self._remember(key, stamp, view, why)

    def open_reviews(self) -> list[OpenReview]:
        """Every open review of every session (on PostgreSQL read from the review rows of the
        sessions that moved, ``_pg_queue``). Raises ``DatabaseError`` when PostgreSQL cannot
        be read."""
        if self.conninfo is None:
            return [item for view in self.sessions() for item in view.open()]
        from fsm_stage.inbox._pg_queue import ReviewQueue
        from fsm_stage.log.postgres import connect

        with self._lock:
            queue = self._queue = self._queue or ReviewQueue()
        with connect(self.conninfo) as conn:
            stamps = self._pg_stamps(conn)
            return list(self._pg_query(conn, "reading the open reviews",
                                       lambda: queue.open_reviews(conn, stamps)))

    def version(self) -> str:
        """A short fingerprint of the open reviews (changes when one is asked or closed)."""
        import hashlib

        ids = "\n".join(f"{r.key}\t{r.record.id}\t{r.record.seq}" for r in self.open_reviews())
        return hashlib.sha256(ids.encode()).hexdigest()[:16]

    def session_id(self, key: str) -> str:
        """The fleet session id of ``key``: a file's name without ``.jsonl``; a PostgreSQL id."""
        return key if self.conninfo is not None else key.removesuffix(".jsonl")

    def answer(self, key: str, review_id: str, outcome: str, *, feedback: str | None, option: str | None,
               by: str, reviewer: str | None = None, reviewers: Reviewers | None = None,
               edited: str | None = None) -> tuple[VoteResult, str | None]:
        """Record an answer on session ``key``'s log: ``vote_review`` as ``reviewer`` (the
        authenticated person; ``reviewers`` resolves ``@group`` approvers), or ``answer_review``
        without one, so the review's logged rules decide; ``edited`` approves the reviewer's
        edited document (docs/reviews.md, "Approve with edits"). Returns the ``VoteResult`` (its
        ``answer`` None while a quorum is not reached) and ``on_answer``'s warning (None when
        it is fine or not called). Raises what those raise (``ReviewError`` and its
        subclasses, ``LogWriteError``, ``DatabaseError``); ``UserError`` for an unknown session."""
        from fsm_stage.reviews._answer import answer_review, open_location, pg_location, vote_review
        from fsm_stage.runtime.session import Session

        if self.load(key) is None:
            why = self.why_unreadable(key)
            raise UserError(f"no session log {key!r}" if why is None
                            else f"the session log {key} cannot be read: {why}")
        log = open_location(pg_location(self.conninfo, key) if self.conninfo is not None else self.root / key)
        try:
            session = Session(log)
            if reviewer is None:
                result = VoteResult(answer_review(session, review_id, outcome, feedback=feedback,
                                                  option=option, by=by, edited=edited))
            else:
                result = vote_review(session, review_id, outcome, reviewer=reviewer, reviewers=reviewers,
                                     feedback=feedback, option=option, by=by, edited=edited)
        finally:
            log.close()
        warning = None
        if result.answer is not None and self.on_answer is not None:
            try:
                warning = self.on_answer(self.session_id(key), review_id)
            except Exception as err:  # the answer stands; the session sees it at its next poll
                warning = f"{type(err).__name__}: {err}"
        return result, warning


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) as one space: a why for one line."""
    return " ".join(text.split())


def _pg_key_ok(key: str) -> bool:
    """A PostgreSQL session id the inbox can use as a URL path segment."""
    return 0 < len(key) <= 256 and key.isprintable() and "/" not in key and "\\" not in key \
        and not key.startswith(".")


def _view(key: str, path: Path | None, res: ReadResult) -> SessionView:
    events = tuple(res.events)
    stage = None
    for ev in reversed(events):
        stage = stage_from_event(ev)
        if stage is not None:
            break
    # a fork sees its parent's unused reviews as redeemed "forked": never open, never answerable
    reviews = fold_reviews(events, res.header.seed_length)
    return SessionView(key, path, res.header, events, reviews, stage, _dropped(res))


def _dropped(res: ReadResult) -> str | None:
    """What the reader left out of ``res``'s log (None: all of it was read), one line."""
    if res.torn_tail_offset is None:
        return None
    if res.damaged_line is not None:
        after = f" with the {res.lines_after_damage} line(s) after it" if res.lines_after_damage else ""
        return one_line(f"{res.damage}; dropped{after}")
    return f"an incomplete last line (a write cut short) dropped from byte {res.torn_tail_offset}"
