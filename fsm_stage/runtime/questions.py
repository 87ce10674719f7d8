"""The review seam the kernel holds: the question shapes (``Option``, ``Question``, ``Answer``)
and the ``ReviewChannel`` protocol a ``Runtime`` is given. The channels themselves live in
``fsm_stage.reviews`` (which re-exports these names).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from fsm_stage.runtime.abort import AbortSignal

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent

__all__ = ["Answer", "Option", "Question", "ReviewChannel", "check_review_channel"]


@attrs.frozen
class Option:
    """One answer option: ``label`` (compared exactly) and a ``description`` for the UI."""

    label: str
    description: str = ""


@attrs.frozen
class Question:
    """One review question (S6). ``detail`` is shown verbatim (markdown); ``intent`` is a
    presentation hint such as ``{"kind": "plan-review", "approve": "Approve"}``.

    ``context`` is UI-only: what a channel may show around the question, e.g. the stage
    review's ``{"from": STAGE, "to": STAGE, "handoff_path": PATH | None}``. It is never part of
    consent (``evaluate`` ignores it) nor of the question's spec'd shape (S53 pins the stage
    review's ``intent`` absent; its ``context`` is separate)."""

    id: str
    header: str
    question: str
    options: tuple[Option, ...]
    detail: str | None = None
    multi_select: bool = False
    intent: Mapping[str, Any] | None = None
    context: Mapping[str, Any] | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        """Option labels in order."""
        return tuple(o.label for o in self.options)


@attrs.frozen
class Answer:
    """The reply to one question: selected labels and optional free-text ``custom``."""

    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None


@runtime_checkable
class ReviewChannel(Protocol):
    """Asks questions of a human; ``ask`` is async and returns the ``Answer`` list.

    Raise ``ReviewDismissed`` when the user **dismissed** the dialog to type instead (the
    harness's ``ASK_CANCELLED``); every other exception is a different failure and keeps its
    own message (B85, B86). Ownership and delegation policy belong to the channel, not to the
    controllers.
    """

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]: ...


def check_review_channel(review: object, what: str) -> None:
    """Refuse ``review`` (an argument named ``what``) that is neither None nor a
    ``ReviewChannel``: ``TypeError`` when it has no ``ask`` method, or a plain ``def ask`` that
    is not ``async`` (the review would otherwise fail later, in a tool result the model sees)."""
    if review is None:
        return
    ask = getattr(review, "ask", None)
    if not callable(ask):
        raise TypeError(f"{what} must be a ReviewChannel (an object with an async ask(questions, agent, "
                        f"*, signal=None) method) or None, got {type(review).__name__}")
    if (inspect.isfunction(ask) or inspect.ismethod(ask)) and not inspect.iscoroutinefunction(ask):
        raise TypeError(f"{what}: {type(review).__name__}.ask must be async (async def ask(questions, "
                        "agent, *, signal=None))")
