"""The controller side of a durable review (docs/architecture.md), shared by plan mode and the stage switch.

A reviewed tool call: ``existing(session, kind, call_id)`` finds the review of a resumed call;
otherwise ``reserve(session, kind)`` refuses at once (``_ReviewBusy``) while a review of that kind is
open, approved-unredeemed or being opened by another call of this process, ``open_request``
logs ``fsm/review/request`` (re-checking under the session lock, conditional append), and
``conduct`` asks the channel and logs the answer: ``ReviewSuspended`` → ``ReviewPending``;
dismissal, cancellation and channel failures → a ``dismiss`` answer, then the exception goes
on; an answer someone else logged first wins. ``settle`` turns a logged answer into an
``Outcome`` (an approval whose world moved is redeemed ``applied: false``). ``redeem`` is the one
redemption of every kind: a conditional append of ``fsm/review/redeemed`` (a worker that loses
the race re-folds, finds the winner's redemption and does not act). An answer whose write
failed is remembered in this process and logged as a ``dismiss`` (``by: "write-failure"``) by
the next call of that kind, so a transient log failure never leaves a review open for ever.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

import attrs

from fsm_stage.constants import REVIEW_REDEEMED, REVIEW_REQUEST, STEP_START, TOOL_RESULT, TURN_START
from fsm_stage.driver._pending import redeem_once, session_lock
from fsm_stage.errors import (
    AppendConflictError,
    LogWriteError,
    RecordShapeError,
    ReviewAlreadyAnsweredError,
    ReviewPayloadChangedError,
    ReviewPending,
    ReviewSuspended,
    _ReviewBusy,
)
from fsm_stage.log.events import Event, NewEvent, answered_call_id, log_now
from fsm_stage.reviews._answer import answer_spec
from fsm_stage.reviews._channel import Answer, ReviewDismissed
from fsm_stage.reviews._edits import feedback_problem
from fsm_stage.reviews._fold import (
    CALL_CLOSED,
    MAX_REVIEW_DOCUMENT_BYTES,
    REVIEW_FOLD,
    Redemption,
    ReviewAnswer,
    ReviewRecord,
    ReviewState,
    fresh_reviews,
)
from fsm_stage.reviews._team import decide
from fsm_stage.runtime.call_record import pending_call
from fsm_stage.runtime.session import Session

__all__ = [
    "BUSY_APPROVED",
    "BUSY_OPEN",
    "Outcome",
    "Ticket",
    "conduct",
    "declined",
    "existing",
    "open_request",
    "redeem",
    "redeemed_spec",
    "reserve",
    "settle",
    "state_of",
    "step_of",
]

BUSY_OPEN: Final = ("a {kind} review is already open (review {id}); wait for the reviewer's answer "
                    "instead of asking again")
BUSY_APPROVED: Final = ("a {kind} change was already approved (review {id}); it is applied at the next step")

_INFLIGHT: dict[tuple[str, str], int] = {}
#: (session id, review id) -> (kind, why) of answers this process failed to log (see module docstring).
_UNWRITTEN: dict[tuple[str, str], tuple[str, str]] = {}


@attrs.frozen
class Ticket:
    """What a controller asks: kind, from/target, option labels (the keep label last), the
    default shape, the handoff path and the payload hash (``fsm/review/request`` data), the
    review ``rules`` (``config.review_rules.rules_json``) and the ``document`` the reviewer is
    shown, stored in the request so a reviewer anywhere reads the exact text they approve."""

    kind: str
    from_: str
    target: str
    options: tuple[str, ...]
    shape: str | None
    handoff_path: str | None
    payload_sha256: str
    rules: Mapping[str, Any] | None = None
    document: str | None = None



def request_data(ticket: Ticket) -> dict[str, Any]:
    """The rules and document keys of a request (only those set)."""
    out: dict[str, Any] = {}
    if ticket.rules:
        out["rules"] = dict(ticket.rules)
    if ticket.document is not None:
        if len(ticket.document.encode("utf-8", "surrogatepass")) <= MAX_REVIEW_DOCUMENT_BYTES:
            out["document"] = ticket.document
        else:
            out["documentOmitted"] = True
    return out


@attrs.frozen
class Outcome:
    """A settled review: its request, the logged answer and the redemption (None while unused)."""

    record: ReviewRecord
    answer: ReviewAnswer
    redemption: Redemption | None


state_of: Callable[[Session], ReviewState] = fresh_reviews
"""The review fold of a session after catching up with other writers; in a fork (a header with
``seedLength``) the parent's unused reviews count as redeemed ``forked`` (``as_fork``)."""


class _StepFold:
    """``(turn, step)`` as ``step_of`` defines them, folded incrementally (the scan back
    to the turn's start was O(turn length) per review): a ``turn/start`` sets the turn (None when
    not an int) and clears the step; a ``step/start`` with an int ``step`` sets the step."""

    def init(self) -> tuple[int | None, int | None]:
        return None, None

    def apply(self, state: tuple[int | None, int | None], event: Event) -> tuple[int | None, int | None]:
        t = event.type
        if t == TURN_START:
            turn = event.data.get("turn") if isinstance(event.data, dict) else None
            return (turn if isinstance(turn, int) else None), None
        if t == STEP_START and isinstance(event.data, dict):
            step = event.data.get("step")
            if isinstance(step, int):
                return state[0], step
        return state


_STEP_FOLD: Final = _StepFold()


def step_of(session: Session) -> tuple[int | None, int | None]:
    """``(turn, step)``: the last ``turn/start``'s turn and the last ``step/start`` since it whose
    ``step`` is an int (Nones when absent); O(new events) through the session's cursor."""
    return session.read(_STEP_FOLD)


def existing(session: Session, kind: str, call_id: str | None, payload_sha256: str) -> ReviewRecord | None:
    """The review already asked for tool call ``call_id`` when this call is its resume, else None.

    A review that was used or closed (redeemed, e.g. ``forked``: the fork asks again) never
    counts — except a redeemed tool review whose call is still open (no ``tool/result`` since):
    that is another worker resuming the same call, who must see the winner's redemption and not
    run the tool — nor one declined (keep / dismiss) whose call already has its ``tool/result``: a model
    or host reusing a call id later is asked afresh, so an old answer is never replayed. A
    repeated resume of a call approved but not yet applied gets the same answer. Raises
    ``ReviewPayloadChangedError`` when the resumed call's payload hashes differently."""
    if not call_id:
        return None
    state = state_of(session)
    record = state.by_call(call_id, kind)
    if record is None:
        return None
    red = state.redeemed.get(record.id)
    if red is not None and (kind != "tool" or red.reason == "forked" or _reused(session, call_id, record)):
        return None
    answer = state.answered.get(record.id)
    if answer is not None and answer.outcome != "approve" and _reused(session, call_id, record):
        return None
    if record is not None and record.payload_sha256 != payload_sha256:
        raise ReviewPayloadChangedError(
            f"review {record.id}: the tool call's {'plan' if kind == 'plan' else 'stage or handoff'} "
            "changed since the review was asked; call the tool again with a new call")
    return record


def declined(session: Session, kind: str, call_id: str) -> ReviewAnswer | None:
    """The answer of the review of ``kind`` for tool call ``call_id`` when a reviewer answered it
    without approving (``keep``, ``dismiss``), unless a later call reuses the id (``_reused``):
    that call stays refused, whatever the policy in force says later. None otherwise (no review,
    open, approved, or a reused call id, which is asked afresh)."""
    state = state_of(session)
    record = state.by_call(call_id, kind)
    if record is None:
        return None
    answer = state.answered.get(record.id)
    if answer is None or answer.outcome == "approve" or _reused(session, call_id, record):
        return None
    return answer


def _reused(session: Session, call_id: str, record: ReviewRecord) -> bool:
    """Whether ``call_id`` is a later call reusing the id of ``record``'s call: that call has
    its ``tool/result`` and, for a kind reviewed per call, the step moved on. A reply's call ids
    are unique, so in a tool review's own step it is the same call (another writer, a resume
    after a refusal elsewhere): its review, answered and used, decides it again instead of a
    fresh one that would let it run twice."""
    if (record.kind in PER_CALL_KINDS and record.turn is not None and record.step is not None
            and (record.turn, record.step) == step_of(session)):
        return False
    return _settled_after(session, call_id, record.seq)


def _settled_after(session: Session, call_id: str, seq: int) -> bool:
    """Whether a ``tool/result`` for ``call_id`` was logged after seq ``seq``."""
    for event in session.events[seq + 1:]:
        if event.type == TOOL_RESULT and answered_call_id(event) == call_id:
            return True
    return False


def _heal(session: Session, kind: str) -> None:
    """Log a ``dismiss`` (``by: "write-failure"``, the failure as ``feedback``) for each review of
    ``kind`` whose answer this process failed to write and that is still open (caller holds the
    session lock). A write that fails again keeps it for the next call."""
    for key, (k, why) in list(_UNWRITTEN.items()):
        if key[0] != session.id or k != kind:
            continue
        state = state_of(session)
        record = state.records.get(key[1])
        if record is not None and record.id not in state.answered and record.id not in state.redeemed:
            spec = answer_spec(record, "dismiss", feedback=f"the answer could not be logged ({why})",
                               by="write-failure")
            try:
                session.append_many([spec], expect_last_seq=session.last_seq)
            except LogWriteError:
                return  # still not writable (or another writer appended): the next call retries
        _UNWRITTEN.pop(key, None)


PER_CALL_KINDS: Final = frozenset({"tool"})
"""Kinds whose reviews are bound to one call each: several may be open at once (one per call,
``existing`` finds a resumed call's). A stage or plan review is one per session and kind."""


def _check_free(state: ReviewState, kind: str, label: str) -> None:
    if kind in PER_CALL_KINDS:
        return
    rec = state.open_of(kind)
    if rec is not None:
        raise _ReviewBusy(BUSY_OPEN.format(kind=label, id=rec.id))
    rec = state.pending(kind)
    if rec is not None:
        raise _ReviewBusy(BUSY_APPROVED.format(kind=label, id=rec.id))


def reserve(session: Session, kind: str, label: str) -> AbstractContextManager[None]:
    """Refuse (``_ReviewBusy``, on entering the block) unless no review of ``kind`` is open,
    approved-unredeemed or being opened by another call in this process; hold that slot until
    the block exits."""
    return _Reserved(session, kind, label)


class _Reserved:
    """``reserve``'s block."""

    __slots__ = ("_key", "_kind", "_label", "_session")

    def __init__(self, session: Session, kind: str, label: str) -> None:
        self._session, self._kind, self._label = session, kind, label
        self._key = (session.id, kind)

    def __enter__(self) -> None:
        session, key = self._session, self._key
        with session_lock(session.id):
            if _INFLIGHT.get(key):
                raise _ReviewBusy(BUSY_OPEN.format(kind=self._label, id="being opened"))
            _heal(session, self._kind)
            _check_free(state_of(session), self._kind, self._label)
            _INFLIGHT[key] = 1

    def __exit__(self, *exc: object) -> None:
        with session_lock(self._session.id):
            _INFLIGHT.pop(self._key, None)


def graph_record(runtime: Any, session: Session) -> list[NewEvent]:
    """The ``fsm/graph`` record to write with a new review request of ``session`` (stage, plan,
    tool or budget review): the stage switch's ``graph_record`` (``runtime.service("stage")``)
    while the log records no graph, so a session whose reviews are never stage reviews is
    checked against a changed graph too; ``[]`` without a stage switch or once recorded.
    Raises ``GraphChangedError`` for another recorded graph (``StageController.graph_record``)."""
    stage = runtime.service("stage") if runtime is not None else None
    record = getattr(stage, "graph_record", None)
    return list(record(session)) if callable(record) else []


def open_request(session: Session, ticket: Ticket, call_id: str, label: str,
                 extra: Sequence[NewEvent] = ()) -> ReviewRecord:
    """Log ``fsm/review/request`` (after ``extra``, e.g. ``fsm/graph``) in one conditional batch,
    re-checking the one-open-review rule against the log; returns the folded record. The running
    call's ``tool/call``, when the runtime left it pending (``runtime.call_record``), leads the
    batch. For a kind reviewed per call (``PER_CALL_KINDS``), a live review of the same call that
    another writer logged meanwhile is joined instead (its record returned, nothing written): one
    call never gets two reviews, so two approvals never let it run twice."""
    turn, step = step_of(session)
    rid = "rv_" + os.urandom(10).hex()
    data = {"id": rid, "callId": call_id, "kind": ticket.kind, "from": ticket.from_, "target": ticket.target,
            "options": list(ticket.options), "shape": ticket.shape, "handoffPath": ticket.handoff_path,
            "payloadSha256": ticket.payload_sha256, "turn": turn, "step": step, **request_data(ticket)}
    call = pending_call(session)  # the call's tool/call, when the runtime left it to this batch
    with session_lock(session.id):
        _heal(session, ticket.kind)
        while True:
            state = state_of(session)
            joined = _review_of_call(session, ticket, call_id, label)
            if joined is not None:
                if call is not None:
                    call.ensure_written(look=True)  # the other writer logged it with its request
                return joined
            _check_free(state, ticket.kind, label)
            lead = call.lead(session) if call is not None else []
            try:
                events = session.append_many([*lead, *extra, NewEvent(REVIEW_REQUEST, data, ignorable=True)],
                                             expect_last_seq=session.last_seq)
                break
            except AppendConflictError:
                continue
            except LogWriteError:
                if call is not None and lead:
                    call.failed()
                raise
        if call is not None and lead:
            call.wrote(events)
        return session.read(REVIEW_FOLD).records[rid]


def _review_of_call(session: Session, ticket: Ticket, call_id: str, label: str) -> ReviewRecord | None:
    """For a kind reviewed per call, the review another writer logged for this very call, as a
    resume finds it (``existing``: open, answered, or used in this step): joined instead of a
    second one. ``_ReviewBusy`` when it was asked about other arguments."""
    if ticket.kind not in PER_CALL_KINDS or not call_id:
        return None
    try:
        return existing(session, ticket.kind, call_id, ticket.payload_sha256)
    except ReviewPayloadChangedError:
        record = state_of(session).by_call(call_id, ticket.kind)
        raise _ReviewBusy(BUSY_OPEN.format(kind=label, id=record.id if record else "?")) from None


def redeemed_spec(review_id: str, applied: bool, reason: str | None = None) -> NewEvent:
    """The ``fsm/review/redeemed`` event."""
    return NewEvent(REVIEW_REDEEMED, {"id": review_id, "applied": applied, "reason": reason}, ignorable=True)


def call_closed_specs(session: Session, call_id: str) -> list[NewEvent]:
    """``fsm/review/redeemed {applied: false, reason: call-closed}`` for each live review (open,
    or approved and not used) of tool call ``call_id``: written with a result that settles the
    call without its review, so the review neither waits nor blocks the next one of its kind."""
    state = state_of(session)
    return [redeemed_spec(rid, False, CALL_CLOSED) for rid in state.live
            if state.records[rid].call_id == call_id]


def redeem(session: Session, record: ReviewRecord,
           check: Callable[[], str | None]) -> tuple[bool, Redemption]:
    """Redeem the approved review ``record`` once, for every kind: under the session lock, fold;
    if it is redeemed already return ``(False, that redemption)`` (another worker won: do not
    act); else ``check()`` names why it must not apply (``stage-changed``, ``edge-removed``,
    ``payload-changed``…, None: apply) and ``fsm/review/redeemed`` is appended conditionally on
    the folded end; a lost race re-folds and decides again (``pending.redeem_once``). Returns
    ``(True, the redemption this call wrote)``: act only when it is ``applied``. Raises
    ``LogWriteError`` when the log refuses the write (nothing redeemed: a later call retries)."""
    def unredeemed(s: Session) -> ReviewRecord | None:
        return None if record.id in state_of(s).redeemed else record

    def write(rec: ReviewRecord, expect: int) -> None:
        reason = check()
        session.append_many([redeemed_spec(rec.id, reason is None, reason)], expect_last_seq=expect)

    with session_lock(session.id):
        mine = redeem_once(session, unredeemed, write)
        red = state_of(session).redeemed.get(record.id)
    assert red is not None
    return mine, red


def settle(session: Session, record: ReviewRecord, moved: Callable[[], str | None]) -> Outcome | None:
    """The ``Outcome`` of an answered review (None while open). An approval not yet redeemed
    whose world moved (``moved()`` names a reason) is redeemed ``applied: false`` now (through
    ``redeem``: of racing workers, one writes it)."""
    with session_lock(session.id):
        state = state_of(session)
        answer = state.answered.get(record.id)
        if answer is None:
            return None
        red = state.redeemed.get(record.id)
        if answer.outcome == "approve" and red is None and moved() is not None:
            red = redeem(session, record, moved)[1]
        return Outcome(record, answer, red)


def _record(session: Session, record: ReviewRecord, outcome: str, *, option: str | None = None,
            feedback: str | None = None, by: str, moved: Callable[[], str | None]) -> Outcome:
    """Log the answer (conditional); an answer logged first by someone else wins. The outcome
    is then settled (``settle``): ``moved()`` is asked again after the append, since what it reads
    (the controller closed by a reload, a guard's predicate) is not guarded by the session lock.
    Raises ``ReviewAlreadyAnsweredError`` when the review was closed unanswered meanwhile (its
    call settled by another writer: ``call-closed``)."""
    with session_lock(session.id):
        while True:
            state = state_of(session)
            if record.id in state.answered or record.id in state.redeemed:
                break
            batch = [answer_spec(record, outcome, feedback=feedback, option=option, by=by)]
            if outcome == "approve":
                reason = moved()
                if reason is not None:
                    batch.append(redeemed_spec(record.id, False, reason))
            try:
                session.append_many(batch, expect_last_seq=session.last_seq)
                break
            except AppendConflictError:
                continue
        out = settle(session, record, moved)
    if out is None:  # closed unanswered meanwhile: its call was settled by another writer
        raise ReviewAlreadyAnsweredError(f"review {record.id} was closed before an answer could be logged "
                                         "(its call was settled elsewhere); nothing was applied")
    return out


def _now(session: Session) -> int:
    """Now by the clock that stamped the session's events (``log_now``)."""
    return log_now(session.log)


def _expired(session: Session, record: ReviewRecord, outcome: str,
             never: Callable[[], str | None]) -> tuple[Outcome | None, str | None]:
    """The review's rules on a channel's (nobody's) ``outcome`` now, by the log's clock: past the
    deadline, its ``onDeadline`` answer (``by: "deadline"``; an expired review never approves) is
    logged and returned as ``(outcome, None)``; else ``(None, refusal or None)``."""
    if record.rules is None:  # no rules: anyone answers, no deadline (what decide finds for them)
        return None, None
    verdict = decide(session, record, outcome, reviewer=None, reviewers=None, vote=False,
                     now_ms=_now(session))
    if verdict.expiry is None:
        return None, verdict.refusal
    expiry = verdict.expiry.data
    return _record(session, record, expiry["outcome"], option=expiry["option"], by=expiry["by"],
                   feedback=expiry["feedback"], moved=never), None


Interpret = Callable[[list[Answer]], tuple[str, str | None, str | None]]
"""Maps the channel's answers to ``(outcome, option label, feedback)``."""


async def conduct(session: Session, record: ReviewRecord, *, ask: Callable[[], Awaitable[list[Answer]]],
                  interpret: Interpret, moved: Callable[[], str | None]) -> Outcome:
    """Ask the channel about ``record`` (unless already answered) and log the answer.

    Past the review's deadline its ``onDeadline`` answer is logged instead (before asking, and
    when the channel answers late). Raises ``ReviewPending`` when the channel suspends, and when
    it approves a review whose logged rules need a named reviewer (approvers, a quorum,
    not_requester: a channel's answer is nobody's); re-raises ``ReviewDismissed``,
    ``asyncio.CancelledError`` and channel failures after logging a ``dismiss`` answer
    (``by: "cancel"`` for a cancellation); raises ``RecordShapeError`` after logging a
    ``dismiss`` when the channel's feedback is refused (``feedback_problem``: too long, control
    characters or escape sequences).
    """
    done = settle(session, record, moved)
    if done is not None:
        return done
    never: Callable[[], str | None] = lambda: None  # noqa: E731
    try:
        expired, _refusal = _expired(session, record, "dismiss", never)
        if expired is not None:
            return expired
        try:
            try:
                answers = await ask()
            finally:
                session.mark_stale()  # time passed outside: the answer is decided on a fresh read
        except ReviewSuspended:
            raise ReviewPending(record.id, record.call_id, record.kind) from None
        except asyncio.CancelledError:
            _record(session, record, "dismiss", by="cancel", moved=never)
            raise
        except ReviewDismissed:
            _record(session, record, "dismiss", by="channel", moved=never)
            raise
        except Exception:
            _record(session, record, "dismiss", by="channel", moved=never)
            raise
        # feedback is refused as answer_review refuses a reviewer's: a channel failure, so the
        # review is dismissed (never left open) and nothing of it reaches the model
        problem = next((p for a in answers if isinstance(a.custom, str)
                        and (p := feedback_problem(a.custom)) is not None), None)
        if problem is not None:
            _record(session, record, "dismiss", by="channel", moved=never)
            raise RecordShapeError(f"review {record.id}: the channel's feedback {problem}; "
                                   "the review was dismissed")
        try:
            outcome, option, feedback = interpret(answers)
        except Exception:
            _record(session, record, "dismiss", by="channel", moved=never)
            raise
        expired, refusal = _expired(session, record, outcome, never)
        if expired is not None:
            return expired
        if outcome == "approve" and refusal is not None:
            # The rules name approvers (or a quorum, or not_requester): a channel's answer is
            # nobody's, so it cannot approve; the review stays open for a named reviewer.
            raise ReviewPending(record.id, record.call_id, record.kind)
        return _record(session, record, outcome, option=option, feedback=feedback, by="channel", moved=moved)
    except LogWriteError as error:
        # The answer (or the redemption with it) was not logged: the review would stay open
        # with nobody left to answer it. The next call of this kind logs a dismiss for it.
        with session_lock(session.id):
            _UNWRITTEN[(session.id, record.id)] = (record.kind, str(error) or type(error).__name__)
        raise
