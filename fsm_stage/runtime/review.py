"""Review seam: put questions to a human (plan-mode spec §1.9, §4.2 S6; stage-switch §1.12).

Shapes
------
``Option(label, description)``; ``Question(id, header, question, options, detail=None,
multi_select=False, intent=None)``; ``Answer(id, selected=(), custom=None)``.

``ReviewChannel.ask(questions, agent, *, signal=None) -> list[Answer]`` is async. It raises
``ReviewDismissed`` when the user **dismissed** the dialog to type instead (the harness's
``ASK_CANCELLED``); every other exception is a different failure and keeps its own message
(B85, B86). Ownership/delegation policy belongs to the channel, not to the controllers.

``evaluate(answers, question_id, approve_label)`` is the shared consent rule: exactly one
answer with that id, whose ``selected`` is exactly ``[approve_label]`` and whose ``custom`` is
None (B76, B80–B84; S-spec §1.12).

Shipped channels: ``ScriptedReviewChannel`` (tests: approve, keep, custom, dismiss, raise,
block until released) and ``TerminalReviewChannel`` (interactive, click prompts, markdown).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import click

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
    presentation hint such as ``{"kind": "plan-review", "approve": "Approve"}``."""

    id: str
    header: str
    question: str
    options: tuple[Option, ...]
    detail: str | None = None
    multi_select: bool = False
    intent: Mapping[str, Any] | None = None

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


class ReviewDismissed(Exception):
    """The user closed the review without deciding, to type a message instead (B85)."""


@runtime_checkable
class ReviewChannel(Protocol):
    """Asks questions of a human. Raise ``ReviewDismissed`` for a dismissal; anything else
    propagates with its own message."""

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]: ...


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


# --- interactive terminal channel ---------------------------------------------------------------


@attrs.frozen
class TerminalWording:
    """Wording of the terminal dialog; ``load(language)`` reads the ``runtime`` catalog."""

    choose: str
    feedback: str
    invalid: str

    @classmethod
    def load(cls, language: str = "en") -> TerminalWording:
        """The ``terminal.*`` texts of ``templates/<language>/runtime.yaml``."""
        from fsm_stage.runtime import wording

        return cls(*(wording.text(f"terminal.{k}", language) for k in ("choose", "feedback", "invalid")))


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def render_markdown(text: str) -> str:
    """Render markdown for a terminal: headings bold/underlined, bullets as ``•``, ``**bold**``
    bold, inline code and fenced blocks dimmed. Styling is dropped on non-tty output."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append(click.style("    " + line, dim=True))
            continue
        m = _HEADING.match(line)
        if m:
            out.append(click.style(m.group(2), bold=True, underline=len(m.group(1)) == 1))
            continue
        b = _BULLET.match(line)
        if b:
            line = f"{b.group(1)}  • {b.group(2)}"
        line = _BOLD.sub(lambda mm: click.style(mm.group(1), bold=True), line)
        line = _CODE.sub(lambda mm: click.style(mm.group(1), dim=True), line)
        out.append(line)
    return "\n".join(out)


def _option_number(text: str) -> int | None:
    """``text`` as an option number when it is ASCII digits only (``"2"``), else None.

    ``str.isdigit`` also accepts ``"¹"`` or ``"①"``, which ``int()`` refuses; such text is
    neither a number nor feedback, so the prompt asks again. A number too long to be an option
    (more than 9 digits: ``int()`` refuses over 4300) gives 0, which is out of range.
    """
    if text and text.isascii() and text.isdigit():
        return int(text) if len(text) <= 9 else 0
    return None


class TerminalReviewChannel:
    """An interactive ``ReviewChannel`` on the terminal (click prompts).

    For each question it prints the header, the question, the ``detail`` rendered as markdown
    and the numbered options, then reads one line: an option number selects it (for any option
    but the approving one — the intent's ``approve`` label, else the first — a free-text
    feedback prompt follows); single-choice questions only. Any other text is feedback with nothing
    selected (B80: feedback, never consent); an empty line or an out-of-range number asks
    again. End of input or Ctrl-C raises ``ReviewDismissed``.
    The blocking prompt runs in a worker thread so the event loop stays responsive.
    """

    def __init__(self, wording: TerminalWording | None = None, *, language: str = "en") -> None:
        self.wording = wording if wording is not None else TerminalWording.load(language)

    async def ask(
        self, questions: Sequence[Question], agent: Agent, *, signal: AbortSignal | None = None
    ) -> list[Answer]:
        """Ask every question in turn on the terminal; see the class docstring."""
        return await asyncio.to_thread(self._ask_sync, tuple(questions))

    def _ask_sync(self, questions: tuple[Question, ...]) -> list[Answer]:
        answers: list[Answer] = []
        for q in questions:
            click.echo(click.style(q.header, bold=True))
            click.echo(q.question)
            if q.detail is not None:
                click.echo("")
                click.echo(render_markdown(q.detail))
                click.echo("")
            for i, opt in enumerate(q.options, 1):
                desc = f" — {opt.description}" if opt.description else ""
                click.echo(f"  {i}. {opt.label}{desc}")
            answers.append(self._read_answer(q))
        return answers

    def _read_answer(self, q: Question) -> Answer:
        w = self.wording
        hinted = q.intent.get("approve") if q.intent is not None else None
        approve = hinted if isinstance(hinted, str) and hinted in q.labels else q.labels[0]
        try:
            while True:
                raw: str = click.prompt(w.choose, default="", show_default=False)
                text = raw.strip()
                number = _option_number(text)
                if number is not None and 1 <= number <= len(q.options):
                    label = q.options[number - 1].label
                    if label == approve:
                        return Answer(q.id, (label,))
                    fb: str = click.prompt(w.feedback, default="", show_default=False)
                    return Answer(q.id, (label,), fb.strip() or None)
                if text and number is None and not text.isdigit():
                    return Answer(q.id, (), text)
                click.echo(w.invalid)
        except (click.exceptions.Abort, EOFError) as exc:
            raise ReviewDismissed("review dismissed at the terminal") from exc


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
