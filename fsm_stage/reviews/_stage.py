"""The stage-review question and its consent rule (docs/contracts.md).

``build_review_question(catalog, stage, handoff)`` builds the single ``stage-review`` question
(full shape with the handoff as detail, light shape without); ``evaluate_review(answers,
catalog)`` turns the reviewer's answers into ``Consent`` or ``Decline`` (with the tool failure
text).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import attrs

from fsm_stage.constants import APPROVE_KEEP_CONVERSATION_LABEL, STAGE_REVIEW_ID
from fsm_stage.prompts import Catalog
from fsm_stage.reviews._channel import Answer, Option, Question, evaluate
from fsm_stage.runtime import wording

__all__ = ["Consent", "Decline", "build_review_question", "evaluate_review", "stage_option_labels"]


@functools.lru_cache(maxsize=256)
def build_review_question(catalog: Catalog, stage: str, handoff: str | None, *,
                          from_stage: str | None = None, handoff_path: str | None = None) -> Question:
    """The single ``stage-review`` question (S52, S53, S61, S64).

    Full shape (``handoff`` given): ``full_question`` with ``detail=handoff``; light shape
    (``handoff is None``): ``light_question`` with no detail. Options: approve (the default
    shape), for a full transition also ``Approve and keep the conversation`` (a light switch,
    the handoff unused), then keep.
    No presentation intent (S53). ``context`` (UI-only, never part of consent) is
    ``{"from": from_stage, "to": stage, "handoff_path": handoff_path}`` when ``from_stage`` is
    given, else None.
    """
    header, question, options = _question_parts(catalog, stage, handoff is not None)
    return Question(
        id=STAGE_REVIEW_ID,
        header=header,
        question=question,
        options=options,
        detail=handoff,
        context=({"from": from_stage, "to": stage, "handoff_path": handoff_path}
                 if from_stage is not None else None),
    )


@functools.lru_cache(maxsize=256)
def _question_parts(catalog: Catalog, stage: str, full: bool) -> tuple[str, str, tuple[Option, ...]]:
    """The rendered header, question and options of a stage review (what does not depend on
    the handoff document, so distinct handoffs to one stage render them once)."""
    return (
        catalog.text("review.header"),
        catalog.text("review.full_question" if full else "review.light_question", stage=stage),
        (
            Option(
                catalog.text("review.approve_label"),
                catalog.text(f"review.{'full' if full else 'light'}_approve_description"),
            ),
            *((Option(APPROVE_KEEP_CONVERSATION_LABEL,
                      wording.text("stage_review.keep_conversation_description", catalog.language)),)
              if full else ()),
            Option(catalog.text("review.keep_stage_label"), catalog.text("review.keep_stage_description")),
        ),
    )


@functools.lru_cache(maxsize=64)
def stage_option_labels(catalog: Catalog, full: bool) -> tuple[str, ...]:
    """The option labels a stage review logs: approve, the light alternative when ``full``, keep."""
    alt = (APPROVE_KEEP_CONVERSATION_LABEL,) if full else ()
    return (catalog.text("review.approve_label"), *alt, catalog.text("review.keep_stage_label"))


@attrs.frozen
class Consent:
    """The reviewer approved the transition with ``option`` (its label decides the shape)."""

    option: str = "Approve"


@attrs.frozen
class Decline:
    """The reviewer kept the stage; ``message`` is the tool failure text (with the feedback)."""

    feedback: str
    message: str


def evaluate_review(answers: Sequence[Answer], catalog: Catalog) -> Consent | Decline:
    """Apply the consent rule (S55, S58).

    Consent only for exactly one ``stage-review`` answer whose ``selected`` is exactly the
    active language's approve label and which has no ``custom`` text (even ``""`` counts as
    text). Otherwise a ``Decline``: feedback ``custom`` (or ``""``); an exactly empty feedback
    gives ``errors.keep_stage``, any other (even whitespace) ``errors.keep_stage_feedback``.
    """
    approve = catalog.text("review.approve_label")
    decision = evaluate(answers, STAGE_REVIEW_ID, approve)
    if decision.approved:
        return Consent(approve)
    if evaluate(answers, STAGE_REVIEW_ID, APPROVE_KEEP_CONVERSATION_LABEL).approved:
        return Consent(APPROVE_KEEP_CONVERSATION_LABEL)
    feedback = decision.feedback or ""
    if feedback == "":
        return Decline("", catalog.text("errors.keep_stage"))
    return Decline(feedback, catalog.text("errors.keep_stage_feedback", feedback=feedback))
