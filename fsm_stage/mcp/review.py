"""Human review over MCP: the form a client shows, and the channel the controllers ask.

One ``McpReviewChannel`` per session is the runtime's ``ReviewChannel``; before each reviewed
tool call the server ``arm``s it with one strategy, under the session's lock: ``Elicit(ask)``
(``elicitation/create``, for 2025-06-18 / 2025-11-25 clients that declared the elicitation
capability: ``ask(message, schema)`` returns the client's ``ElicitResult``); ``Suspend()``
(first round of the 2026-07-28 ``input_required`` round trip: ``ask`` records the question and
raises ``ReviewSuspended``); ``Answered(result)`` (its retry round: the answer sent back).

``review_form(question)`` is the form (``decision``: the question's option labels, the approve
label first and the keep label last; ``feedback``: optional text); ``to_answers`` maps a reply:
accept → the chosen label (feedback kept for every label but the approving one), decline →
keep, cancel → ``ReviewDismissed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from fsm_stage.errors import ReviewError as ReviewError
from fsm_stage.errors import ReviewSuspended
from fsm_stage.reviews._channel import Answer, Question, ReviewDismissed
from fsm_stage.runtime.abort import AbortSignal

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

__all__ = ["Answered", "Elicit", "McpReviewChannel", "ReviewError", "Suspend",
           "review_form", "review_message", "to_answers"]

UNAVAILABLE = ("review unavailable: this MCP client cannot ask a human (it declared no elicitation "
               "support), so the transition was not requested; nothing was changed")


def review_message(question: Question) -> str:
    """The text shown to the human: header, question, then the detail (plan or handoff)."""
    parts = [question.header, question.question]
    if question.detail:
        parts.append(question.detail)
    return "\n\n".join(p for p in parts if p)


def _sentence(text: str) -> str:
    """``text`` ending with one full stop (option descriptions may have theirs, or not)."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


#: What the form's ``edited`` field edits, by review kind.
EDITABLE = {"plan": "plan", "stage": "handoff document"}


def _kind(question: Question) -> str:
    return "stage" if question.context is not None else "plan"


def review_form(question: Question) -> dict[str, Any]:
    """The elicitation form schema of ``question`` (flat, as elicitation requires): ``decision``,
    ``feedback`` and, when the question shows a document (a plan, a full switch's handoff
    document), ``edited``: the reviewer's edited version, approved instead of the original
    (docs/mcp.md, "Reviewers and edits")."""
    labels = list(question.labels)
    edits: dict[str, Any] = {}
    if question.detail:  # a plan or a full switch's handoff document: the reviewer may edit it
        what = EDITABLE.get(_kind(question), "document")
        edits["edited"] = {"type": "string", "title": "Edited document",
                           "description": f"Optional: your edited version of the {what} (approve with "
                           f"{labels[0]!r} to approve the edited version instead)."}
    return {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "title": "Decision", "enum": labels, "default": labels[-1],
                         "description": " ".join(_sentence(f"{o.label}: {o.description}")
                                                 for o in question.options if o.description)
                         or "Approve or keep"},
            "feedback": {"type": "string", "title": "Feedback",
                         "description": "Optional: why you keep the current state (shown to the model)."},
            **edits,
        },
        "required": ["decision"],
    }


def to_answers(question: Question, action: str, content: Mapping[str, Any] | None) -> list[Answer]:
    """Map an elicitation reply to the controllers' answers (see the module docstring).

    An accepted reply with no valid ``decision`` is keep (the form's default, never consent),
    as the durable answer logs it. Raises ``ValueError`` for an unknown action.
    """
    keep = question.labels[-1]
    if action == "cancel":
        raise ReviewDismissed("the reviewer dismissed the review in the MCP client")
    if action == "decline":
        return [Answer(question.id, (keep,))]
    if action != "accept" or content is None:
        raise ValueError(f"unexpected elicitation reply {action!r}")
    decision = content.get("decision")
    feedback = content.get("feedback")
    text = feedback.strip() if isinstance(feedback, str) and feedback.strip() else None
    if not isinstance(decision, str) or decision not in question.labels:
        return [Answer(question.id, (keep,), text)]  # the form's default: never consent
    if decision == question.labels[0]:
        return [Answer(question.id, (decision,))]
    return [Answer(question.id, (decision,), text)]


ElicitFn = Callable[[str, dict[str, Any]], Awaitable[tuple[str, Mapping[str, Any] | None]]]


@attrs.frozen
class Elicit:
    """Ask now with ``elicitation/create``: ``ask(message, schema) -> (action, content)``."""

    ask: ElicitFn


@attrs.frozen
class Suspend:
    """First ``input_required`` round: record the question, answer later."""


@attrs.frozen
class Answered:
    """Retry round of ``input_required``: the client's ``(action, content)``."""

    action: str
    content: Mapping[str, Any] | None


Strategy = Elicit | Suspend | Answered


class McpReviewChannel:
    """The per-session ``ReviewChannel`` of the MCP server (see the module docstring).

    ``asked`` holds the last question put to it, ``suspended`` is True once a ``Suspend`` round
    raised ``ReviewSuspended``. Unarmed, ``ask`` raises ``ReviewError``.
    """

    def __init__(self) -> None:
        self.strategy: Strategy | None = None
        self.asked: Question | None = None
        self.suspended = False

    def arm(self, strategy: Strategy | None) -> None:
        """Use ``strategy`` for the next call (None: unavailable); resets ``asked``/``suspended``."""
        self.strategy = strategy
        self.asked = None
        self.suspended = False

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]:
        """Answer the one review question through the armed strategy."""
        if len(questions) != 1:
            raise ValueError(f"an MCP review asks exactly one question, got {len(questions)}")
        (question,) = questions
        self.asked = question
        strategy = self.strategy
        if isinstance(strategy, Suspend):
            self.suspended = True
            raise ReviewSuspended("the review waits for the MCP client's input_required answer")
        if isinstance(strategy, Answered):
            return to_answers(question, strategy.action, strategy.content)
        if isinstance(strategy, Elicit):
            action, content = await strategy.ask(review_message(question), review_form(question))
            return to_answers(question, action, content)
        raise ReviewError(UNAVAILABLE)
