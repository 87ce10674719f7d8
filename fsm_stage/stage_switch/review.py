"""The stage-review question and its consent rule (spec §1.12).

``build_review_question(catalog, stage, handoff)`` builds the single ``stage-review`` question
(full shape with the handoff as detail, light shape without); ``evaluate_review(answers,
catalog)`` turns the reviewer's answers into ``Consent`` or ``Decline`` (with the tool failure
text).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import attrs

from fsm_stage.constants import STAGE_REVIEW_ID
from fsm_stage.prompts import Catalog
from fsm_stage.runtime.review import Answer, Option, Question, evaluate

__all__ = ["Consent", "Decline", "build_review_question", "evaluate_review"]


@functools.lru_cache(maxsize=256)
def build_review_question(catalog: Catalog, stage: str, handoff: str | None) -> Question:
    """The single ``stage-review`` question (§1.12, S52, S53, S61, S64).

    Full shape (``handoff`` given): ``full_question`` with ``detail=handoff``; light shape
    (``handoff is None``): ``light_question`` with no detail. Options: approve, then keep.
    No presentation intent.
    """
    full = handoff is not None
    return Question(
        id=STAGE_REVIEW_ID,
        header=catalog.text("review.header"),
        question=catalog.text("review.full_question" if full else "review.light_question", stage=stage),
        options=(
            Option(
                catalog.text("review.approve_label"),
                catalog.text(f"review.{'full' if full else 'light'}_approve_description"),
            ),
            Option(catalog.text("review.keep_stage_label"), catalog.text("review.keep_stage_description")),
        ),
        detail=handoff,
    )


@attrs.frozen
class Consent:
    """The reviewer approved the transition."""


@attrs.frozen
class Decline:
    """The reviewer kept the stage; ``message`` is the tool failure text (with the feedback)."""

    feedback: str
    message: str


def evaluate_review(answers: Sequence[Answer], catalog: Catalog) -> Consent | Decline:
    """Apply the consent rule (§1.12, S55, S58).

    Consent only for exactly one ``stage-review`` answer whose ``selected`` is exactly the
    active language's approve label and which has no ``custom`` text (even ``""`` counts as
    text). Otherwise a ``Decline``: feedback ``custom`` (or ``""``); an exactly empty feedback
    gives ``errors.keep_stage``, any other (even whitespace) ``errors.keep_stage_feedback``.
    """
    decision = evaluate(answers, STAGE_REVIEW_ID, catalog.text("review.approve_label"))
    if decision.approved:
        return Consent()
    feedback = decision.feedback or ""
    if feedback == "":
        return Decline("", catalog.text("errors.keep_stage"))
    return Decline(feedback, catalog.text("errors.keep_stage_feedback", feedback=feedback))
