"""``ask`` rules of the tool policy: a call runs only after a human approves it (design-b §3).

A durable review of kind ``"tool"``: ``fsm/review/request {id, callId, kind: tool, from:
<stage>, target: <tool>, options, shape: null, handoffPath: null, payloadSha256: sha256(name
+ "\\n" + arguments), turn, step}``, then ``fsm/review/answer`` (approve / keep / dismiss) and,
for an approval, ``fsm/review/redeemed {applied: true}`` right before the tool runs. A channel
that raises ``ReviewSuspended`` leaves the review open: ``ReviewPending(kind="tool")`` is raised
and a resumed call (same call id) reads the logged answer instead of asking again.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fsm_stage.errors import ReviewPending, ReviewSuspended
from fsm_stage.log.events import NewEvent
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.messages import new_id
from fsm_stage.runtime.openstep import REVIEW_ANSWER, REVIEW_REQUEST
from fsm_stage.runtime.policy import Decision, PolicyState
from fsm_stage.runtime.review import Option, Question, ReviewChannel, ReviewDismissed
from fsm_stage.runtime.tools import ToolCall

REVIEW_REDEEMED = "fsm/review/redeemed"
TOOL_REVIEW_KIND = "tool"
APPROVE = "Approve"
DENY = "Deny"


def payload_sha256(call: ToolCall) -> str:
    """The hash an answer is bound to: the tool name and its exact argument text."""
    return hashlib.sha256(f"{call.name}\n{call.arguments}".encode()).hexdigest()


def _logged(session: Any, call: ToolCall) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The logged tool review of ``call`` (request, answer), newest request first."""
    request = answer = None
    for ev in reversed(session.events):
        data = ev.data if isinstance(ev.data, dict) else {}
        if (
            ev.type == REVIEW_REQUEST
            and data.get("callId") == call.id
            and data.get("kind") == TOOL_REVIEW_KIND
        ):
            request = data
            break
    if request is not None:
        for ev in session.events:
            if ev.type == REVIEW_ANSWER and isinstance(ev.data, dict) and ev.data.get("id") == request["id"]:
                answer = ev.data
                break
    return request, answer


def _answer(review_id: str, outcome: str, feedback: str | None, by: str = "channel") -> NewEvent:
    return NewEvent(
        REVIEW_ANSWER,
        {
            "id": review_id,
            "outcome": outcome,
            "option": APPROVE if outcome == "approve" else None,
            "shape": None,
            "feedback": feedback,
            "by": by,
        },
        ignorable=True,
    )


async def review_call(
    channel: ReviewChannel | None,
    agent: Agent,
    call: ToolCall,
    decision: Decision,
    state: PolicyState,
    *,
    turn: int | None,
    step: int | None,
    signal: Any = None,
) -> Decision | None:
    """Ask a human about ``call`` (or read the logged answer of a resumed call): None when
    approved (the caller runs it), else the ``deny`` decision to ``refuse`` it with. Raises
    ``ReviewPending`` when the channel suspends."""
    session = agent.session
    request, answer = _logged(session, call)
    if request is not None and request.get("payloadSha256") != payload_sha256(call):
        request = answer = None  # a different call under a reused id: ask afresh
    if answer is None:
        if channel is None:
            return Decision("deny", f"{decision.rule} (no review channel to ask)", decision.scope)
        if request is None:
            request = {
                "id": f"rv_{new_id()[:12]}",
                "callId": call.id,
                "kind": TOOL_REVIEW_KIND,
                "from": state.stage,
                "target": call.name,
                "options": [APPROVE, DENY],
                "shape": None,
                "handoffPath": None,
                "payloadSha256": payload_sha256(call),
                **({"turn": turn} if turn is not None else {}),
                **({"step": step} if step is not None else {}),
            }
            session.append(REVIEW_REQUEST, request, ignorable=True)
        question = Question(
            f"tool-review-{call.id}",
            "Tool call",
            f'Run tool "{call.name}" ({decision.rule}) {_where(state, decision)}?',
            (Option(APPROVE, "Run the call."), Option(DENY, "Refuse it; the model is told.")),
            detail=f"```json\n{call.arguments}\n```",
            intent={"kind": "tool-review", "approve": APPROVE},
        )
        try:
            answers = await channel.ask([question], agent, signal=signal)
        except ReviewSuspended:
            raise ReviewPending(request["id"], call.id, TOOL_REVIEW_KIND) from None
        except ReviewDismissed:
            session.append_many([_answer(request["id"], "dismiss", None)])
            answers = []
        else:
            mine = [a for a in answers if a.id == question.id]
            approved = len(mine) == 1 and tuple(mine[0].selected) == (APPROVE,) and mine[0].custom is None
            feedback = mine[0].custom if len(mine) == 1 else None
            session.append_many([_answer(request["id"], "approve" if approved else "keep", feedback)])
        _, answer = _logged(session, call)
    assert request is not None
    if answer is not None and answer.get("outcome") == "approve":
        session.append(
            REVIEW_REDEEMED, {"id": request["id"], "applied": True, "reason": None}, ignorable=True
        )
        return None
    feedback = answer.get("feedback") if answer is not None else None
    rule = f"{decision.rule}: the reviewer did not approve" + (f" ({feedback})" if feedback else "")
    return Decision("deny", rule, decision.scope)


def _where(state: PolicyState, decision: Decision) -> str:
    return "while plan mode is on" if decision.scope == "plan mode" else f'in stage "{state.stage}"'
