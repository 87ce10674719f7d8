"""``ask`` rules of the tool policy: a call runs only after a human approves it (design-b §3).

A durable review of kind ``"tool"`` through review-core's ``review_flow``: ``fsm/review/request
{id, callId, kind: tool, from: <stage>, target: <tool>, options: [Approve, Deny], shape: null,
handoffPath: null, payloadSha256: sha256(name + "\n" + arguments), turn, step}``, the answer
(approve / keep / dismiss; ``answer_review`` / ``fsm-stage review`` answer it too), and for an
approval ``fsm/review/redeemed {applied: true}`` right before the tool runs. A suspending
channel raises ``ReviewPending(kind="tool")``; the resumed call reads the logged answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from fsm_stage.errors import ReviewBusy, ReviewPayloadChangedError
from fsm_stage.policy._gate import Decision, PolicyState
from fsm_stage.reviews import _flow as flow
from fsm_stage.reviews._channel import Answer, Option, Question, ReviewChannel, ReviewDismissed
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.tools import ToolCall

TOOL_REVIEW_KIND = "tool"
APPROVE = "Approve"
DENY = "Deny"


def payload_sha256(call: ToolCall) -> str:
    """The hash an answer is bound to: the tool name and its exact argument text."""
    return hashlib.sha256(f"{call.name}\n{call.arguments}".encode()).hexdigest()


def _interpret(question_id: str) -> flow.Interpret:
    def interpret(answers: Sequence[Answer]) -> tuple[str, str | None, str | None]:
        mine = [a for a in answers if a.id == question_id]
        if len(mine) == 1 and tuple(mine[0].selected) == (APPROVE,) and mine[0].custom is None:
            return "approve", APPROVE, None
        return "keep", DENY, mine[0].custom if len(mine) == 1 else None
    return interpret


async def review_call(channel: ReviewChannel | None, agent: Agent, call: ToolCall, decision: Decision,
                      state: PolicyState, *, turn: int | None, step: int | None,
                      signal: Any = None) -> Decision | None:
    """Ask a human about ``call`` (or read the logged answer of a resumed call): None when
    approved (the caller runs it), else the ``deny`` decision to ``refuse`` it with. Raises
    ``ReviewPending`` when the channel suspends."""
    session = agent.session
    digest = payload_sha256(call)
    try:
        record = flow.existing(session, TOOL_REVIEW_KIND, call.id, digest)
    except ReviewPayloadChangedError:
        return Decision("deny", f"{decision.rule}: the call changed since it was reviewed", decision.scope)
    if record is None:
        if channel is None:
            return Decision("deny", f"{decision.rule} (no review channel to ask)", decision.scope)
        ticket = flow.Ticket(TOOL_REVIEW_KIND, state.stage or "", call.name, (APPROVE, DENY), None, None,
                             digest)
        try:
            record = flow.open_request(session, ticket, call.id, "tool")
        except ReviewBusy as busy:
            return Decision("deny", f"{decision.rule}: {busy.text}", decision.scope)
    question = Question(f"tool-review-{call.id}", "Tool call",
                        f'Run tool "{call.name}" ({decision.rule}) {_where(state, decision)}?',
                        (Option(APPROVE, "Run the call."), Option(DENY, "Refuse it; the model is told.")),
                        detail=f"```json\n{call.arguments}\n```",
                        intent={"kind": "tool-review", "approve": APPROVE})

    async def ask() -> list[Answer]:
        if channel is None:
            raise ReviewDismissed()  # resumed without a channel: the logged answer decides
        return await channel.ask([question], agent, signal=signal)

    try:
        outcome = await flow.conduct(session, record, ask=ask, interpret=_interpret(question.id),
                                     moved=lambda: None)
    except ReviewDismissed:
        return Decision("deny", f"{decision.rule}: the reviewer dismissed the review", decision.scope)
    if outcome.answer.outcome == "approve":
        if outcome.redemption is None:
            session.append_many([flow.redeemed_spec(record.id, True)])
        elif not outcome.redemption.applied:
            return Decision("deny", f"{decision.rule}: the approval was not applied", decision.scope)
        return None
    feedback = outcome.answer.feedback
    why = "dismissed" if outcome.answer.outcome == "dismiss" else "did not approve"
    return Decision("deny", f"{decision.rule}: the reviewer {why}" + (f" ({feedback})" if feedback else ""),
                    decision.scope)


def _where(state: PolicyState, decision: Decision) -> str:
    return "while plan mode is on" if decision.scope == "plan mode" else f'in stage "{state.stage}"'
