"""Stage and plan-mode budgets at the step boundary: stop, or ask a human.

``gate(session, rules, turn)`` runs before a step opens: a budget that ran out with
``on_budget: stop`` logs an ``fsm/budget`` stop; with ``on_budget: review`` it opens a review of
kind ``budget`` (options: continue with a fresh budget, move to each target stage, stop) or
redeems its answer (a fresh budget is an ``fsm/budget`` ``fresh``; a move queues a user jump the
boundary applies). ``notices(session)`` gives the one-line notices that tell the model about a
stop when work resumes. ``ask(channel, …)`` puts an open budget review to a live channel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from fsm_stage.constants import BUDGET_EVENT, BUDGET_KIND, MOVE_PREFIX
from fsm_stage.errors import AppendConflictError, ReviewDismissed, _ReviewBusy
from fsm_stage.log.events import NewEvent
from fsm_stage.log.events import wall_clock_ms as now_ms
from fsm_stage.log.projections.spend import SPEND_FOLD, SpendState
from fsm_stage.reviews._answer import answer_review
from fsm_stage.reviews._channel import Option, Question, ReviewChannel
from fsm_stage.reviews._edits import feedback_problem
from fsm_stage.reviews._flow import Ticket, graph_record, open_request, redeemed_spec, state_of
from fsm_stage.reviews._fold import ReviewRecord, budget_payload_sha256
from fsm_stage.reviews._visits import budget_call_id, move_target
from fsm_stage.runtime import wording
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.messages import Message, notice
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.stage_models import BudgetRule, over_budget

#: ``source.plugin`` of budget notices.
BUDGET_PLUGIN = "fsm_stage-budget"
#: Option label prefixes of a budget review (catalog texts are the descriptions; the move
#: options' ``MOVE_PREFIX`` and the review kind ``BUDGET_KIND`` are in ``fsm_stage.constants``).
CONTINUE_LABEL = "Continue with a fresh budget"
STOP_LABEL = "Stop"
#: ``fsm/review/redeemed`` reasons of an approved budget review that no longer applies as asked.
RULES_CHANGED = "rules-changed"
EDGE_REMOVED = "edge-removed"
GUARD_CLOSED = "guard-closed"


@attrs.frozen
class Gate:
    """What the boundary decided: ``stopped`` (the one-line reason, None when the step may
    open), ``review`` (the open budget review the stop waits for, if any) and ``retry`` (an
    answer was redeemed: fetch the rules again, the stage or the budget changed)."""

    stopped: str | None = None
    review: ReviewRecord | None = None
    retry: bool = False
    language: str = "en"


OPEN = Gate()
"""The gate of a step that may open (shared: ``Gate`` is immutable)."""


def _where(scope: Any, label: Any, language: str) -> str:
    if scope == "plan":
        return wording.text("budget.where_plan", language)
    return wording.text("budget.where_stage", language, name=label)


def _spend(state: SpendState, rule: BudgetRule) -> tuple[Any, int | None]:
    if rule.scope == "plan":
        return state.plan_spend, state.plan_turn
    return state.stage_spend, state.stage_turn


def _payload(rule: BudgetRule, since: int | None) -> str:
    return budget_payload_sha256(rule.scope, rule.label, since)


def gate(session: Session, rules: Sequence[BudgetRule], turn: int | None, runtime: Any = None) -> Gate:
    """Check ``rules`` before a step of ``turn`` opens (see the module docstring). Appends at most
    a few small events; never raises for an exhausted budget. A new budget review records the
    graph of ``runtime``'s stage switch with it (``reviews._flow.graph_record``)."""
    for rule in rules:
        state: SpendState = session.read(SPEND_FOLD)
        spend, counted = _spend(state, rule)
        now = now_ms()
        hit = over_budget(rule.budget, spend, now, new_turn=counted != turn)
        if not hit:
            continue
        where = _where(rule.scope, rule.label, rule.language)
        reason = wording.text("budget.stop_reason", rule.language, where=where, limits=", ".join(hit))
        if rule.on_budget == "review":
            return _review(session, rule, spend.since, hit, reason, runtime)
        session.append(BUDGET_EVENT, _stop_data(rule, hit, spend, now), ignorable=True)
        return Gate(reason, language=rule.language)
    return OPEN


def _stop_data(rule: BudgetRule, hit: Sequence[str], spend: Any, now: int) -> dict[str, Any]:
    return {"scope": rule.scope, "stage": rule.label, "action": "stop", "limits": list(hit),
            "spent": spend.to_json(now), "language": rule.language}


def _review(session: Session, rule: BudgetRule, since: int | None, hit: Sequence[str],
            reason: str, runtime: Any) -> Gate:
    """The budget review of this visit: open it, wait for it, or redeem its answer (``retry``)."""
    payload, call_id = _payload(rule, since), budget_call_id(rule.scope, since)
    reviews = state_of(session)
    record = reviews.by_call(call_id, BUDGET_KIND, payload)  # O(reviews of this visit)
    if record is not None and record.id not in reviews.redeemed:
        answer = reviews.answered.get(record.id)
        if answer is None:
            return Gate(wording.text("budget.waiting", rule.language, reason=reason, id=record.id), record,
                        language=rule.language)
        if _redeem(session, rule, record, answer.option if answer.outcome == "approve" else None):
            return Gate(retry=True)
    ticket = Ticket(BUDGET_KIND, rule.label, "", _options(rule), None, None, payload, rule.rules)
    try:
        record = open_request(session, ticket, call_id, wording.text(
            "budget.review_label", rule.language), graph_record(runtime, session))
    except _ReviewBusy as err:  # another review of this kind is open: stop, saying so
        return Gate(f"{reason}; {err}", language=rule.language)
    spend = _spend(session.read(SPEND_FOLD), rule)[0]
    session.append(BUDGET_EVENT, {**_stop_data(rule, hit, spend, now_ms()), "review": record.id},
                   ignorable=True)
    return Gate(wording.text("budget.waiting", rule.language, reason=reason, id=record.id), record,
                language=rule.language)


def _options(rule: BudgetRule) -> tuple[str, ...]:
    moves = (t for t in rule.targets if rule.open_move is None or rule.open_move(t))
    return (CONTINUE_LABEL, *(MOVE_PREFIX + t for t in moves), STOP_LABEL)


def _unchanged(rule: BudgetRule, record: ReviewRecord, move: str | None) -> str | None:
    """Why an approved budget review no longer applies as asked, or None: it was asked under
    other review rules than the graph's now (a log written before budget reviews carried rules,
    or a graph that changed: its approval may not satisfy them), or its move's edge is no
    longer one the budget review offers: a guard of it does not hold now (``guard-closed``), or
    it was removed or is reviewed under rules of its own (``edge-removed``)."""
    if (dict(record.rules) if record.rules else None) != (dict(rule.rules) if rule.rules else None):
        return RULES_CHANGED
    if move is not None and move not in rule.targets:
        return EDGE_REMOVED
    if move is not None and rule.open_move is not None and not rule.open_move(move):
        return GUARD_CLOSED
    return None


def _redeem(session: Session, rule: BudgetRule, record: ReviewRecord, option: str | None) -> bool:
    """Redeem an answered budget review once (a conditional append): a fresh budget, or a move
    queued through ``rule.move``, when ``_unchanged`` holds (else redeemed not applied, and the
    next boundary asks again). Returns True when the step may be retried."""
    specs: list[NewEvent] = []
    move = move_target(option) if rule.move is not None else None
    why = _unchanged(rule, record, move) if option is not None else None
    if why is not None:
        move = None
    elif option == CONTINUE_LABEL:
        specs.append(NewEvent(BUDGET_EVENT, {"scope": rule.scope, "stage": rule.label, "action": "fresh",
                                             "review": record.id}, ignorable=True))
    applied = option is not None and why is None and (move is not None or bool(specs))
    reason = None if applied else (why or "kept")
    try:
        session.append_many([*specs, redeemed_spec(record.id, applied, reason)],
                            expect_last_seq=session.last_seq)
    except AppendConflictError:
        return False  # another writer redeemed it or wrote meanwhile: the next boundary decides
    if move is not None and rule.move is not None:
        rule.move(move)
    return applied


def notices(session: Session) -> tuple[list[Message], NewEvent | None]:
    """The one-line notices telling the model about budget stops it was not told of yet, and the
    ``fsm/budget {action: "told"}`` event to log after them (None when there are none)."""
    state: SpendState = session.read(SPEND_FOLD)
    if not state.stops:
        return [], None
    out: list[Message] = []
    for stop in state.stops:
        language = str(stop.get("language")) if stop.get("language") in ("en", "zh") else "en"
        limits = ", ".join(str(x) for x in stop.get("limits") or ())
        text = wording.text("budget.stopped", language, where=_where(stop.get("scope"), stop.get("stage"),
                                                                     language), limits=limits)
        out.append(notice(text, plugin=BUDGET_PLUGIN, summary=text))
    return out, NewEvent(BUDGET_EVENT, {"action": "told"}, ignorable=True)


def question(record: ReviewRecord, reason: str, language: str = "en") -> Question:
    """The budget review's question for a live channel (the options of the request)."""
    return Question(
        id=BUDGET_KIND, header=wording.text("budget.review_label", language), question=reason,
        options=tuple(Option(label) for label in record.options),
        context={"from": record.from_, "to": None, "kind": BUDGET_KIND})


async def ask(channel: ReviewChannel, agent: Agent, decided: Gate) -> bool:
    """Put the open budget review of ``decided`` to a live ``channel`` and record the answer
    (``by: channel``). Returns True when an answer was recorded (a dismissal too); False when
    there is no open review or the channel declined (the review stays open for the next boundary
    or an answer from elsewhere)."""
    record, reason, language = decided.review, decided.stopped or "", decided.language
    if record is None:
        return False
    session = agent.session
    try:
        answers = await channel.ask([question(record, reason, language)], agent)
    except ReviewDismissed:
        answer_review(session, record.id, "dismiss", by="channel")
        return True
    except Exception:  # a suspending channel: answered later, elsewhere
        return False
    chosen = next((a for a in answers if a.id == BUDGET_KIND), None)
    label = chosen.selected[0] if chosen is not None and chosen.selected else None
    if label is None or label not in record.options:
        return False
    if label == STOP_LABEL:
        feedback = chosen.custom if chosen else None
        if feedback is not None and feedback_problem(feedback) is not None:
            # refused as answer_review refuses a reviewer's: a channel failure, so dismissed (stop)
            answer_review(session, record.id, "dismiss", by="channel")
            return True
        answer_review(session, record.id, "keep", feedback=feedback, by="channel")
    else:
        answer_review(session, record.id, "approve", option=label, by="channel")
    return True
