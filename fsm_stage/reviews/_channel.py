"""Review seam: put questions to a human (plan-mode spec §1.9, §4.2 S6; stage-switch §1.12).

``Option``, ``Question`` and ``Answer`` are the shapes; a ``ReviewChannel`` asks the questions
(``await channel.ask(questions, agent, signal=None)``) and raises ``ReviewDismissed`` when the
user dismissed the dialog; ``evaluate(answers, question_id, approve_label)`` is the consent
rule plan mode and the stage switch share. Shipped channels: ``ScriptedReviewChannel`` (tests:
approve, keep, custom, dismiss, raise, block until released), ``SuspendingReviewChannel``
(durable reviews answered later) and ``TerminalReviewChannel`` (interactive;
``fsm_stage.reviews._terminal``, re-exported here).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from fsm_stage.errors import ReviewDismissed as ReviewDismissed
from fsm_stage.errors import ReviewSuspended
from fsm_stage.runtime.abort import AbortSignal

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent


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


@attrs.frozen
class Decision:
    """Result of ``evaluate``: ``approved``, and the reviewer's ``feedback`` (None when none)."""

    approved: bool
    feedback: str | None = None


def evaluate(answers: Sequence[Answer], question_id: str, approve_label: str) -> Decision:
    """The consent rule shared by plan mode and the stage switch.

    No answer or several answers with ``question_id`` → not approved, no feedback (B83, B84).
    One answer: approved iff ``selected == (approve_label,)`` and ``custom is None`` (B76,
    B81, B82); otherwise not approved with ``feedback = custom`` (B78–B80).
    """
    mine = [a for a in answers if a.id == question_id]
    if len(mine) != 1:
        return Decision(False)
    (answer,) = mine
    if tuple(answer.selected) == (approve_label,) and answer.custom is None:
        return Decision(True)
    return Decision(False, answer.custom)


# --- scripted channel (tests, simulator) ------------------------------------------------------


@attrs.frozen
class ReviewRequest:
    """One recorded ``ask`` call: the questions, the agent and the signal, by identity."""

    questions: tuple[Question, ...]
    agent: Any
    signal: AbortSignal | None


class Gate:
    """A review held open until the test calls ``release(...)`` (or ``dismiss``/``fail``)."""

    def __init__(self) -> None:
        self._future: asyncio.Future[Callable[[Sequence[Question]], list[Answer]]] | None = None
        self._outcome: Callable[[Sequence[Question]], list[Answer]] | None = None
        self.opened = False

    def _bind(self) -> asyncio.Future[Callable[[Sequence[Question]], list[Answer]]]:
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
            if self._outcome is not None:
                self._future.set_result(self._outcome)
        return self._future

    def _settle(self, outcome: Callable[[Sequence[Question]], list[Answer]]) -> None:
        if self._future is None:
            self._outcome = outcome
        elif not self._future.done():
            self._future.set_result(outcome)

    def release(self, *answers: Answer) -> None:
        """Resolve the held review with ``answers``."""
        self._settle(lambda _q: list(answers))

    def approve(self, label: str = "Approve") -> None:
        """Resolve the held review approving its first question with ``label``."""
        self._settle(lambda q: [Answer(q[0].id, (label,))])

    def dismiss(self) -> None:
        """Resolve the held review with a dismissal."""
        def outcome(_q: Sequence[Question]) -> list[Answer]:
            raise ReviewDismissed("review dismissed")
        self._settle(outcome)

    def fail(self, error: BaseException) -> None:
        """Resolve the held review by raising ``error``."""
        def outcome(_q: Sequence[Question]) -> list[Answer]:
            raise error
        self._settle(outcome)

    async def wait_open(self) -> None:
        """Wait until a review is actually blocked on this gate."""
        while not self.opened:
            await asyncio.sleep(0)


Script = Callable[[Sequence[Question]], list[Answer]] | Gate


class ScriptedReviewChannel:
    """A ``ReviewChannel`` answering from a queue of scripted outcomes (S-spec §4.4).

    Queue outcomes with the builder methods (each returns ``self`` for chaining):
    ``approve()``, ``keep(feedback=None)``, ``custom(text, selected=())``, ``answers(*a)``,
    ``dismiss()``, ``fail(exc)``; ``block()`` returns a ``Gate`` the test releases later.
    ``default`` (optional) answers once the queue is empty; otherwise an empty queue raises
    ``AssertionError``. Every call is recorded in ``requests``.
    """

    def __init__(self, *, approve_label: str = "Approve", keep_label: str = "Keep planning",
                 default: Callable[[Sequence[Question]], list[Answer]] | None = None) -> None:
        self.approve_label = approve_label
        self.keep_label = keep_label
        self.default = default
        self.requests: list[ReviewRequest] = []
        self._queue: deque[Script] = deque()

    def then(self, outcome: Callable[[Sequence[Question]], list[Answer]]) -> ScriptedReviewChannel:
        """Queue an arbitrary outcome function of the questions."""
        self._queue.append(outcome)
        return self

    def approve(self, label: str | None = None) -> ScriptedReviewChannel:
        """Queue an exact approval of the first question."""
        lab = self.approve_label if label is None else label
        return self.then(lambda q: [Answer(q[0].id, (lab,))])

    def keep(self, feedback: str | None = None, label: str | None = None) -> ScriptedReviewChannel:
        """Queue a keep answer (second option), with optional free-text ``feedback``."""
        lab = self.keep_label if label is None else label
        return self.then(lambda q: [Answer(q[0].id, (lab,), feedback)])

    def custom(self, text: str, selected: Sequence[str] = ()) -> ScriptedReviewChannel:
        """Queue a free-text answer (``selected`` labels optional)."""
        sel = tuple(selected)
        return self.then(lambda q: [Answer(q[0].id, sel, text)])

    def answers(self, *answers: Answer) -> ScriptedReviewChannel:
        """Queue a literal answer list."""
        return self.then(lambda _q: list(answers))

    def dismiss(self) -> ScriptedReviewChannel:
        """Queue a user dismissal (``ReviewDismissed``)."""
        def outcome(_q: Sequence[Question]) -> list[Answer]:
            raise ReviewDismissed("review dismissed")
        return self.then(outcome)

    def fail(self, error: BaseException) -> ScriptedReviewChannel:
        """Queue a failure: ``error`` is raised from ``ask``."""
        def outcome(_q: Sequence[Question]) -> list[Answer]:
            raise error
        return self.then(outcome)

    def block(self) -> Gate:
        """Queue a review that waits until the returned ``Gate`` is released."""
        gate = Gate()
        self._queue.append(gate)
        return gate

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]:
        """Record the request and answer with the next scripted outcome."""
        qs = tuple(questions)
        self.requests.append(ReviewRequest(qs, agent, signal))
        if self._queue:
            script = self._queue.popleft()
        elif self.default is not None:
            script = self.default
        else:
            raise AssertionError("ScriptedReviewChannel: no scripted outcome left")
        if isinstance(script, Gate):
            future = script._bind()
            script.opened = True
            outcome = await future
            return outcome(qs)
        return script(qs)


# --- interactive terminal channel: lives in fsm_stage.reviews._terminal ----------------------------

_TERMINAL_NAMES = ("TerminalReviewChannel", "TerminalWording", "render_markdown")


def __getattr__(name: str) -> Any:
    """Re-exports of ``fsm_stage.reviews._terminal`` (imported on first use: it needs rich)."""
    if name in _TERMINAL_NAMES:
        from fsm_stage.reviews import _terminal as terminal

        return getattr(terminal, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SuspendingReviewChannel:
    """A ``ReviewChannel`` that never answers now: ``ask`` raises ``ReviewSuspended``, so the
    reviewed tool call stays open with its request logged (``ReviewPending`` reaches the host),
    and a human answers later with ``answer_review`` / ``fsm-stage review``. Every call is
    recorded in ``requests``."""

    def __init__(self) -> None:
        self.requests: list[ReviewRequest] = []

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]:
        """Record the request, then raise ``ReviewSuspended``."""
        self.requests.append(ReviewRequest(tuple(questions), agent, signal))
        raise ReviewSuspended("the review was suspended; answer it later with answer_review")
