"""``ask`` rules of the tool policy: a call runs only after a human approves it (docs/reviews.md).

A durable review of kind ``"tool"`` through review-core's ``review_flow``: ``fsm/review/request
{id, callId, kind: tool, from: <stage>, target: <tool>, options: [Approve, Deny], shape: null,
handoffPath: null, payloadSha256: sha256(name + "\n" + arguments), turn, step}``, the answer
(approve / keep / dismiss; ``answer_review`` / ``fsm-stage review`` answer it too), and for an
approval ``fsm/review/redeemed`` right before the tool runs, written through
``review_flow.redeem`` (a conditional append: of workers resuming one approved call, exactly
one runs it). It is ``applied: false`` with ``stage-changed`` (the stage or plan mode is not the
one the review was asked in) or ``payload-changed`` (the call's name or arguments differ from
what was reviewed). A suspending channel raises ``ReviewPending(kind="tool")``; the resumed call
reads the logged answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fsm_stage.config.policy import OWN_TOOLS
from fsm_stage.config.review_rules import rules_json
from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.errors import RecordShapeError, ReviewPayloadChangedError, ReviewPending, _ReviewBusy
from fsm_stage.log.events import NewEvent
from fsm_stage.policy import _gate as gate
from fsm_stage.policy._gate import CATALOG, Decision, PolicyState
from fsm_stage.prompts import load_catalog
from fsm_stage.reviews import _flow as flow
from fsm_stage.reviews._answer import current_payload_sha256
from fsm_stage.reviews._channel import Answer, Option, Question, ReviewChannel, ReviewDismissed
from fsm_stage.reviews._fold import ReviewAnswer, ReviewRecord, session_reviews, tool_payload_sha256
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.call_record import PendingCall, pending_call, run_deferred
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolResult, call_data, dispatch_tool, result_data

TOOL_REVIEW_KIND = "tool"
APPROVE = "Approve"
DENY = "Deny"


def payload_sha256(call: ToolCall) -> str:
    """The hash an answer is bound to: the tool name and its exact argument text."""
    return tool_payload_sha256(call.name, call.arguments)


def reviewed_from(state: PolicyState) -> str:
    """The review's ``from``: the stage, marked ``+plan`` while plan mode is on (the policy in
    force differs, so an approval given in plan mode is not redeemed outside it, nor back)."""
    return (state.stage or "") + ("+plan" if state.plan_mode else "")


_REDEEM_REFUSALS = {
    "stage-changed": "the stage changed since the call was reviewed; call the tool again to ask anew",
    "payload-changed": "the call differs from the one that was reviewed; call the tool again to ask anew",
    "forked": "the approval belongs to the session this one was forked from; call the tool again",
}


def _interpret(question_id: str) -> flow.Interpret:
    def interpret(answers: Sequence[Answer]) -> tuple[str, str | None, str | None]:
        mine = [a for a in answers if a.id == question_id]
        if len(mine) == 1 and tuple(mine[0].selected) == (APPROVE,) and mine[0].custom is None:
            return "approve", APPROVE, None
        return "keep", DENY, mine[0].custom if len(mine) == 1 else None
    return interpret


def review_question(call: ToolCall, decision: Decision, state: PolicyState) -> Question:
    """The ``tool-review-<call id>`` question a human answers: texts from the ``tool_policy``
    catalog in the graph's language (``review.*``), the arguments as a JSON block, options
    ``Approve`` / ``Deny`` (logged labels, never translated)."""
    language = state.graph.language if state.graph is not None else "en"
    catalog = load_catalog(CATALOG, language)
    where = (catalog.text("review.where_plan_mode") if decision.scope == "plan mode"
             else catalog.text("review.where_stage", stage=state.stage or ""))
    return Question(f"tool-review-{call.id}", catalog.text("review.header"),
                    catalog.text("review.question", tool=call.name, rule=decision.rule, where=where),
                    (Option(APPROVE, catalog.text("review.approve_description")),
                     Option(DENY, catalog.text("review.deny_description"))),
                    detail=f"```json\n{call.arguments}\n```",
                    intent={"kind": "tool-review", "approve": APPROVE})


async def review_call(channel: ReviewChannel | None, agent: Agent, call: ToolCall, decision: Decision,
                      state: PolicyState, *, turn: int | None, step: int | None,
                      signal: Any = None, graph: Callable[[], list[NewEvent]] = list) -> Decision | None:
    """Ask a human about ``call`` (or read the logged answer of a resumed call): None when
    approved (the caller runs it), else the ``deny`` decision to ``refuse`` it with. Raises
    ``ReviewPending`` when the channel suspends. Reads the log once until the reviewer is
    asked and once after (``Session.one_refresh``). ``graph()``: the ``fsm/graph`` event to
    write with a new request (``graph_events``)."""
    with agent.session.one_refresh():
        return await _review_call(channel, agent, call, decision, state, turn=turn, step=step, signal=signal,
                                  graph=graph)


def graph_events(runtime: Runtime, agent: Agent) -> Callable[[], list[NewEvent]]:
    """``flow.graph_record`` for ``agent``'s session, when called: a session that only ever
    reviews tool calls records its graph too, so opening it later under a changed graph is
    refused."""
    return lambda: flow.graph_record(runtime, agent.session)


async def _review_call(channel: ReviewChannel | None, agent: Agent, call: ToolCall, decision: Decision,
                       state: PolicyState, *, turn: int | None, step: int | None,
                       signal: Any = None, graph: Callable[[], list[NewEvent]] = list) -> Decision | None:
    session = agent.session
    digest = payload_sha256(call)
    try:
        record = flow.existing(session, TOOL_REVIEW_KIND, call.id, digest)
    except ReviewPayloadChangedError:
        stale = flow.state_of(session).by_call(call.id, TOOL_REVIEW_KIND)
        if stale is not None and _approved_unused(session, stale):
            flow.redeem(session, stale, lambda: "payload-changed")
        return _unapproved(decision, ": the call changed since it was reviewed")
    if record is None:
        if channel is None:
            return _unapproved(decision, " (no review channel to ask)")
        rules = rules_json(state.graph.review) if state.graph is not None else None
        ticket = flow.Ticket(TOOL_REVIEW_KIND, reviewed_from(state), call.name, (APPROVE, DENY), None, None,
                             digest, rules, call.arguments)
        try:
            record = flow.open_request(session, ticket, call.id, "tool", graph())
        except _ReviewBusy as busy:
            return _unapproved(decision, f": {busy.text}")
    question = review_question(call, decision, state)

    async def ask() -> list[Answer]:
        if channel is None:
            raise ReviewDismissed()  # resumed without a channel: the logged answer decides
        return await channel.ask([question], agent, signal=signal)

    try:
        outcome = await flow.conduct(session, record, ask=ask, interpret=_interpret(question.id),
                                     moved=lambda: None)
    except ReviewDismissed:
        return _unapproved(decision, ": the reviewer dismissed the review")
    except RecordShapeError as refused:  # the channel's feedback was refused: dismissed, so denied
        return _unapproved(decision, f": {refused}")
    except ReviewPending:
        raise  # suspended: the call waits for its answer
    except Exception as failed:  # the channel failed (the review was dismissed): denied, as goto_stage is
        why = str(failed) or type(failed).__name__
        return _unapproved(decision, f": the review failed ({why})")
    if outcome.answer.outcome == "approve":
        def check() -> str | None:
            if reviewed_from(state) != record.from_:
                return "stage-changed"
            logged = current_payload_sha256(session, record)  # the logged call (None: not logged)
            if record.payload_sha256 != digest or logged not in (None, digest):
                return "payload-changed"
            return None

        if outcome.redemption is not None:  # redeemed before this call (another worker, a retry)
            mine, red = False, outcome.redemption
        else:
            mine, red = flow.redeem(session, record, check)
        if mine and red.applied:
            return None  # this call redeemed it: run the tool, exactly once across workers
        if red.applied:
            why = "the approval was used already (the approved call ran in another worker)"
        else:
            why = _REDEEM_REFUSALS.get(red.reason or "", f"the approval was not applied ({red.reason})")
        return _unapproved(decision, f": {why}")
    return _unapproved(decision, f": {_answered(outcome.answer)}")


def _answered(answer: ReviewAnswer) -> str:
    """How a reviewer declined: ``the reviewer did not approve`` / ``dismissed`` (+ feedback)."""
    why = "dismissed" if answer.outcome == "dismiss" else "did not approve"
    return f"the reviewer {why}" + (f" ({answer.feedback})" if answer.feedback else "")


def _declined(runtime: Runtime, agent: Agent | None, call: ToolCall,
              found: tuple[Decision, PolicyState] | None) -> tuple[Decision, PolicyState] | None:
    """The refusal of a call whose own review a human answered without approving (keep,
    dismiss) and which has no result yet, when the policy in force (``found``) would let it run:
    the answer binds the call it was given for, so plan mode turned off or a graph that now
    allows the tool does not run that call (a new call of the tool is the policy's)."""
    if agent is None or call.name in OWN_TOOLS:
        return None
    # a call that has a review was suspended, and whoever resumes it has read the log since: the
    # view at hand says whether to read the log for its answer (most calls have none)
    if session_reviews(agent.session).by_call(call.id, TOOL_REVIEW_KIND) is None:
        return None
    answer = flow.declined(agent.session, TOOL_REVIEW_KIND, call.id)
    if answer is None:
        return None
    state = found[1] if found is not None else gate.unrestricted_state(runtime)
    decision = Decision("deny", _answered(answer), found[0].scope if found is not None else "stage",
                        declined=(answer.outcome, answer.feedback))
    return decision, state


def _unapproved(decision: Decision, why: str) -> Decision:
    """The ``deny`` of an ``ask`` call the review did not approve: ``decision``'s rule + ``why``."""
    return Decision("deny", decision.rule + why, decision.scope, unapproved=True)


def _approved_unused(session: Session, record: ReviewRecord) -> bool:
    """Whether ``record`` was approved and its approval is not used yet."""
    state = flow.state_of(session)
    answer = state.answered.get(record.id)
    return answer is not None and answer.outcome == "approve" and record.id not in state.redeemed


class PolicyGate:
    """The tool policy as the runtime's ``ToolGate``: the stage's and plan mode's rules decide
    each call on its complete arguments (``authorize``); a denied call runs nothing and gets
    an error result; an ``ask`` call runs only after the review channel approves it
    (``ReviewPending`` when the channel suspends).

    The stage switch and plan mode each register one, carrying their ``policy_source`` (a
    ``StagePolicySource`` / ``PlanPolicySource``): the policy reads both sources from the
    runtime's gates, and only the first ``PolicyGate`` registered decides, so a call is
    judged once by the combined rules."""

    def __init__(self, policy_source: gate.StagePolicySource | gate.PlanPolicySource) -> None:
        self.policy_source = policy_source

    def _leads(self, runtime: Runtime) -> bool:
        return next((g for g in runtime.tool_gates if isinstance(g, PolicyGate)), None) is self

    async def call(self, runtime: Runtime, agent: Agent | None, call: ToolCall, *, turn: int | None,
                   step: int | None, signal: AbortSignal | None, log: bool) -> ToolResult | None:
        """None: no rule stops ``call`` (dispatch it); else its refusal or, for an approved
        ``ask`` call, the result of running it (``tool/call``, the review, ``tool/result``)."""
        if not self._leads(runtime):
            return None
        found = gate.authorize(runtime, agent, call)
        if found is None or found[0].verdict == "allow":
            found = _declined(runtime, agent, call, found)
            if found is None:
                return None
        session = agent.session if (log and agent is not None) else None
        audit = agent.session if (not log and agent is not None) else None  # a resumed call
        spec = NewEvent(TOOL_CALL, call_data(call, turn, step))
        pending = None if session is None else PendingCall(session, spec)
        if found[0].verdict != "ask" or agent is None:
            # a declined call's tool/call is logged (with its review request); a denied one is not
            seq = pending.ensure_written(look=True) if pending and found[0].declined is not None else None
            return gate.refuse(session, call, *found, turn=turn, step=step, log_call=seq is None,
                               call_seq=seq, audit=audit)
        call_seq = None
        if pending is None:
            denied = await review_call(runtime.review, agent, call, *found, turn=turn, step=step,
                                       signal=signal, graph=graph_events(runtime, agent))
        else:  # the call is logged with its review request (one write), before the tool runs
            denied = await run_deferred(pending, review_call(runtime.review, agent, call, *found, turn=turn,
                                                             step=step, signal=signal,
                                                             graph=graph_events(runtime, agent)))
            call_seq = pending.ensure_written(look=True)  # a resumed call's is logged already
        if denied is not None:
            return gate.refuse(session, call, denied, found[1], turn=turn, step=step, log_call=False,
                               call_seq=call_seq, audit=audit)
        result = await dispatch_tool(runtime.tools, call, agent, signal=signal)
        if session is not None:
            session.append(TOOL_RESULT, result_data(result, turn, step), surface_op="append",
                           source_event_seqs=[call_seq] if call_seq is not None else None)
        return result

    async def authorize(self, runtime: Runtime, agent: Agent | None, call: ToolCall, *,
                        turn: int | None, step: int | None, signal: AbortSignal | None,
                        log: bool) -> ToolResult | None:
        """None: run the host's call; else its refusal (an ``ask`` rule reviews it first)."""
        if not self._leads(runtime):
            return None
        found = gate.authorize(runtime, agent, call)
        if found is None or found[0].verdict == "allow":
            found = _declined(runtime, agent, call, found)
            if found is None:
                return None
        decision, state = found
        session = agent.session if (log and agent is not None) else None
        # a caller that left the call's tool/call pending (the step driver) has it written with a
        # review request, so a suspended review's call is in the log; a call logged before (its
        # review suspended) comes as written: its refusal is its result, its live review closed
        pending = pending_call(session) if session is not None else None
        if decision.verdict == "ask" and agent is not None:
            denied = await review_call(runtime.review, agent, call, decision, state, turn=turn, step=step,
                                       signal=signal, graph=graph_events(runtime, agent))
            if denied is None:
                return None
            decision = denied
        call_seq = pending.known_seq() if pending is not None else None
        closing = (flow.call_closed_specs(session, call.id)
                   if session is not None and call_seq is not None else [])
        return gate.refuse(session, call, decision, state, turn=turn, step=step, log_call=call_seq is None,
                           call_seq=call_seq, closing=closing)

