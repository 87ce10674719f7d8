"""The controller side of a durable review (design B §4), shared by plan mode and the stage switch.

A reviewed tool call: ``existing(session, kind, call_id)`` finds the review of a resumed call;
otherwise ``reserve(session, kind)`` refuses at once (``ReviewBusy``) while a review of that kind is
open, approved-unredeemed or being opened by another call of this process, ``open_request``
logs ``fsm/review/request`` (re-checking under the session lock, conditional append), and
``conduct`` asks the channel and logs the answer: ``ReviewSuspended`` → ``ReviewPending``;
dismissal, cancellation and channel failures → a ``dismiss`` answer, then the exception goes
on; an answer someone else logged first wins. ``settle`` turns a logged answer into an
``Outcome`` (an approval whose world moved is redeemed ``applied: false`` in the same batch).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Final

import attrs

from fsm_stage.constants import REVIEW_REDEEMED, REVIEW_REQUEST, STEP_START, TOOL_RESULT, TURN_START
from fsm_stage.driver._openstep import answered_call_id
from fsm_stage.driver._pending import session_lock
from fsm_stage.errors import AppendConflictError, ReviewPayloadChangedError, ReviewPending, ReviewSuspended
from fsm_stage.errors import ReviewBusy as ReviewBusy
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.reviews._answer import answer_spec
from fsm_stage.reviews._channel import Answer, ReviewDismissed
from fsm_stage.reviews._fold import REVIEW_FOLD, Redemption, ReviewAnswer, ReviewRecord, ReviewState
from fsm_stage.runtime.session import Session

__all__ = [
    "BUSY_APPROVED",
    "BUSY_OPEN",
    "Outcome",
    "ReviewBusy",
    "Ticket",
    "conduct",
    "existing",
    "open_request",
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


@attrs.frozen
class Ticket:
    """What a controller asks: kind, from/target, option labels (the keep label last), the
    default shape, the handoff path and the payload hash (``fsm/review/request`` data)."""

    kind: str
    from_: str
    target: str
    options: tuple[str, ...]
    shape: str | None
    handoff_path: str | None
    payload_sha256: str


@attrs.frozen
class Outcome:
    """A settled review: its request, the logged answer and the redemption (None while unused)."""

    record: ReviewRecord
    answer: ReviewAnswer
    redemption: Redemption | None


def state_of(session: Session) -> ReviewState:
    """The review fold of ``session`` after catching up with other writers."""
    session.refresh()
    return session.read(REVIEW_FOLD)


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
    counts, nor one declined (keep / dismiss) whose call already has its ``tool/result``: a model
    or host reusing a call id later is asked afresh, so an old answer is never replayed. A
    repeated resume of a call approved but not yet applied gets the same answer. Raises
    ``ReviewPayloadChangedError`` when the resumed call's payload hashes differently."""
    if not call_id:
        return None
    state = state_of(session)
    record = state.by_call(call_id, kind)
    if record is None or record.id in state.redeemed:
        return None
    answer = state.answered.get(record.id)
    if answer is not None and answer.outcome != "approve" and _settled_after(session, call_id, record.seq):
        return None
    if record is not None and record.payload_sha256 != payload_sha256:
        raise ReviewPayloadChangedError(
            f"review {record.id}: the tool call's {'plan' if kind == 'plan' else 'stage or handoff'} "
            "changed since the review was asked; call the tool again with a new call")
    return record


def _settled_after(session: Session, call_id: str, seq: int) -> bool:
    """Whether a ``tool/result`` for ``call_id`` was logged after seq ``seq``."""
    for event in session.events[seq + 1:]:
        if event.type == TOOL_RESULT and answered_call_id(event) == call_id:
            return True
    return False


def _check_free(state: ReviewState, kind: str, label: str) -> None:
    rec = state.open_of(kind)
    if rec is not None:
        raise ReviewBusy(BUSY_OPEN.format(kind=label, id=rec.id))
    rec = state.pending(kind)
    if rec is not None:
        raise ReviewBusy(BUSY_APPROVED.format(kind=label, id=rec.id))


@contextmanager
def reserve(session: Session, kind: str, label: str) -> Iterator[None]:
    """Refuse (``ReviewBusy``) unless no review of ``kind`` is open, approved-unredeemed or being
    opened by another call in this process; hold that slot until the block exits."""
    key = (session.id, kind)
    with session_lock(session.id):
        if _INFLIGHT.get(key):
            raise ReviewBusy(BUSY_OPEN.format(kind=label, id="being opened"))
        _check_free(state_of(session), kind, label)
        _INFLIGHT[key] = 1
    try:
        yield
    finally:
        with session_lock(session.id):
            _INFLIGHT.pop(key, None)


def open_request(session: Session, ticket: Ticket, call_id: str, label: str,
                 extra: Sequence[NewEvent] = ()) -> ReviewRecord:
    """Log ``fsm/review/request`` (after ``extra``, e.g. ``fsm/graph``) in one conditional batch,
    re-checking the one-open-review rule against the log; returns the folded record."""
    turn, step = step_of(session)
    rid = "rv_" + uuid.uuid4().hex[:20]
    data = {"id": rid, "callId": call_id, "kind": ticket.kind, "from": ticket.from_, "target": ticket.target,
            "options": list(ticket.options), "shape": ticket.shape, "handoffPath": ticket.handoff_path,
            "payloadSha256": ticket.payload_sha256, "turn": turn, "step": step}
    with session_lock(session.id):
        while True:
            _check_free(state_of(session), ticket.kind, label)
            try:
                session.append_many([*extra, NewEvent(REVIEW_REQUEST, data, ignorable=True)],
                                    expect_last_seq=session.last_seq)
                break
            except AppendConflictError:
                continue
        return session.read(REVIEW_FOLD).records[rid]


def redeemed_spec(review_id: str, applied: bool, reason: str | None = None) -> NewEvent:
    """The ``fsm/review/redeemed`` event."""
    return NewEvent(REVIEW_REDEEMED, {"id": review_id, "applied": applied, "reason": reason}, ignorable=True)


def settle(session: Session, record: ReviewRecord, moved: Callable[[], str | None]) -> Outcome | None:
    """The ``Outcome`` of an answered review (None while open). An approval not yet redeemed
    whose world moved (``moved()`` names a reason) is redeemed ``applied: false`` now."""
    with session_lock(session.id):
        state = state_of(session)
        answer = state.answered.get(record.id)
        if answer is None:
            return None
        red = state.redeemed.get(record.id)
        if answer.outcome == "approve" and red is None:
            reason = moved()
            if reason is not None:
                session.append_many([redeemed_spec(record.id, False, reason)])
                red = session.read(REVIEW_FOLD).redeemed.get(record.id)
        return Outcome(record, answer, red)


def _record(session: Session, record: ReviewRecord, outcome: str, *, option: str | None = None,
            feedback: str | None = None, by: str, moved: Callable[[], str | None]) -> Outcome:
    """Log the answer (conditional); an answer logged first by someone else wins."""
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
    assert out is not None
    return out


Interpret = Callable[[list[Answer]], tuple[str, str | None, str | None]]
"""Maps the channel's answers to ``(outcome, option label, feedback)``."""


async def conduct(session: Session, record: ReviewRecord, *, ask: Callable[[], Awaitable[list[Answer]]],
                  interpret: Interpret, moved: Callable[[], str | None]) -> Outcome:
    """Ask the channel about ``record`` (unless already answered) and log the answer.

    Raises ``ReviewPending`` when the channel suspends; re-raises ``ReviewDismissed``,
    ``asyncio.CancelledError`` and channel failures after logging a ``dismiss`` answer
    (``by: "cancel"`` for a cancellation).
    """
    done = settle(session, record, moved)
    if done is not None:
        return done
    never: Callable[[], str | None] = lambda: None  # noqa: E731
    try:
        answers = await ask()
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
    outcome, option, feedback = interpret(answers)
    return _record(session, record, outcome, option=option, feedback=feedback, by="channel", moved=moved)
