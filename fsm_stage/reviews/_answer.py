"""Durable reviews without a controller: ``answer_review``, ``open_reviews``, ``fork_log``.

``answer_review(log_or_session, review_id, outcome, *, feedback=None, option=None, by="api")``
records a human's answer to an open review (the CLI ``fsm-stage review`` and MCP hosts use
it); ``open_reviews(log_or_session)`` lists the asked, unanswered ones; ``fork_log(source,
at_seq, dest)`` writes a DSH-style fork that inherits no open review and no unredeemed
approval (JSONL or PostgreSQL, either way); ``open_location`` opens any ``open_log``
location for such a short writer. The answer is a conditional append under the session lock
(``expect_last_seq``): of racing answers exactly one is logged, the others raise
``ReviewAlreadyAnsweredError`` (on a file racing processes queue on the writer lock; on
PostgreSQL a loser's append conflicts, it re-folds and finds the review answered).
Event shapes: ``docs/reviews.md``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path, PurePath

import attrs

from fsm_stage.constants import (
    REVIEW_ANSWER,
    REVIEW_OUTCOMES,
    REVIEW_REDEEMED,
    SESSION_END_SEED,
    TOOL_CALL,
)
from fsm_stage.driver._pending import session_lock
from fsm_stage.errors import (
    AppendConflictError,
    RecordShapeError,
    ReviewAlreadyAnsweredError,
    ReviewNotFoundError,
    ReviewPayloadChangedError,
    ReviewRefusedError,
    UserError,
)
from fsm_stage.log.events import EventLog, NewEvent, SessionHeader, wall_clock_ms
from fsm_stage.log.jsonl import encode_line
from fsm_stage.log.locations import StoredLog, open_log
from fsm_stage.log.postgres import is_postgres_location, split_location
from fsm_stage.log.projections.spend import SPEND_FOLD
from fsm_stage.reviews._document import read_handoff_document
from fsm_stage.reviews._edits import edit_data, refuse_feedback, single_approver_refusal
from fsm_stage.reviews._fold import (
    MAX_REVIEW_DOCUMENT_BYTES,
    REVIEW_FOLD,
    ReviewAnswer,
    ReviewRecord,
    ReviewState,
    approved_shape,
    budget_payload_sha256,
    fresh_reviews,
    plan_payload_sha256,
    stage_payload_sha256,
    tool_payload_sha256,
)
from fsm_stage.reviews._team import Reviewers, VoteResult, decide, with_reviewers
from fsm_stage.runtime.session import Session
from fsm_stage.text import lone_surrogate

__all__ = [
    "LOCK_TIMEOUT",
    "answer_review",
    "answer_spec",
    "current_payload_sha256",
    "fork_log",
    "open_location",
    "open_reviews",
    "pg_location",
    "plan_text",
    "review_state",
    "tool_call_payload_sha256",
    "vote_review",
]


ANSWER_ATTEMPTS = 10
"""``answer_review`` re-folds after a lost conditional append at most this often (each loss
means another writer appended; once the winner's answer is read the loser is refused)."""


def _session(target: Session | EventLog) -> Session:
    if isinstance(target, Session):
        return target
    if isinstance(target, (str, bytes, PurePath)) or not callable(getattr(target, "append_many", None)):
        path = isinstance(target, (str, PurePath))
        hint = " (a path: open it first, with open_log(path) as log)" if path else ""
        raise TypeError(f"expected a Session or an open EventLog, got {type(target).__name__}{hint}")
    return Session(target)


def review_state(target: Session | EventLog) -> ReviewState:
    """The folded ``ReviewState`` of a session or log (after ``refresh()``); in a fork (a header
    with ``seedLength``) the parent's unused reviews count as redeemed ``forked`` (``as_fork``)."""
    return fresh_reviews(_session(target))


def open_reviews(target: Session | EventLog) -> tuple[ReviewRecord, ...]:
    """The reviews asked and not answered yet, in request order."""
    return review_state(target).open


def _logged_call(session: Session, call_id: str) -> Mapping[str, object] | None:
    """The ``data`` of the last logged ``tool/call`` with ``callId`` ``call_id`` (None if absent)."""
    for ev in reversed(session.events):
        if ev.type == TOOL_CALL and isinstance(ev.data, Mapping) and ev.data.get("callId") == call_id:
            return ev.data
    return None


def plan_text(session: Session, call_id: str) -> str | None:
    """The ``plan`` argument of the logged ``tool/call`` with ``callId`` ``call_id`` (None if absent)."""
    data = _logged_call(session, call_id)
    if data is None:
        return None
    raw = data.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    plan = args.get("plan") if isinstance(args, Mapping) else None
    return plan if isinstance(plan, str) else None


def tool_call_payload_sha256(session: Session, call_id: str) -> str | None:
    """``tool_payload_sha256`` of the logged ``tool/call`` ``call_id`` (its name and argument
    text exactly as logged; None when that call is not in the log or has no text arguments)."""
    data = _logged_call(session, call_id)
    if data is None:
        return None
    name, raw = data.get("name"), data.get("arguments")
    if not isinstance(name, str) or not isinstance(raw, str):
        return None
    return tool_payload_sha256(name, raw)


def reviewed_document(session: Session, record: ReviewRecord) -> str:
    """The handoff document a stage review asks about, as the reviewer must see it: the copy
    stored in the request when it hashes to ``payloadSha256`` (a reviewer on any machine reads
    the exact bytes they approve), else the file at ``handoffPath`` under
    ``read_handoff_document``'s checks (only ``session.header`` is read). Raises ``OSError`` /
    ``UnicodeDecodeError`` when neither is readable, ``ValueError`` for a review without a
    handoff path."""
    stored = record.document
    if stored is not None and stage_payload_sha256(record.target, stored) == record.payload_sha256:
        return stored
    if record.handoff_path is None:
        raise ValueError(f"review {record.id} names no handoff document")
    return read_handoff_document(session, record.handoff_path)


PAYLOAD_NAMES = {"stage": "handoff document", "plan": "plan", "tool": "tool call's arguments",
                 "budget": "stage visit whose budget ran out"}
"""What a review's payload is, by kind (error messages)."""


def _budget_payload_now(session: Session, record: ReviewRecord) -> str:
    """A budget review's subject now: the current visit of its scope (a stage change or a fresh
    budget since the request makes the answer stale)."""
    scope = record.call_id.split(":")[1] if record.call_id.count(":") >= 2 else ""
    state = session.read(SPEND_FOLD)
    spend = state.plan_spend if scope == "plan" else state.stage_spend
    label = record.from_ if scope == "plan" or state.stage == record.from_ else f"{state.stage}"
    return budget_payload_sha256(scope, label, spend.since)


def current_payload_sha256(session: Session, record: ReviewRecord, *, stored: bool = False) -> str | None:
    """What the reviewer would approve now, hashed: a stage review re-reads the handoff document
    at ``handoffPath`` (missing/unreadable → ``"missing"``); a plan review hashes the logged
    call's ``plan`` argument; a tool review the logged call's name and argument text, whatever
    keys the arguments hold (None when that call is not in the log: nothing to compare); a budget
    review the visit whose budget ran out. A kind this function does not know hashes as
    ``"unknown"`` (never equal: fails closed). ``stored=True`` (an answer): a stage review whose
    document is not readable here but was stored in the request hashes the stored document, so a
    reviewer on another machine can approve it; redemption uses the default (local file only)."""
    if record.kind == "tool":
        return tool_call_payload_sha256(session, record.call_id)
    if record.kind == "budget":
        return _budget_payload_now(session, record)
    if record.kind not in ("stage", "plan"):
        return "unknown"
    if record.kind == "stage":
        text: str | None = None
        if record.handoff_path is not None:
            try:
                text = read_handoff_document(session, record.handoff_path)
            except (OSError, UnicodeDecodeError):
                if stored and record.document is not None:
                    # no local copy (a reviewer on another machine): approve the document the
                    # request stored; the worker that redeems checks its own file against it
                    return stage_payload_sha256(record.target, record.document)
                return "missing"
        return stage_payload_sha256(record.target, text)
    plan = plan_text(session, record.call_id)
    return None if plan is None else plan_payload_sha256(plan)


def answer_spec(record: ReviewRecord, outcome: str, *, feedback: str | None = None,
                option: str | None = None, by: str = "api", edited: str | None = None) -> NewEvent:
    """The ``fsm/review/answer`` event for ``record`` (validated; raises ``RecordShapeError``).

    ``approve``: ``option`` defaults to the first option and must be one of the request's
    approve options (every option but the last, which is the keep label); its shape decides
    the flush; ``edited`` (a full switch's handoff document or a plan, as the reviewer changed
    it) adds ``edited`` / ``editedSha256`` (``reviews._edits.edit_data``). ``keep``: option =
    the keep label; ``feedback`` optional. ``dismiss``: no option. Edits go with ``approve`` only.
    """
    if outcome not in REVIEW_OUTCOMES:
        raise RecordShapeError(f"unknown review outcome {outcome!r}; use one of {', '.join(REVIEW_OUTCOMES)}")
    for name, value in (("feedback", feedback), ("option", option), ("by", by)):
        _text_or_none(record, name, value)
    if outcome == "keep" and option is not None and record.options and option != record.options[-1]:
        raise RecordShapeError(f"review {record.id}: a keep's option is {record.options[-1]!r}, "
                               f"got {option!r}")
    if outcome == "dismiss" and option is not None:
        raise RecordShapeError(f"review {record.id}: a dismiss takes no option, got {option!r}")
    if edited is not None and outcome != "approve":
        raise RecordShapeError(f"review {record.id}: an edited document goes with an approval only")
    approve_options = record.options[:-1] if len(record.options) > 1 else record.options
    shape: str | None = None
    if outcome == "approve":
        option = option if option is not None else (approve_options[0] if approve_options else "Approve")
        if approve_options and option not in approve_options:
            raise RecordShapeError(f"review {record.id}: {option!r} is not an approve option "
                                   f"(options: {', '.join(approve_options)})")
        shape = approved_shape(record, option)
        feedback = None
    elif outcome == "keep":
        option = record.options[-1] if record.options else None
    else:
        option = None
    edits = edit_data(record, shape, edited) if outcome == "approve" else {}
    return NewEvent(REVIEW_ANSWER, {"id": record.id, "outcome": outcome, "option": option, "shape": shape,
                                    "feedback": feedback, "by": by, **edits}, ignorable=True)


def _text_or_none(record: ReviewRecord, name: str, value: object) -> None:
    """Refuse (``RecordShapeError``) an answer field that is neither None nor UTF-8 text."""
    if value is None:
        return
    if not isinstance(value, str):
        raise RecordShapeError(f"review {record.id}: {name} must be a str or None, "
                               f"got {type(value).__name__}")
    at = lone_surrogate(value)
    if at is not None:
        raise RecordShapeError(f"review {record.id}: {name} holds a lone surrogate at index {at}: "
                               "not UTF-8 text")


def answer_review(target: Session | EventLog, review_id: str, outcome: str, *, feedback: str | None = None,
                  option: str | None = None, by: str = "api", reviewer: str | None = None,
                  reviewers: Reviewers | None = None, edited: str | None = None) -> ReviewAnswer:
    """Record the answer to the open review ``review_id``; returns the logged ``ReviewAnswer``.

    ``reviewer`` is the authenticated person answering (checked against the review's logged
    rules: approvers, ``not_requester``, deadline; ``reviewers`` resolves ``@group`` approvers);
    a review whose rules name approvers needs one. A review with a quorum above 1 is answered
    through ``vote_review``. ``edited`` approves the reviewer's edited version of the document
    (a full switch's handoff document or a plan; docs/reviews.md "Approve with edits"): the answer
    records it and its digest, and the transition uses it. Raises ``ReviewNotFoundError`` (no such review),
    ``ReviewAlreadyAnsweredError`` (answered already, or lost a race: nothing written),
    ``ReviewRefusedError`` (the rules do not allow this answer, or the review expired: its
    expiry is then logged), ``ReviewPayloadChangedError`` (approve only: the plan text /
    handoff document no longer hashes to ``payloadSha256``), ``RecordShapeError`` (a bad
    outcome or option) and ``LogWriteError`` from the log. The tool call applies it when
    resumed (``StagedSession.resume``); an approval is applied at the next accepted step.
    """
    result = _answer(target, review_id, outcome, feedback=feedback, option=option, by=by,
                     reviewer=reviewer, reviewers=reviewers, vote=False, edited=edited)
    answer: ReviewAnswer | None = result.answer
    assert answer is not None
    return answer


def vote_review(target: Session | EventLog, review_id: str, outcome: str, *, reviewer: str,
                reviewers: Reviewers | None = None, feedback: str | None = None, option: str | None = None,
                by: str = "api", edited: str | None = None) -> VoteResult:
    """Answer ``review_id`` as ``reviewer`` under a quorum: an approval is logged as a vote
    (``fsm/review/vote``) and the approval itself once the quorum of distinct approvers is
    reached (``VoteResult.answer``); a keep or dismiss closes the review at once. A review
    without a quorum is answered as ``answer_review`` would. Raises what ``answer_review``
    raises, and ``ReviewRefusedError`` for a second vote by the same reviewer or an ``edited``
    document under a quorum above 1 (edits need a single approver)."""
    return _answer(target, review_id, outcome, feedback=feedback, option=option, by=by,
                   reviewer=reviewer, reviewers=reviewers, vote=True, edited=edited)


def _answer(target: Session | EventLog, review_id: str, outcome: str, *, feedback: str | None,
            option: str | None, by: str, reviewer: str | None, reviewers: Reviewers | None,
            vote: bool, edited: str | None = None) -> VoteResult:
    if isinstance(feedback, str) and lone_surrogate(feedback) is None:  # a surrogate: answer_spec says so
        refuse_feedback(feedback, f"review {review_id}: the feedback")
    session = _session(target)
    with session_lock(session.id):
        for _attempt in range(ANSWER_ATTEMPTS):
            state = review_state(session)
            record = state.records.get(review_id)
            if record is None:
                raise ReviewNotFoundError(f"no review {review_id!r} in session {session.id} "
                                          f"(open: {', '.join(r.id for r in state.open) or 'none'})")
            if review_id in state.answered or review_id in state.redeemed:
                done = state.answered.get(review_id)
                closed = state.redeemed.get(review_id)
                if done is None:  # closed without an answer (its call has a result, a fork, a reload)
                    why = f" ({closed.reason})" if closed is not None and closed.reason else ""
                    raise ReviewAlreadyAnsweredError(f"review {review_id} was closed without an answer{why}")
                raise ReviewAlreadyAnsweredError(f"review {review_id} was answered already ({done.outcome})")
            if outcome == "approve":
                now = current_payload_sha256(session, record, stored=True)
                if now == "missing" and record.document_omitted:
                    raise ReviewRefusedError(
                        f"review {review_id}: the handoff document is not readable here and was not "
                        f"stored with the review (larger than {MAX_REVIEW_DOCUMENT_BYTES} bytes); "
                        "approve it where the document is")
                if now is not None and now != record.payload_sha256:
                    what = PAYLOAD_NAMES.get(record.kind, f"{record.kind} payload")
                    raise ReviewPayloadChangedError(
                        f"review {review_id}: the {what} changed since the review was asked; "
                        "it cannot be approved")
            spec = answer_spec(record, outcome, feedback=feedback, option=option, by=by, edited=edited)
            team = decide(session, record, outcome, reviewer=reviewer, reviewers=reviewers, vote=vote,
                          option=spec.data["option"] if outcome == "approve" else None)
            if edited is not None and team.needed > 1 and team.refusal is None and team.expiry is None:
                team = attrs.evolve(team, refusal=single_approver_refusal(team.needed))
            try:
                if team.expiry is not None:
                    session.append_many([team.expiry], expect_last_seq=session.last_seq)
                    raise ReviewRefusedError(team.refusal or f"review {review_id} expired")
                if team.refusal is not None:
                    refused = ReviewRefusedError(f"review {review_id}: {team.refusal}")
                    if team.voted_before:
                        refused.voted_before, refused.votes, refused.needed = True, team.votes, team.needed
                    raise refused
                specs = [*team.before, *([with_reviewers(spec, team.names)] if team.complete else [])]
                events = session.append_many(specs, expect_last_seq=session.last_seq)
            except AppendConflictError:
                continue  # another writer appended meanwhile: fold again and decide again
            if not team.complete:
                return VoteResult(None, team.votes, team.needed)
            answer = session.read(REVIEW_FOLD).answered.get(review_id)
            assert answer is not None and answer.seq == events[-1].seq
            return VoteResult(answer, team.votes, team.needed)
    raise ReviewAlreadyAnsweredError(f"review {review_id}: the log kept changing; try again")


LOCK_TIMEOUT = 10.0
"""Seconds ``open_location`` waits for a JSONL log's writer lock (racing processes queue)."""


def open_location(location: str | os.PathLike[str], *, create: SessionHeader | None = None) -> StoredLog:
    """``open_log(location)`` for a command that writes a little and exits: a JSONL file waits up
    to ``LOCK_TIMEOUT`` s for the writer lock (racing processes queue); a ``postgresql://``
    location needs no lock (its appends are conditional)."""
    if is_postgres_location(location):
        return open_log(location, create=create)
    return open_log(location, create=create, lock_timeout=LOCK_TIMEOUT)


def fork_log(source: str | os.PathLike[str] | Session | EventLog, at_seq: int,
             dest: str | os.PathLike[str]) -> Session:
    """Write a DSH-style fork of ``source`` cut after event ``at_seq`` to the new log ``dest``.

    ``source`` is a ``Session``, an ``EventLog`` or an ``open_log`` location (a JSONL path or
    ``postgresql://…?session=ID``); ``dest`` a new JSONL file or a ``postgresql://…`` location
    (its ``session`` parameter is the child's id, else a new uuid; the session must not exist).
    The child header has a new id, ``parentSession`` = the parent's id and ``seedLength =
    at_seq + 1``; the seed events are copied verbatim, then ``session/end-seed {}`` and, for
    every review open or approved-unredeemed at the cut, ``fsm/review/redeemed {applied: false,
    reason: "forked"}`` (the fork asks again; the parent still redeems its own). Returns a
    ``Session`` over the open child log (close its log when done). Raises ``UserError`` for a
    bad ``at_seq`` or an existing ``dest``.
    """
    owned = isinstance(source, str | os.PathLike)
    src = Session(open_location(source)) if isinstance(source, str | os.PathLike) else _session(source)
    pg_dest = is_postgres_location(dest)
    child_id = str(uuid.uuid4())
    try:
        events = list(src.events)
        if not isinstance(at_seq, int) or not 0 <= at_seq < len(events):
            raise UserError(f"fork: --at {at_seq} is not an event seq of the log (0..{len(events) - 1})")
        if pg_dest:
            assert isinstance(dest, str)
            child_id = _check_new_pg_session(dest) or child_id
        else:
            from fsm_stage.log.locations import file_location

            out = file_location(dest, "fork")  # a mistyped URL is not made a folder tree
            if out.exists() and out.stat().st_size > 0:
                raise UserError(f"fork: {out} exists already; choose a new file")
        seed = events[: at_seq + 1]
        state = REVIEW_FOLD.init()
        for ev in seed:
            state = REVIEW_FOLD.apply(state, ev)
        parent = src.header
        header = attrs.evolve(parent, id=child_id, created_at=wall_clock_ms(),
                              parent_session=parent.id, seed_length=at_seq + 1)
        blob = (json.dumps(header.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        blob += b"".join(encode_line(ev) for ev in seed)
        if pg_dest:
            from fsm_stage.log.pg_transfer import import_jsonl

            assert isinstance(dest, str)
            import_jsonl(blob, pg_location(dest, child_id), source="fork")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(blob)
    finally:
        if owned:
            close = getattr(src.log, "close", None)
            if callable(close):
                close()
    child = Session(open_location(pg_location(dest, child_id) if pg_dest else Path(dest)))
    dropped = [r.id for r in (*state.open, *state.approved)]
    specs = [NewEvent(SESSION_END_SEED, {})]
    specs += [NewEvent(REVIEW_REDEEMED, {"id": rid, "applied": False, "reason": "forked"}, ignorable=True)
              for rid in dropped]
    child.append_many(specs)
    return child


def pg_location(location: str | os.PathLike[str], session: str) -> str:
    """The PostgreSQL ``location`` naming ``session`` (its own ``session`` parameter if it has one)."""
    from urllib.parse import quote

    loc = str(location)
    if split_location(loc)[1] is not None:
        return loc
    base, hash_, fragment = loc.partition("#")
    return base + ("&" if "?" in base else "?") + "session=" + quote(session, safe="") + hash_ + fragment


def _check_new_pg_session(location: str) -> str | None:
    """Refuse a PostgreSQL fork destination whose session exists; returns its ``session``."""
    from fsm_stage.log.pg_schema import check_schema
    from fsm_stage.log.postgres import connect, redact

    conninfo, session = split_location(location)
    if session is None:
        return None
    with connect(conninfo) as conn:
        check_schema(conn, redact(conninfo))
        row = conn.execute("SELECT 1 FROM fsm_sessions WHERE session = %s", (session,)).fetchone()
    if row is not None:
        raise UserError(f"fork: {redact(location)}: session {session!r} exists already; choose a new session")
    return session
