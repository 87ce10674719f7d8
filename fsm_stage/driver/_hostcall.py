"""Host tool calls: the tool policy's verdict before the host runs one (``authorize``) and the
record of what it returned (``record_tool_result``).

A call an ``ask`` rule reviews is logged with its review request (its ``tool/call`` leads the
request's batch, ``runtime.call_record``), so a review that waits for a human outlives the
worker: the call is suspended in the log (``CallState.suspended``), crash repair leaves it open,
and ``authorize`` of the same call, in this process or another, reads the logged answer. An
approval is redeemed (used) when ``authorize`` returns None; a call whose approval was used and
which has no result after a restart may have run: it gets ``TOOL_OUTCOME_UNKNOWN`` and is not
authorized again. ``StagedSession.authorize`` / ``record_tool_result`` use these functions.
"""

from __future__ import annotations

from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.driver._openstep import CallState
from fsm_stage.driver._repair import OUTCOME_UNKNOWN
from fsm_stage.log.events import NewEvent
from fsm_stage.reviews._flow import redeem, state_of
from fsm_stage.reviews._fold import CALL_CLOSED
from fsm_stage.runtime import wording
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.call_record import PendingCall, run_deferred
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolResult, call_data, result_data, tool_result_message

__all__ = ["authorize", "close_review", "left_to_host", "memo_key", "result_events"]


async def authorize(runtime: Runtime, agent: Agent, state: CallState, *,
                    signal: AbortSignal | None) -> ToolResult | None:
    """The policy's verdict on the host call ``state`` (of the open step): None — run it; else
    its refusal, logged. A call not logged yet goes to the runtime's gates with its
    ``tool/call`` pending, so a review writes it with the request; a suspended call (logged,
    its review asked before) is decided by the logged answer, its refusal logged as its
    ``tool/result``. Raises ``ReviewPending`` while the review waits (nothing more written)."""
    session, call = agent.session, state.call
    turn, step = state.turn, state.step
    if state.call_seq is None:
        pending = PendingCall(session, NewEvent(TOOL_CALL, call_data(call, turn, step)))
        return await run_deferred(pending, runtime.authorize(agent, call, turn=turn, step=step,
                                                             signal=signal))
    if _approval_used(session, state):  # authorized before (another process): it may have run
        text = wording.text("repair.outcome_unknown")
        unknown = ToolResult(call, text, True, message=tool_result_message(call, text, True))
        data = result_data(unknown, turn, step)
        data["error"] = dict(OUTCOME_UNKNOWN)
        session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[state.call_seq])
        return unknown
    refused = await runtime.authorize(agent, call, turn=turn, step=step, signal=signal, log=False)
    if refused is not None:
        session.append_many(result_events(state, refused, at=state.call_seq))
    return refused


def result_events(state: CallState, result: ToolResult, *, at: int) -> list[NewEvent]:
    """The events recording ``result`` for ``state``'s call: its ``tool/result`` pointing at the
    logged ``tool/call``, or, for a call not logged yet, ``tool/call`` (to be written at seq
    ``at``) + ``tool/result``."""
    data = result_data(result, state.turn, state.step)
    if state.call_seq is not None:
        return [NewEvent(TOOL_RESULT, data, "append", [state.call_seq])]
    return [NewEvent(TOOL_CALL, call_data(state.call, state.turn, state.step)),
            NewEvent(TOOL_RESULT, data, "append", [at])]


def close_review(session: Session, state: CallState) -> None:
    """Close the review bound to ``state``'s call when it is still live (open, or approved and
    not used): redeemed ``applied: false``, ``call-closed`` — the call has its result, so the
    review neither waits in the inbox nor blocks the session's next tool review."""
    if state.review_id is None:
        return
    reviews = state_of(session)
    if state.review_id in reviews.live:
        redeem(session, reviews.records[state.review_id], lambda: CALL_CLOSED)


def memo_key(state: CallState) -> str:
    """The key under which the driver remembers that it let ``state``'s call run: the call id
    within its turn and step (a provider may reuse a call id in a later step; that call is
    judged anew)."""
    return repr((state.turn, state.step, state.call.id))


def left_to_host(runtime: Runtime, session: Session, state: CallState) -> bool:
    """Whether ``resume`` leaves the suspended call ``state`` to the host: its tool is not
    registered on the runtime (the host runs it) and its review approved it, so ``authorize``
    then running it is the host's part. Refusals and unanswered reviews resume as any call's."""
    if state.call.name in runtime.tools or state.review_id is None:
        return False
    answer = state_of(session).answered.get(state.review_id)
    return answer is not None and answer.outcome == "approve"


def _approval_used(session: Session, state: CallState) -> bool:
    redemption = state_of(session).redeemed.get(state.review_id or "")
    return redemption is not None and redemption.applied

