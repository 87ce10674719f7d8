"""Which approved budget reviews still apply: a budget review (``on_budget: review``) is redeemed
only by a boundary of the stage visit (or plan-mode stretch) it was asked in, so an approval
of a visit that ended is never applied. ``pending_move`` is the move ``draw --log`` marks,
``stale_approvals`` what ``state`` calls never applied. Pure functions of the review and spend
folds; the boundary itself is ``fsm_stage.driver._budget``.
"""

from __future__ import annotations

from fsm_stage.constants import BUDGET_KIND, MOVE_PREFIX
from fsm_stage.log.projections.spend import SpendState
from fsm_stage.reviews._fold import ReviewRecord, ReviewState

__all__ = ["budget_call_id", "move_target", "of_this_visit", "pending_move", "stale_approvals"]


def budget_call_id(scope: str, since: int | None) -> str:
    """The ``callId`` of the budget review of a ``scope`` (``stage`` / ``plan``) visit that began
    at ``since`` (its spend's first time; one review per visit)."""
    return f"budget:{scope}:{since}"


def move_target(option: str | None) -> str | None:
    """The stage a budget review's chosen ``option`` moves to ("Move to X": X), else None."""
    if option is not None and option.startswith(MOVE_PREFIX):
        return option[len(MOVE_PREFIX):]
    return None


def of_this_visit(record: ReviewRecord, spend: SpendState) -> bool:
    """Whether the budget review ``record`` was asked in the current stage visit (or plan-mode
    stretch) of ``spend``: only then does the next boundary redeem its approval (the review of
    a visit that ended is never applied)."""
    if record.call_id == budget_call_id("plan", spend.plan_spend.since):
        return True
    return record.call_id == budget_call_id("stage", spend.stage_spend.since) and record.from_ == spend.stage


def stale_approvals(reviews: ReviewState, spend: SpendState) -> frozenset[str]:
    """The ids of approved, unredeemed budget reviews asked in a visit that has ended: no
    boundary applies them any more."""
    return frozenset(r.id for r in reviews.approved if r.kind == BUDGET_KIND and not of_this_visit(r, spend))


def pending_move(reviews: ReviewState, spend: SpendState) -> tuple[str, str] | None:
    """``(current stage, X)`` when a budget review of the current visit was answered "Move to X"
    and its move is not applied yet (the next boundary applies it), else None."""
    record = reviews.pending(BUDGET_KIND)
    answer = reviews.answered.get(record.id) if record is not None else None
    target = move_target(answer.option) if answer is not None else None
    if record is None or target is None or spend.stage is None or not of_this_visit(record, spend):
        return None
    return spend.stage, target
