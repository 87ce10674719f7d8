"""Host tool calls: the tool policy's verdict before the host runs one (``authorize``) and the
record of what it returned (``record_tool_result``).

A call is logged (``tool/call``) before the host runs it, so a crash mid-run says "outcome
unknown" and the call is never run again. A call an ``ask`` rule reviews is logged with its
review request (its ``tool/call`` leads the request's batch, ``runtime.call_record``), so a
review that waits for a human outlives the worker: the call is suspended in the log
(``CallState.suspended``), crash repair leaves it open, and ``authorize`` of the same call, in
this process or another, reads the logged answer. A call ``authorize`` let run once (its
approval used, or allowed outright) and which has no result may have run: ``authorize`` again
gets ``TOOL_OUTCOME_UNKNOWN``, never a second run. ``StagedSession.authorize`` /
``record_tool_result`` / ``resume`` use these functions.
"""

from __future__ import annotations

from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.driver._openstep import CallState
from fsm_stage.driver._repair import OUTCOME_UNKNOWN
from fsm_stage.errors import AppendConflictError, DriverStateError
from fsm_stage.log.events import NewEvent
from fsm_stage.reviews._flow import call_closed_specs, state_of
from fsm_stage.runtime import wording
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.call_record import PendingCall, run_deferred
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolResult, call_data, result_data, tool_result_message

__all__ = ["authorize", "by_host", "left_to_host", "result_events"]


async def authorize(runtime: Runtime, agent: Agent, state: CallState, *,
                    signal: AbortSignal | None) -> ToolResult | None:
    """The policy's verdict on the host call ``state`` (of the open step): None — run it (its
    ``tool/call`` is logged); else its refusal, logged. A call not logged yet goes to the
    runtime's gates with its ``tool/call`` pending, so a review writes it with the request; a
    suspended call (its review asked before) is decided by the logged answer; a call let run
    before gets ``TOOL_OUTCOME_UNKNOWN``. Raises ``ReviewPending`` while the review waits
    (nothing more written); ``DriverStateError`` when another writer settled the call first."""
    session, call = agent.session, state.call
    turn, step = state.turn, state.step
    if call.name in runtime.tools:  # a runtime tool the host checks only: logged with its result
        return await runtime.authorize(agent, call, turn=turn, step=step, signal=signal)
    spec = NewEvent(TOOL_CALL, call_data(call, turn, step))
    if state.call_seq is None:
        seen = session.last_seq  # the log as the caller's view of the call was folded
        pending = PendingCall(session, spec, shared=True)
        refused = await run_deferred(pending, runtime.authorize(agent, call, turn=turn, step=step,
                                                                signal=signal))
        if refused is None:  # dispatched: logged before the host runs it
            reviewed = _reviewed(session, call.id)
            pending.ensure_written(look=reviewed, seen=None if reviewed else seen)
            if pending.found and not reviewed:
                raise _taken(call.id)
        return refused
    if not _awaits_review(session, state):
        return _outcome_unknown(session, state)
    pending = PendingCall(session, spec, seq=state.call_seq, shared=True)
    seen = session.last_seq
    refused = await run_deferred(pending, runtime.authorize(agent, call, turn=turn, step=step, signal=signal))
    if refused is None:
        redemption = state_of(session).redeemed.get(state.review_id or "")
        closed = redemption is not None and not redemption.applied  # by another writer
        if redemption is None:
            # let run without using its approval (the policy in force allows the tool now): its
            # review is closed where the log still ends as seen, so the call is let run once
            try:
                session.append_many(call_closed_specs(session, call.id), expect_last_seq=seen)
            except AppendConflictError:
                closed = True
        if closed:
            raise _taken(call.id)
    return refused


def result_events(session: Session, state: CallState, result: ToolResult, *, at: int) -> list[NewEvent]:
    """The events recording ``result`` for ``state``'s call: its ``tool/result`` pointing at the
    logged ``tool/call`` (with the redemptions that close its live reviews), or, for a call not
    logged yet, ``tool/call`` (to be written at seq ``at``) + ``tool/result``."""
    data = result_data(result, state.turn, state.step)
    if state.call_seq is not None:  # a review bound to the call may still be live: closed with it
        closing = call_closed_specs(session, state.call.id) if state.review_id is not None else []
        return [NewEvent(TOOL_RESULT, data, "append", [state.call_seq]), *closing]
    return [NewEvent(TOOL_CALL, call_data(state.call, state.turn, state.step)),
            NewEvent(TOOL_RESULT, data, "append", [at])]


def by_host(runtime: Runtime, state: CallState) -> bool:
    """Whether the host may ``authorize`` / record the logged call ``state``: a call of its own
    tools (not registered on the runtime). A runtime tool's logged call is ``run_tool``'s
    (running, suspended for ``resume``, or run in another worker)."""
    return state.call.name not in runtime.tools


def left_to_host(runtime: Runtime, session: Session, state: CallState) -> bool:
    """Whether ``resume`` leaves the suspended call ``state`` to the host: its tool is not
    registered on the runtime (the host runs it) and its review approved it, so ``authorize``
    then running it is the host's part. Refusals and unanswered reviews resume as any call's."""
    if state.call.name in runtime.tools or state.review_id is None:
        return False
    answer = state_of(session).answered.get(state.review_id)
    return answer is not None and answer.outcome == "approve"


def _reviewed(session: Session, call_id: str) -> bool:
    """Whether a review names ``call_id`` (its ``tool/call`` may be logged by another writer)."""
    return state_of(session).by_call(call_id, "tool") is not None


def _awaits_review(session: Session, state: CallState) -> bool:
    """A logged call whose review is not redeemed: ``authorize`` reads its answer. Not so for
    a call an earlier ``authorize`` let run (allowed, its approval redeemed, or its review
    closed when the policy in force allowed it): it may have run."""
    if state.review_id is None:
        return False
    return state.review_id not in state_of(session).redeemed


def _outcome_unknown(session: Session, state: CallState) -> ToolResult:
    """Record ``TOOL_OUTCOME_UNKNOWN`` for a call let run before that has no result (written only
    if no other writer appended since the caller's view; else ``DriverStateError``)."""
    call, seq = state.call, state.call_seq
    assert seq is not None
    text = wording.text("repair.outcome_unknown")
    unknown = ToolResult(call, text, True, message=tool_result_message(call, text, True))
    data = result_data(unknown, state.turn, state.step)
    data["error"] = dict(OUTCOME_UNKNOWN)
    last = session.last_seq
    try:
        session.append_many([NewEvent(TOOL_RESULT, data, "append", [seq])], expect_last_seq=last)
    except AppendConflictError:
        raise _taken(call.id) from None
    return unknown


def _taken(call_id: str) -> DriverStateError:
    """Another writer of the session authorized or settled the call first: it is not run here."""
    return DriverStateError(f"authorize: tool call {call_id!r} was authorized or settled by another "
                            "writer of this session; it is not run twice")
