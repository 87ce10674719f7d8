"""Plan mode's durable exit review (docs/reviews.md): the approved exit lives in the log.

``review_exit(controller, agent, plan, channel, signal)`` runs one ``exit_plan_mode`` review
through ``fsm_stage.reviews._flow`` (a resumed call reuses its logged review; one open
plan review per session; ``ReviewPending`` for a suspending channel) and returns the settled
``Outcome``. ``approved_exit(session)`` is the approved, unredeemed plan review (the pending
exit, which survives a crash); ``redeem_specs`` the event that redeems it.
"""

from __future__ import annotations

from typing import Protocol

from fsm_stage.config import PlanModeConfig
from fsm_stage.config.review_rules import ReviewRulesConfig, merged_rules, rules_json
from fsm_stage.constants import APPROVE_LABEL, KEEP_PLANNING_LABEL, PLAN_REVIEW_ID
from fsm_stage.errors import GraphChangedError, ReviewPayloadChangedError, ReviewPending, _ReviewBusy
from fsm_stage.log.events import NewEvent
from fsm_stage.prompts import Catalog
from fsm_stage.reviews._channel import Answer, Question, ReviewChannel, ReviewDismissed, evaluate
from fsm_stage.reviews._flow import (
    Outcome,
    Ticket,
    conduct,
    existing,
    open_request,
    redeemed_spec,
    reserve,
    state_of,
)
from fsm_stage.reviews._fold import ReviewRecord, plan_payload_sha256
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolFailure, current_call_id

__all__ = ["approved_exit", "redeem_specs", "review_exit"]


def approved_exit(session: Session) -> ReviewRecord | None:
    """The approved, not yet redeemed plan review of ``session`` (None when none)."""
    return state_of(session).pending("plan")


def redeem_specs(session: Session, *, applied: bool, reason: str | None = None) -> list[NewEvent]:
    """``[fsm/review/redeemed]`` for the pending approved exit, ``[]`` when none is pending."""
    record = approved_exit(session)
    return [] if record is None else [redeemed_spec(record.id, applied, None if applied else reason)]


def _interpret(answers: list[Answer]) -> tuple[str, str | None, str | None]:
    decision = evaluate(answers, PLAN_REVIEW_ID, APPROVE_LABEL)
    if decision.approved:
        return "approve", APPROVE_LABEL, None
    return "keep", None, decision.feedback


class PlanReviewer(Protocol):
    """What the exit review reads of plan mode: the question for a plan, whether the
    controller was closed meanwhile, its wording catalog, its section (``config``, whose
    ``review`` rules win), the graph's ``review`` rules (``graph_review``) and the ``fsm/graph``
    record to write with a new request (``graph_record``: ``_flow.graph_record``)."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> PlanModeConfig: ...

    @property
    def graph_review(self) -> ReviewRulesConfig | None: ...

    @property
    def catalog(self) -> Catalog: ...

    def review_question(self, plan: str) -> Question: ...

    def graph_record(self, session: Session) -> list[NewEvent]: ...


async def review_exit(ctl: PlanReviewer, agent: Agent, plan: str, channel: ReviewChannel,
                      signal: AbortSignal | None) -> Outcome:
    """Review ``plan`` for ``ctl`` (plan mode, as a ``PlanReviewer``); raises ``ToolFailure`` for a
    refusal (another plan review open or approved; a resumed call whose plan changed), a
    dismissal (B85) or a channel failure (its own message, B86); ``ReviewPending`` and
    ``asyncio.CancelledError`` propagate (a cancellation is logged as a dismiss answer)."""
    session = agent.session
    call_id = current_call_id()
    payload = plan_payload_sha256(plan)
    try:
        record = existing(session, "plan", call_id, payload)
        if record is None:
            with reserve(session, "plan", "plan"):
                options = (APPROVE_LABEL, KEEP_PLANNING_LABEL)
                rules = rules_json(merged_rules(ctl.graph_review, ctl.config.review))
                ticket = Ticket("plan", "plan", "default", options, None, None, payload, rules, plan)
                record = open_request(session, ticket, call_id, "plan", ctl.graph_record(session))
    except _ReviewBusy as busy:
        raise ToolFailure(busy.text) from None
    except (ReviewPayloadChangedError, GraphChangedError) as exc:  # one line to the model
        raise ToolFailure(str(exc)) from None
    question = ctl.review_question(plan)
    try:
        return await conduct(session, record, ask=lambda: channel.ask([question], agent, signal=signal),
                             interpret=_interpret, moved=lambda: "closed" if ctl.closed else None)
    except ReviewDismissed:
        raise ToolFailure(ctl.catalog.text("errors.dismissed")) from None
    except ReviewPending:
        raise
    except Exception as exc:
        raise ToolFailure(str(exc) or type(exc).__name__) from exc
