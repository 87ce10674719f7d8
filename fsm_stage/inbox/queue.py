"""One queue across sessions: every open review of a store, filtered, and bulk answers that
stay one decision per review. Needs no web extra (``fsm-stage inbox list`` / ``approve-all``).

``open_reviews(location, kinds=…, stages=…, older_than=…, deadline_within=…)`` lists the open
reviews of every session of a JSONL folder or a ``postgresql://`` database (``SessionStore``:
each log folded once and cached until it changes), oldest first. ``answer_one(store, item,
outcome, reviewer=…)`` answers one of them through ``vote_review`` / ``answer_review`` (the
review's own digest check, its logged rules, the race check) and reports the result as a
``Decision``; ``approve_all`` does that for each review of a listing in turn: never a standing
grant, a refused or failed review is reported and the rest go on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from fsm_stage.errors import FsmStageError, ReviewRefusedError
from fsm_stage.inbox._auth import refusal
from fsm_stage.inbox._store import OnAnswer, OpenReview, SessionStore
from fsm_stage.log.events import wall_clock_ms
from fsm_stage.reviews._team import Reviewers, quorum_of
from fsm_stage.text import deadline_text, review_route, visible

__all__ = ["Decision", "answer_item", "answer_one", "approve_all", "deadline_text", "open_reviews",
           "review_json", "unreadable_warnings"]

#: ``Decision.result`` values: the review was answered, a quorum vote was logged, the
#: reviewer's vote was logged before and the review still waits for others (nothing written),
#: the rules or the review's state refused it, another error (payload changed, answered
#: already, a write).
RESULTS = ("answered", "voted", "waiting", "refused", "error")


def _line(text: object, limit: int = 300) -> str:
    shown = visible(str(text))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _store(location: str | os.PathLike[str] | SessionStore,
           on_answer: OnAnswer | None = None) -> SessionStore:
    return location if isinstance(location, SessionStore) else SessionStore(location, on_answer=on_answer)


def open_reviews(location: str | os.PathLike[str] | SessionStore, *, kinds: Iterable[str] = (),
                 stages: Iterable[str] = (), older_than: float | None = None,
                 deadline_within: float | None = None, now_ms: int | None = None,
                 targets: Iterable[str] = (), reviewer: str | None = None,
                 reviewers: Reviewers | None = None) -> list[OpenReview]:
    """The open reviews of every session at ``location`` (a JSONL folder, a ``postgresql://``
    URL or a ``SessionStore``), oldest first. Filters (all must hold): ``kinds`` (the review's
    kind is one of them), ``stages`` (its ``from`` or ``target`` is one of them), ``targets``
    (its ``target`` is one of them), ``older_than`` (asked at least that many seconds ago),
    ``deadline_within`` (it has a deadline at most that many seconds away, or past),
    ``reviewer`` (the review's logged ``approvers`` let that reviewer answer it, ``@group``s
    resolved through ``reviewers``; rules it cannot read let nobody). Raises ``UserError`` for a
    bad location, ``DatabaseError`` when PostgreSQL cannot be reached."""
    kind_set, stage_set, target_set = frozenset(kinds), frozenset(stages), frozenset(targets)
    entry = reviewers.by_name.get(reviewer) if reviewers is not None and reviewer is not None else None
    groups = entry.groups if entry is not None else ()
    now = wall_clock_ms() if now_ms is None else now_ms
    out = []
    for item in _store(location).open_reviews():
        rec = item.record
        if kind_set and rec.kind not in kind_set:
            continue
        if stage_set and rec.from_ not in stage_set and rec.target not in stage_set:
            continue
        if target_set and rec.target not in target_set:
            continue
        if reviewer is not None and refusal(item.rules, reviewer, groups) is not None:
            continue
        if older_than is not None and now - item.asked_ms < older_than * 1000:
            continue
        if deadline_within is not None and (item.deadline_ms is None
                                            or item.deadline_ms - now > deadline_within * 1000):
            continue
        out.append(item)
    out.sort(key=lambda i: (i.asked_ms, i.key, i.record.seq))
    return out


def unreadable_warnings(store: SessionStore) -> list[str]:
    """One line per session log of ``store``'s last listing that could not be read (a corrupt,
    empty, too large or unreadable ``*.jsonl`` file): ``FILE: not read, its reviews are not
    listed: why``; and per log read only in part (a damaged line): ``FILE: read in part,
    reviews after the damage are not listed: why``; control characters escaped. Those reviews
    are missing from the queue, so a caller that lists or answers the queue says so instead of
    skipping the file silently."""
    return [*(_line(f"{f'session {key}' if store.postgres else store.root / key}: not read, its reviews "
                    f"are not listed: {why}") for key, why in store.unreadable().items()),
            *(_line(f"{store.root / key}: read in part, reviews after the damage are not listed: {why}")
              for key, why in store.damaged().items())]


def _json_safe(value: Any) -> Any:
    """``value`` with every float JSON cannot carry (``NaN``, ``Infinity``: Python's reader takes
    them from a log) written as the token the log holds, a string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def review_json(item: OpenReview, now_ms: int) -> dict[str, Any]:
    """One queue row as JSON: ``{session, key, id, kind, from, target, call_id, options,
    payload_sha256, asked_ms, age_seconds, deadline_ms, rules}`` (text exactly as logged; a
    number in the rules that JSON cannot carry, ``NaN`` or ``Infinity``, as that token in a
    string: such rules refuse every answer)."""
    rec = item.record
    return {"session": item.session_id, "key": item.key, "id": rec.id, "kind": rec.kind, "from": rec.from_,
            "target": rec.target, "call_id": rec.call_id, "options": list(rec.options),
            "payload_sha256": rec.payload_sha256, "asked_ms": item.asked_ms,
            "age_seconds": max(0, (now_ms - item.asked_ms) // 1000), "deadline_ms": item.deadline_ms,
            "rules": _json_safe(dict(item.rules)) if item.rules is not None else None}


@attrs.frozen
class Decision:
    """What answering one review did: its ``key`` / ``session_id`` / ``review_id``, the
    ``result`` (``RESULTS``), a one-line ``message`` (control characters escaped), the quorum
    ``votes`` so far (for an approval: the reviewers it names; none for a keep or a refusal) and
    ``needed`` (the review's logged quorum, 1 without one), and ``wake`` (the wake-up's warning,
    or None)."""

    key: str
    session_id: str
    review_id: str
    result: str
    message: str
    votes: tuple[str, ...] = ()
    needed: int = 1
    wake: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the review was answered or voted on (now or, ``waiting``, before)."""
        return self.result in ("answered", "voted", "waiting")

    def to_json(self) -> dict[str, Any]:
        """``{key, session, id, result, message, votes, needed, wake}``."""
        return {"key": self.key, "session": self.session_id, "id": self.review_id, "result": self.result,
                "message": self.message, "votes": list(self.votes), "needed": self.needed, "wake": self.wake}


def answer_one(store: SessionStore, item: OpenReview, outcome: str, *, reviewer: str | None, by: str,
               reviewers: Reviewers | None = None, groups: Sequence[str] | None = None,
               option: str | None = None, feedback: str | None = None, edited: str | None = None) -> Decision:
    """Answer the open review ``item`` on its own session log as ``reviewer`` (None: nobody
    named; a review whose rules name approvers, a quorum or not_requester is then refused);
    ``edited``: approve the reviewer's edited document instead (``answer_review(edited=…)``).
    Rules the inbox cannot read refuse everyone. The answer is ``SessionStore.answer``: the
    review's payload digest, its rules and racing answers are checked there. Never raises for
    a review's own refusal or error: they are the ``Decision``."""
    rec = item.record
    what = f"{item.key} {rec.id} ({review_route(rec.kind, rec.from_, rec.target)})"
    if groups is None:
        entry = reviewers.by_name.get(reviewer) if reviewers is not None and reviewer is not None else None
        groups = entry.groups if entry is not None else ()
    why = refusal(item.rules, reviewer, tuple(groups))

    needed = quorum_of(item.rules)

    def decision(result: str, message: str, **kw: Any) -> Decision:
        return Decision(item.key, item.session_id, rec.id, result, _line(message), **{"needed": needed, **kw})

    if why is not None:
        return decision("refused", f"refused: {what}: {why}")
    try:
        result, wake = store.answer(item.key, rec.id, outcome, feedback=feedback, option=option, by=by,
                                    reviewer=reviewer, reviewers=reviewers, edited=edited)
    except ReviewRefusedError as err:
        if err.voted_before:  # a repeated approve-all, say
            return decision("waiting", f"{reviewer} voted before: {what} ({len(err.votes)} of {err.needed} "
                                       "approvals; the review waits for the others)",
                            votes=err.votes, needed=err.needed)
        return decision("refused", f"refused: {what}: {err}")
    except FsmStageError as err:
        return decision("error", f"{what}: {err}")
    note = f" (wake-up not sent: {wake}; the session sees the answer at its next poll)" if wake else ""
    if result.answer is None:
        return decision("voted", f"vote recorded: {what} ({len(result.votes)} of {result.needed} "
                                 f"approvals){note}", votes=result.votes, needed=result.needed, wake=wake)
    edits = ("" if edited is None else " with edits" if result.answer.edited is not None
             else " (the document is unchanged: an ordinary approval)")
    return decision("answered", f"{outcome}{edits}: {what}{note}", votes=result.votes,
                    needed=result.needed, wake=wake)


def answer_item(store: SessionStore, item: OpenReview, outcome: str, *, reviewer: str, by: str,
                groups: Sequence[str], reviewers: Reviewers | None, option: str | None,
                feedback: str | None, edited: str | None = None) -> tuple[str, str]:
    """``answer_one`` as the web pages flash it: ``(ok | refused | error, one-line message)``."""
    done = answer_one(store, item, outcome, reviewer=reviewer, by=by, reviewers=reviewers, groups=groups,
                      option=option, feedback=feedback, edited=edited)
    return ("ok" if done.ok else done.result), done.message


def approve_all(location: str | os.PathLike[str] | SessionStore, *, reviewer: str | None = None,
                reviewers: Reviewers | None = None, by: str = "cli", on_answer: OnAnswer | None = None,
                kinds: Iterable[str] = (), stages: Iterable[str] = (), older_than: float | None = None,
                deadline_within: float | None = None, targets: Iterable[str] = ()) -> list[Decision]:
    """Approve every open review at ``location`` that the filters (``open_reviews``) select,
    one at a time through ``answer_one`` (each review's own digest and rules; a quorum review
    gets one vote), oldest first; a refused one is reported and the rest go on.
    ``on_answer`` (a new store only) runs after each logged answer. Raises only what listing
    raises (``UserError``, ``DatabaseError``)."""
    store = _store(location, on_answer)
    items = open_reviews(store, kinds=kinds, stages=stages, older_than=older_than,
                         deadline_within=deadline_within, targets=targets)
    return [answer_one(store, item, "approve", reviewer=reviewer, by=by, reviewers=reviewers)
            for item in items]
