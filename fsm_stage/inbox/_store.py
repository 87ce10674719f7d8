"""What the inbox reads: every session of a store, its open reviews, its stage history.

``SessionStore(location)`` lists the session logs of a JSONL folder (``*.jsonl``, one session
per file, read without the writer lock) and keeps each file's fold until the file changes
(size or mtime), so a queue page over 1,000 sessions re-reads only the logs that moved.
``answer(...)`` records an answer through ``fsm_stage.reviews.answer_review`` on the session's
own log, the call the CLI and MCP hosts use, so every review rule and race check applies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.constants import REVIEW_REQUEST
from fsm_stage.errors import UserError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event, SessionHeader
from fsm_stage.log.projections import fold
from fsm_stage.log.projections.stage import stage_from_event
from fsm_stage.reviews._fold import REVIEW_FOLD, ReviewAnswer, ReviewRecord, ReviewState

__all__ = ["OpenReview", "SessionStore", "SessionView"]

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
    """A folded session log: ``key`` (file name), ``header``, ``events``, the review ``state``,
    the current ``stage`` (None without a stage record) and read ``warnings``."""

    key: str
    path: Path
    header: SessionHeader
    events: tuple[Event, ...]
    state: ReviewState
    stage: str | None
    warnings: tuple[str, ...] = ()

    def request_data(self, record: ReviewRecord) -> Mapping[str, Any]:
        """The logged ``data`` of ``record``'s request event ({} when it is not a mapping)."""
        ev = self.events[record.seq] if 0 <= record.seq < len(self.events) else None
        if ev is not None and ev.type == REVIEW_REQUEST and isinstance(ev.data, Mapping):
            return ev.data
        return {}

    def open(self) -> tuple[OpenReview, ...]:
        """The open reviews of this session, in request order."""
        out = []
        for record in self.state.open:
            data = self.request_data(record)
            rules = data.get("rules")
            rules = rules if isinstance(rules, Mapping) else (None if rules is None else {"invalid": True})
            asked = self.events[record.seq].time if 0 <= record.seq < len(self.events) else 0
            out.append(OpenReview(self.header.id, self.key, record, asked, rules, deadline_of(rules, asked)))
        return tuple(out)

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


def deadline_of(rules: Mapping[str, Any] | None, asked_ms: int) -> int | None:
    """Epoch ms when a review asked at ``asked_ms`` expires under ``rules.deadlineSeconds``."""
    seconds = (rules or {}).get("deadlineSeconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return asked_ms + int(seconds * 1000)
    return None


class SessionStore:
    """The session logs of a JSONL folder ``location`` (see module docstring).

    Raises ``UserError`` (one line) for a location that is not a readable folder.
    """

    def __init__(self, location: str | os.PathLike[str]) -> None:
        loc = str(location)
        if "://" in loc:
            raise UserError(f"inbox: {loc.split('://')[0]}:// locations are not supported yet; "
                            "serve a folder of JSONL session logs")
        self.root = Path(loc)
        if not self.root.is_dir():
            raise UserError(f"inbox: {self.root} is not a folder of session logs")
        self._cache: dict[str, tuple[tuple[int, int], SessionView | None]] = {}
        self._lock = threading.Lock()

    def _paths(self) -> list[Path]:
        return sorted(p for p in self.root.glob("*.jsonl") if p.is_file())

    def sessions(self) -> list[SessionView]:
        """Every readable session log, by file name (unreadable ones are left out)."""
        out = []
        for path in self._paths():
            view = self.load(path.name)
            if view is not None:
                out.append(view)
        return out

    def load(self, key: str) -> SessionView | None:
        """The folded log ``key`` (a file name in the folder), None when missing or unreadable."""
        if "/" in key or "\\" in key or key.startswith(".") or not key.endswith(".jsonl"):
            return None
        path = self.root / key
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_size, st.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        view: SessionView | None = None
        if st.st_size <= MAX_LOG_BYTES:
            try:
                res = read_log(path)
            except (OSError, ValueError, UserError):
                view = None
            else:
                events = tuple(res.events)
                stage = None
                for ev in reversed(events):
                    stage = stage_from_event(ev)
                    if stage is not None:
                        break
                view = SessionView(key, path, res.header, events, fold(REVIEW_FOLD, events), stage,
                                   tuple(res.warnings))
        with self._lock:
            self._cache[key] = (stamp, view)
        return view

    def open_reviews(self) -> list[OpenReview]:
        """Every open review of every session."""
        return [item for view in self.sessions() for item in view.open()]

    def version(self) -> str:
        """A short fingerprint of the open reviews (changes when one is asked or closed)."""
        import hashlib

        ids = "\n".join(f"{r.key}\t{r.record.id}\t{r.record.seq}" for r in self.open_reviews())
        return hashlib.sha256(ids.encode()).hexdigest()[:16]

    def answer(self, key: str, review_id: str, outcome: str, *, feedback: str | None, option: str | None,
               by: str) -> ReviewAnswer:
        """Record an answer on session ``key``'s log through ``answer_review`` (raises what it
        raises: ``ReviewError`` and its subclasses, ``LogWriteError``; ``UserError`` for an
        unknown session)."""
        from fsm_stage.reviews._answer import answer_review, open_location
        from fsm_stage.runtime.session import Session

        if self.load(key) is None:
            raise UserError(f"no session log {key!r}")
        log = open_location(self.root / key)
        try:
            return answer_review(Session(log), review_id, outcome, feedback=feedback, option=option, by=by)
        finally:
            log.close()
