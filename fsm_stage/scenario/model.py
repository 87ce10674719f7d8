"""The scenario file model: ``Scenario``, its step kinds and the checks an ``expect`` step makes.

Frozen attrs classes, one per step kind (``UserPrompt``, ``Command``, ``ModelStep`` with its
``ToolCall`` entries and their ``Review``, ``EligibilityFlip``, ``EndTurn``, ``AnswerReview`` /
``Resume`` (a suspended review answered later), ``Expect`` with its
``NextRequest`` / ``PrefixExpect``), the ``Step`` union, ``SessionSettings`` and
``SystemText`` (an invalid file raises ``fsm_stage.errors.ConfigError``). ``UNSET`` marks an
``Expect`` field that is not checked (``None`` is a value: "nothing"). Build them with
``fsm_stage.scenario.load_scenario``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from fsm_stage.constants import EXIT_PLAN_MODE, GOTO_STAGE
from fsm_stage.runtime.commands import parse_command

REVIEWED_TOOLS: frozenset[str] = frozenset({EXIT_PLAN_MODE, GOTO_STAGE})
"""Tools whose recorded outcome is a review answer (the tool itself is provided by fsm_stage)."""


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Literal[_Unset.UNSET] = _Unset.UNSET
"""Marks an ``Expect`` field the scenario does not check (distinct from ``None`` = "nothing")."""

ReviewKind = Literal["approve", "keep", "feedback", "dismiss", "abort", "suspend"]
_REVIEW_WORDS: tuple[str, ...] = ("approve", "keep", "dismiss", "abort", "suspend")


@attrs.frozen
class Review:
    """How the scripted human answers a review (plan-review / stage-review).

    ``approve``: exactly ``Approve``; ``keep``: the keep option with no text; ``feedback``:
    custom text ``feedback`` (not consent); ``dismiss``: the user dismisses the dialog
    (``ReviewDismissed``); ``abort``: the review fails for another reason (turn aborted);
    ``suspend``: the reviewer cannot answer now (``ReviewSuspended``): the call stays open and
    the turn is suspended until an ``answer`` step and a ``resume`` step.
    """

    kind: ReviewKind
    feedback: str | None = None


@attrs.frozen
class ToolCall:
    """One tool call of a model step.

    ``args``: the JSON arguments. ``review``: the scripted answer when the call asks a review
    (``exit_plan_mode`` / ``goto_stage``, or your tool under an ``ask`` rule of the tool policy;
    the simulator checks against the graph which calls can). ``result``: the canned text answering a tool
    that neither fsm_stage nor the graph provides (your own tools, replayed logs); ``None`` = the
    tool must exist. ``error``: a flag — the ``result`` text is returned as the tool's failure.
    ``id``: the call id (default ``call-<request>-<index>``; unique within the scenario).
    """

    tool: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    review: Review | None = None
    result: str | None = None
    error: bool = False
    id: str | None = None


@attrs.frozen
class UserPrompt:
    """``user: TEXT``: a user prompt, steered into the agent (wakes it when idle)."""

    text: str
    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class Command:
    """``command: /NAME ARGS``: a slash command line as typed.

    ``name`` is the lowercase word after ``/``; ``args`` the raw rest of the line including the
    separating whitespace (docs/session-log.md), e.g. ``" Plan a change"``.
    """

    line: str
    where: str = attrs.field(default="", eq=False)

    @property
    def name(self) -> str:
        """Command name without the slash (lowercased, as ``runtime.commands.parse_command``)."""
        parsed = parse_command(self.line)
        return parsed.name if parsed is not None else ""

    @property
    def args(self) -> str:
        """Raw input after the name, separating whitespace included (may be ``""``)."""
        parsed = parse_command(self.line)
        return parsed.raw_input if parsed is not None else ""


@attrs.frozen
class ModelStep:
    """``model:``: one model response (assistant ``text`` plus tool ``calls``) and the token
    ``usage`` its request reports (the log's keys, ``USAGE_KEYS``; None: none), which stage
    budgets count."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    where: str = attrs.field(default="", eq=False)
    usage: Mapping[str, int] | None = None


#: The keys of a model step's ``usage`` (as ``assistant/message.usage`` logs them).
USAGE_KEYS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens")


@attrs.frozen
class EligibilityFlip:
    """``eligible: {NAME: BOOL}``: set named eligibility predicates (effective at once)."""

    values: Mapping[str, bool]
    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class EndTurn:
    """``end_turn: completed | aborted | blocked``: the open turn ends here.

    ``aborted``: the user stops the turn before the next model request. ``completed``: asserts
    the turn has ended on its own (a model step without tool calls) — an error otherwise.
    ``blocked``: the waiting turn starts and a budget stops it before its first request (its
    budget review, when it asks one, waits for an ``answer`` step) — an error otherwise.
    """

    reason: Literal["completed", "aborted", "blocked"] = "aborted"
    where: str = attrs.field(default="", eq=False)


AnswerOutcome = Literal["approve", "keep", "dismiss", "expire"]


@attrs.frozen
class AnswerReview:
    """``answer: {call, outcome, option, feedback, reviewer, edited}``: a human answers a
    suspended review later (``fsm_stage.reviews._answer.answer_review``, as ``fsm-stage review``
    does), or its deadline closes it.

    ``call``: the call id whose review is answered, or ``last`` (the latest open review, a
    budget review included); ``outcome``: ``approve`` / ``keep`` / ``dismiss``, or ``expire``
    (the review's deadline passes: it is closed with its ``on_deadline`` answer, ``by:
    deadline``; the review must have a deadline); ``option``: the approve option's label
    (default the first, ``Approve``); ``feedback``: the reviewer's comments (``keep`` only);
    ``reviewer``: the named reviewer answering (``vote_review``: the review's rules decide, a
    quorum takes one step per reviewer; None: nobody named); ``edited``: approve with edits,
    the reviewer's version of the handoff document or plan (``approve`` only).
    """

    outcome: AnswerOutcome
    call: str = "last"
    option: str | None = None
    feedback: str | None = None
    where: str = attrs.field(default="", eq=False)
    reviewer: str | None = None
    edited: str | None = None


@attrs.frozen
class Resume:
    """``resume: true``: the host resumes the suspended turn (``Loop.resume()``): the suspended
    call writes its result from the logged answer and the turn goes on."""

    where: str = attrs.field(default="", eq=False)


@attrs.frozen
class PrefixExpect:
    """Expected prompt-cache effect of the next request versus the previous one.

    ``system`` / ``tools``: ``kept`` (byte-identical) or ``changed``; ``messages``: ``kept``
    (the previous messages are a prefix of the new ones) or ``broken``; ``model``: ``kept`` or
    ``switched`` (a stage or plan mode chose another model: no cached prefix is reused).
    """

    system: Literal["kept", "changed"] | None = None
    tools: Literal["kept", "changed"] | None = None
    messages: Literal["kept", "broken"] | None = None
    model: Literal["kept", "switched"] | None = None


@attrs.frozen
class NextRequest:
    """Checks on the next model request: texts it must / must not contain, its prefix, and the
    ``stage`` / ``plan_mode`` it is sent in and the ``model`` it goes to (a provider-qualified
    name, or ``default`` for the host's own; ``None``: not checked). ``fsm-stage scenario`` writes
    the recorded stage and plan mode of every request this way, so a replay under a changed graph
    fails where it diverges."""

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    prefix: PrefixExpect | None = None
    stage: str | None = None
    plan_mode: bool | None = None
    model: str | None = None


@attrs.frozen
class Expect:
    """``expect:``: checks at this point of the scenario; ``UNSET`` fields are not checked.

    ``stage``: the current (logged) stage. ``plan_mode``: logged plan mode. ``pending_stage``:
    the stage of the pending transition, ``None`` = none pending. ``pending_plan``: the target
    of the pending plan-mode selection (``true`` entering, ``false`` leaving, ``None`` none).
    ``handoff_exists`` / ``handoff_missing``: stages whose handoff document must / must not
    exist — documents this run wrote (leftovers of earlier runs in a fixed cwd do not count).
    ``next_request``: checked when the next request is made.
    """

    stage: str | _Unset = UNSET
    plan_mode: bool | _Unset = UNSET
    pending_stage: str | _Unset | None = UNSET
    pending_plan: bool | _Unset | None = UNSET
    handoff_exists: tuple[str, ...] = ()
    handoff_missing: tuple[str, ...] = ()
    next_request: NextRequest | None = None
    where: str = attrs.field(default="", eq=False)


Step: TypeAlias = (UserPrompt | Command | ModelStep | EligibilityFlip | EndTurn | Expect | AnswerReview
                   | Resume)


@attrs.frozen
class SessionSettings:
    """``session:``: ``id`` (default: the scenario file's stem), ``cwd`` (relative to the
    scenario file; ``None`` = a fresh temporary directory per run), ``subagent`` (header
    ``origin: subagent``, ``delegationDepth: 1``), ``parent`` (a subagent's header
    ``parentSession``; default ``<id>-parent``; only with ``subagent: true``).

    ``id`` has no length limit (a recorded log's id is replayed as it is): folders named after
    it use ``fsm_stage.handoff.session_segment``, which keeps ids up to ``MAX_SEGMENT_LENGTH``
    (128) characters as they are and shortens longer ones with a hash suffix.
    """

    id: str | None = None
    cwd: str | None = None
    subagent: bool = False
    parent: str | None = None


@attrs.frozen
class SystemText:
    """A host system-prompt section the scenario adds (the orchestrator's own prompt): ``name``,
    ``order`` (plan mode's section is order 50) and ``text``."""

    name: str
    order: int
    text: str


@attrs.frozen
class Scenario:
    """A parsed scenario. ``graph`` and ``reviewers`` (a reviewers file resolving ``@group``
    approvers for ``answer`` steps that name a reviewer; None: none) are resolved against the
    scenario file's folder."""

    path: str
    graph: Path
    session: SessionSettings
    eligible: Mapping[str, bool]
    steps: tuple[Step, ...]
    description: str = ""
    system: tuple[SystemText, ...] = ()
    reviewers: Path | None = None

    @property
    def session_id(self) -> str:
        """The session id: ``session.id`` or the file stem."""
        return self.session.id if self.session.id is not None else (Path(self.path).stem or "sim")

    def resolved_cwd(self) -> Path | None:
        """``session.cwd`` resolved against the scenario folder, or None (use a temp dir)."""
        if self.session.cwd is None:
            return None
        return (Path(self.path).parent / self.session.cwd).resolve()
