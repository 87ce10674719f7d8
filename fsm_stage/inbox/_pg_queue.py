"""The queue of a PostgreSQL store without folding whole sessions.

A queue page over 1,000 sessions only needs each session's open reviews, and those follow
from a few rows per session and its header (a fork's ``seedLength``: its parent's unused
reviews are closed ``forked``): the review requests, answers and redemptions, and the
``tool/result`` rows that close a call without running it (the codes of
``reviews._fold.CLOSED_CALL_CODES``; ``ReviewFold`` reads nothing else that matters here).
``ReviewQueue.open_reviews(conn, stamps)`` reads those rows of every session whose last seq
moved since the last call in **one** query (the ``(session, seq)`` primary key finds the
sessions, a ``LIKE`` on the stored line picks the rows; over-matching is harmless, each row is
decoded and filtered by its type) and their headers in a second, folds them with ``REVIEW_FOLD``
and keeps the result per session until its last seq moves again. ``import`` stores lines
verbatim, and JSON may spell any of these types or codes with ``\\/`` or ``\\u00XX``: a row
holding either escape is read too, so no spelling hides a row from the queue. A session whose
rows do not decode is left out of the queue (its page says why), as a file that cannot be read
is.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from fsm_stage.constants import TOOL_RESULT
from fsm_stage.errors import LogFormatError
from fsm_stage.inbox._store import OpenReview, one_line, open_of
from fsm_stage.log.events import Event
from fsm_stage.log.pg_events import decode_rows, stored_header
from fsm_stage.reviews._fold import CLOSED_CALL_CODES, ReviewFold, fold_reviews

__all__ = ["ReviewQueue"]

#: ``LIKE`` patterns of the stored rows that may hold a review event, or a type or code the
#: other patterns look for spelled with a JSON escape: every character they look for is ASCII,
#: so its escape is ``\/`` or ``\u00XX`` (``\`` is ``LIKE``'s escape character, hence doubled;
#: an escaped non-ASCII character, common in ASCII-only logs, selects nothing more).
REVIEW_ROWS = ["%fsm/review/%", r"%\\/%", r"%\\u00%"]
#: ... and of the ``tool/result`` rows that may close a reviewed call.
CLOSING_CODES = sorted(f'%"{code}"%' for code in CLOSED_CALL_CODES)

#: ... and of the ``tool/result`` rows.
TOOL_ROWS = f"%{TOOL_RESULT}%"

QUERY = ("SELECT session, seq, n, line FROM fsm_events WHERE session = ANY(%(sessions)s) "
         "AND (line LIKE ANY(%(review)s) OR (line LIKE %(tool)s AND line LIKE ANY(%(codes)s))) "
         "ORDER BY session, seq")
#: The stored headers of those sessions (a fork's ``seedLength``).
HEADERS = "SELECT session, header FROM fsm_sessions WHERE session = ANY(%(sessions)s)"


class ReviewQueue:
    """The open reviews of a PostgreSQL store's sessions, cached per session by its last seq
    (module docstring). Thread-safe."""

    def __init__(self) -> None:
        # session id -> (stamp, its open reviews, why its review rows do not decode or None)
        self._cache: dict[str, tuple[Any, tuple[OpenReview, ...], str | None]] = {}
        self._lock = threading.Lock()

    def unreadable(self) -> dict[str, str]:
        """Session id -> why, for the sessions of the last ``open_reviews`` whose review rows
        do not decode (their reviews are not listed; the caller must say so)."""
        with self._lock:
            return {key: entry[2] for key, entry in sorted(self._cache.items()) if entry[2] is not None}

    def open_reviews(self, conn: Any, stamps: Mapping[str, Any]) -> list[OpenReview]:
        """The open reviews of the sessions of ``stamps`` (session id -> last seq, in listing
        order), reading through ``conn`` (a psycopg connection) only the sessions whose stamp
        changed. Raises what psycopg raises (the caller maps it to ``DatabaseError``)."""
        with self._lock:
            cached = {k: v for k, v in self._cache.items() if k in stamps}
        changed = [k for k, stamp in stamps.items() if k not in cached or cached[k][0] != stamp]
        if changed:
            rows: dict[str, list[tuple[int, int, str]]] = {k: [] for k in changed}
            for session, seq, n, line in conn.execute(QUERY, {"sessions": changed, "review": REVIEW_ROWS,
                                                              "tool": TOOL_ROWS, "codes": CLOSING_CODES}):
                rows[str(session)].append((int(seq), int(n), str(line)))
            headers = {str(session): str(text) for session, text in conn.execute(
                HEADERS, {"sessions": changed})}
            for key in changed:
                cached[key] = (stamps[key], *_open(key, headers.get(key), rows[key]))
        with self._lock:
            self._cache = cached
        return [item for key in stamps for item in cached[key][1]]


def _open(key: str, header: str | None,
          rows: list[tuple[int, int, str]]) -> tuple[tuple[OpenReview, ...], str | None]:
    """The open reviews of session ``key`` from its stored ``header`` text and its review rows
    (a fork's inherited reviews are not open: ``as_fork``), and None; ``((), why)`` when the
    header or a row does not decode (the session is then named as unreadable, never skipped
    silently)."""
    reads = ReviewFold.READS
    events: dict[int, Event] = {}
    try:
        if header is None:  # deleted since it was listed
            return (), None
        seed_length = stored_header(header, source=f"session {key}").seed_length
        for row in rows:
            for event in decode_rows("", [row], next_seq=row[0], source=f"session {key}"):
                if event.type in reads:
                    events[event.seq] = event
    except (LogFormatError, RecursionError) as err:
        why = str(err) if isinstance(err, LogFormatError) else "a review row is nested too deeply to read"
        return (), one_line(why)
    state = fold_reviews([events[seq] for seq in sorted(events)], seed_length)
    if not state.open:
        return (), None
    return open_of(key, key, state), None

