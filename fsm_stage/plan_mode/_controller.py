"""Plan mode: a reviewed two-state stage (``default`` ↔ ``plan``) over the session log.

Port of ``dsh-plan-mode`` (plan-mode spec B1–B114). ``PlanModeController(config)`` runs the
``compile_plan_mode()`` machine over a fold of the log (last ``plan/mode`` wins) and appends
``plan/mode {active}`` durably first. ``attach(runtime)`` contributes the invariant, the
``plan_mode`` service, the pre-step flush, ``plan:policy`` (order 50), ``exit_plan_mode``,
``/plan`` and the ``plan`` projection through ``fsm_stage.runtime.controller.ControllerLifecycle``;
``close()`` removes them all. ``set``, the flush and the exit's approval hold the shared
per-session lock around fold → fire → append and never await inside it.

``resolve_config`` validates a config (raises ``ConfigError``); ``plan_heading_ok`` /
``plan_title`` read a plan's heading. The mechanism, the public API and the rules where plan
mode differs from the seed are in ``docs/plan-mode-decisions.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

import fsm_stage.reviews._plan as plan_flow
from fsm_stage.config import PlanModeConfig
from fsm_stage.config.review_rules import ReviewRulesConfig
from fsm_stage.constants import (
    APPROVE_LABEL,
    EXIT_PLAN_MODE,
    KEEP_PLANNING_LABEL,
    PLAN_COMMAND,
    PLAN_MODE_EVENT,
    PLAN_POLICY_ORDER,
    PLAN_POLICY_SECTION,
    PLAN_REVIEW_ID,
    PLAN_SOURCE_PLUGIN,
    USER_MESSAGE,
)
from fsm_stage.driver._pending import (
    FLUSH_RETRY_ERRORS,
    HeaderRelative,
    Outcome,
    PendingStore,
    Selection,
    redeem_once,
    session_lock,
    told,
)
from fsm_stage.errors import ConfigError as ConfigError
from fsm_stage.graph import (
    PLAN_DEFAULT,
    PLAN_ENTER,
    PLAN_EXIT,
    PLAN_LEAVE,
    PLAN_STATE,
    CompiledGraph,
    compile_plan_mode,
)
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.log.projections import PlanModeFold, PlanView, fold_plan_mode, plan_mode_problem
from fsm_stage.plan_mode._models import plan_model_source
from fsm_stage.plan_mode._texts import _catalog, plan_heading_ok, plan_title, resolve_config
from fsm_stage.plan_mode._tool import _ExitTool, _PlanCommand
from fsm_stage.policy._ask import PolicyGate
from fsm_stage.reviews._answer import answer_review, current_payload_sha256
from fsm_stage.reviews._channel import Option, Question, ReviewChannel, check_review_channel
from fsm_stage.reviews._flow import redeemed_spec, state_of
from fsm_stage.reviews._fold import ReviewAnswer, ReviewRecord
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.assembly import SystemSection
from fsm_stage.runtime.commands import CommandReply, CommandSpec
from fsm_stage.runtime.controller import ControllerLifecycle, Registration
from fsm_stage.runtime.messages import Block, Message, notice, user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.stage_models import check_aliases
from fsm_stage.runtime.tools import ToolFailure, ToolOutput, ToolSpec

__all__ = [
    "PLAN_PROJECTION_KEY",
    "PLAN_SERVICE",
    "ConfigError",
    "PlanModeController",
    "PlanStatus",
    "fold_plan_mode",
    "plan_heading_ok",
    "plan_title",
    "resolve_config",
]

PLAN_SERVICE: Final = "plan_mode"
"""Name of the service handle ``attach`` publishes (``runtime.service("plan_mode")``)."""
PLAN_PROJECTION_KEY: Final = "plan"
"""Key of the ``{active, pending}`` projection unit (docs/contracts.md)."""

_PLAN_FOLD: Final = PlanModeFold()
_TOLD: Final = HeaderRelative(_PLAN_FOLD)

_log = logging.getLogger(__name__)
_WHAT = "plan-mode controller"


@attrs.frozen
class PlanStatus:
    """``get`` result: the logged ``active`` state and the pending target (None when nothing is
    pending; a pending target may equal ``active`` after a cancellation)."""

    active: bool
    pending: bool | None = None

    def to_json(self) -> dict[str, bool]:
        """``{"active": …}`` plus ``"pending"`` only when a selection exists (B9, B11)."""
        out = {"active": self.active}
        if self.pending is not None:
            out["pending"] = self.pending
        return out


class PlanModeController:
    """Plan mode for every agent of one runtime composition (see the module docstring).

    ``config``: mapping / ``PlanModeConfig`` / None, validated by ``resolve_config`` (raises
    ``ConfigError``). ``language`` / ``override_dir`` select the wording catalog
    ``templates/<language>/plan_mode.yaml``. ``review`` overrides the runtime's review channel.
    ``models``: the graph's model aliases, so a ``plan_mode`` ``model: <alias>`` resolves
    (``GraphConfig.models``; an alias they lack is a ``ConfigError``); ``graph_review``: the
    graph's ``review`` rules, which the exit review follows unless ``plan_mode`` has its own.
    User selections made during an open turn are held in memory per session (B114); an
    approved exit is read from the log (``fsm_stage.reviews``).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | PlanModeConfig | None = None,
        *,
        language: str = "en",
        override_dir: Path | str | None = None,
        review: ReviewChannel | None = None,
        logger: logging.Logger | None = None,
        models: Mapping[str, str] | None = None,
        graph_review: ReviewRulesConfig | None = None,
    ) -> None:
        check_review_channel(review, "PlanModeController(review=)")
        self.catalog = _catalog(language, override_dir)
        self.language = language
        self.models = dict(models) if models is not None else None
        self.graph_review = graph_review
        self.config = resolve_config(config, catalog=self.catalog)
        check_aliases({"plan_mode": self.config}, self.models)
        self.graph: CompiledGraph = compile_plan_mode()
        self.logger = logger if logger is not None else _log
        self._pending: PendingStore[bool] = PendingStore(logger=self.logger, level=logging.WARNING)
        self._review = review
        self.lifecycle = ControllerLifecycle(_WHAT)
        self.tool = _ExitTool(self)
        self.command = _PlanCommand(self)

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self.lifecycle.closed

    def attach(self, runtime: Runtime) -> None:
        """Register everything with ``runtime``: the invariant (scans tracked logs first and
        raises ``RecordShapeError`` on a bad ``plan/mode``, B109), the service handle, the pre-step
        participant, the ``plan:policy`` section, the ``exit_plan_mode`` tool, ``/plan`` when the
        runtime has commands (B48) and the ``plan`` projection when it has projections (B95).
        Nothing stays registered if any step fails. Raises ``RuntimeError`` when already attached
        and ``ControllerClosedError`` (a ``RuntimeError``) when closed, through the same
        ``ControllerLifecycle`` the stage switch uses."""
        self.lifecycle.attach(runtime, self._contribute)

    def _contribute(self, reg: Registration) -> None:
        reg.invariant(self.check_event)
        reg.service(PLAN_SERVICE, self)
        reg.tool_gate(PolicyGate(self))
        reg.pre_step(self.on_pre_step)
        reg.section(SystemSection(PLAN_POLICY_SECTION, PLAN_POLICY_ORDER, self.section_text))
        reg.tool(self.tool)
        reg.command(self.command)
        reg.projection(PLAN_PROJECTION_KEY, PlanView())
        reg.model_source(plan_model_source(self, self.models, self.language))

    def close(self) -> None:
        """Remove every contribution at once and forget pending selections (B93, B94, B101).
        A review still open fails with the reload error when it resolves (B88). Idempotent."""
        if self.lifecycle.close():
            self._pending.clear_all()

    def graph_record(self, session: Session) -> list[NewEvent]:
        """The ``fsm/graph`` record to write with a new plan review of ``session``: the stage
        switch's on the same runtime (``reviews._flow.graph_record``), ``[]`` without one."""
        from fsm_stage.reviews._flow import graph_record

        return graph_record(self.lifecycle.runtime, session)

    @property
    def review(self) -> ReviewChannel | None:
        """The review channel: the one given to the constructor, else the runtime's."""
        if self._review is not None:
            return self._review
        runtime = self.lifecycle.runtime
        return runtime.review if runtime is not None else None

    # --- state ----------------------------------------------------------------------------------

    def logged(self, session: Session) -> bool:
        """The logged state: the last ``plan/mode`` of the log (False when none; B6–B9).
        Raises ``ControllerClosedError`` after ``close()``, as every read does."""
        self.lifecycle.ensure_open()
        return session.read(_PLAN_FOLD)

    def effective(self, agent: Agent) -> bool:
        """The pending target when a selection exists, otherwise the logged state."""
        self.lifecycle.ensure_open()
        target = self._pending_target(agent.session)
        return target if target is not None else self.logged(agent.session)

    def _pending_target(self, session: Session) -> bool | None:
        """The memory user selection's target, else False for an approved, unredeemed exit."""
        sel = self._pending.get(session)
        if sel is not None:
            return sel.target
        return False if plan_flow.approved_exit(session) is not None else None

    def get(self, agent: Agent) -> PlanStatus:
        """``PlanStatus(active=<logged>, pending=<selection target or None>)`` (B9, B11–B13).
        Raises ``ControllerClosedError`` after ``close()``."""
        self.lifecycle.ensure_open()
        return PlanStatus(self.logged(agent.session), self._pending_target(agent.session))

    def set(self, agent: Agent, active: bool) -> Outcome:
        """Select plan mode on/off for ``agent`` (B10–B21).

        ``T`` = the pending target, else the logged state. ``active == T`` → ``"noop"``. During
        an open turn the selection is stored (narrated) → ``"cancelled"`` when it equals the
        logged state, else ``"queued"``. Idle: equal to the logged state → the selection is
        dropped, ``"cancelled"``; otherwise ``plan/mode`` is appended now, the selection
        cleared and, when the last request header told the model otherwise, one notice is
        handed to ``agent.inject`` → ``"committed"``. An append failure propagates with nothing
        changed (B20): the caller must learn that the switch did not happen. Raises
        ``TypeError`` for a non-bool ``active`` and
        ``ControllerClosedError`` (a ``RuntimeError``) after ``close()`` (a selection would never
        be flushed).
        """
        if not isinstance(active, bool):
            raise TypeError(f"plan mode must be selected with a bool, got {active!r}")
        self.lifecycle.ensure_open()
        session = agent.session
        with session_lock(session.id):
            logged = self.logged(session)
            pending = self._pending_target(session)
            target = pending if pending is not None else logged
            if active == target:
                return "noop"
            if session.is_turn_open:
                self._pending.put(session, Selection(active, narrate=True))
                return "cancelled" if active == logged else "queued"
            superseded = plan_flow.redeem_specs(session, applied=False, reason="superseded")
            if active == logged:
                self._pending.clear(session)
                if superseded:
                    session.append_many(superseded)
                return "cancelled"
            self._transition(session, logged, active, approved=False, extra=superseded)
            self._pending.clear(session)
            message = self._narration(session, active)
        if message is not None:
            agent.inject(message)
        return "committed"

    def _transition(self, session: Session, logged: bool, target: bool, *, approved: bool,
                    extra: Sequence[NewEvent] = (), expect_last_seq: int | None = None) -> None:
        """Fire the machine from the folded state; ``commit`` appends ``plan/mode`` first, in
        one batch with ``extra`` (the redemption of an approved exit)."""
        cursor = self.graph.new_cursor(PLAN_STATE if logged else PLAN_DEFAULT)
        trigger = PLAN_ENTER if target else (PLAN_EXIT if approved else PLAN_LEAVE)

        def commit() -> None:
            if extra:
                session.append_many([NewEvent(PLAN_MODE_EVENT, {"active": target}), *extra],
                                    expect_last_seq=expect_last_seq)
            else:
                session.append(PLAN_MODE_EVENT, {"active": target})

        fired = self.graph.fire(cursor, trigger, commit=commit, approval=PLAN_DEFAULT if approved else None)
        if not fired:  # pragma: no cover - callers only ask for a real change
            raise RuntimeError(f"plan mode: {trigger} refused from {cursor.state}")

    def _narration(self, session: Session, target: bool) -> Message | None:
        """The notice for ``target`` when the last header told the model otherwise."""
        was = told(session.read(_TOLD))
        if was is None or was == target:
            return None
        text = self.catalog.text("notice.to_plan" if target else "notice.to_default")
        return notice(text, plugin=PLAN_SOURCE_PLUGIN)

    # --- step boundary --------------------------------------------------------------------------

    def on_pre_step(self, agent: Agent, messages: list[Message], aborted: bool) -> list[Message]:
        """Flush the pending selection at an accepted pre-step (B22–B35).

        Aborted or nothing pending: unchanged. A selection equal to the logged state is cleared
        silently (B25): a boundary narrates only when it appends. Otherwise ``plan/mode`` is
        appended (it lands before the step's
        ``step/start``, B24) and, for a narrated selection whose target differs from what the
        last header told the model, one notice is added after all other messages (B26–B28). An
        append failure is logged once as a warning and keeps the selection (B29, B30).
        """
        if self.closed:
            return messages
        with session_lock(agent.session.id):
            if not aborted and self._pending.get(agent.session) is None:
                record = plan_flow.approved_exit(agent.session)
                if record is not None:
                    def apply(rec: ReviewRecord, expect: int) -> None:
                        self._apply(agent, Selection(False, narrate=False, payload=rec.id),
                                    expect_last_seq=expect)

                    try:  # conditional: a worker sharing the session may apply it first
                        redeem_once(agent.session, plan_flow.approved_exit, apply)
                    except FLUSH_RETRY_ERRORS as error:
                        self.logger.warning(self.catalog.text("log.flush_failed", error=error))
                    return messages
            return self._pending.flush(
                agent, messages, aborted=aborted, apply=self._apply,
                failure=lambda error: self.catalog.text("log.flush_failed", error=error),
            )

    def _apply(self, agent: Agent, selection: Selection[bool], *,
               expect_last_seq: int | None = None) -> list[Message]:
        """Apply ``selection``: a user selection (``payload`` None) redeems a pending approved
        exit as superseded; an approved exit (``payload`` = its review id) redeems it applied,
        conditionally on ``expect_last_seq`` when given (``AppendConflictError``: nothing written)."""
        session = agent.session
        logged = self.logged(session)
        if selection.payload is not None:
            # An approved exit is redeemed only while plan mode is on (else: ``stage-changed``,
            # the mode moved meanwhile) and for the plan that was reviewed (else
            # ``payload-changed``: the model is told; plan mode stays on).
            if self._plan_changed(session, selection.payload):
                text = self.catalog.text("notice.exit_not_applied")
                told = NewEvent(USER_MESSAGE, dict(notice(text, plugin=PLAN_SOURCE_PLUGIN)), "append")
                session.append_many([told, redeemed_spec(selection.payload, False, "payload-changed")],
                                    expect_last_seq=expect_last_seq)
                return []
            redeem = [redeemed_spec(selection.payload, selection.target != logged,
                                    None if selection.target != logged else "stage-changed")]
        else:
            redeem = plan_flow.redeem_specs(session, applied=False, reason="superseded")
        if selection.target == logged:
            if redeem:
                session.append_many(redeem, expect_last_seq=expect_last_seq)
            return []
        message = self._narration(session, selection.target) if selection.narrate else None
        self._transition(session, logged, selection.target, approved=selection.payload is not None,
                         extra=redeem, expect_last_seq=expect_last_seq)
        return [message] if message is not None else []

    def _plan_changed(self, session: Session, review_id: str) -> bool:
        """Whether the logged call's plan no longer hashes to what review ``review_id`` showed."""
        record = state_of(session).records.get(review_id)
        if record is None:
            return True
        now = current_payload_sha256(session, record)
        return now is not None and now != record.payload_sha256

    # --- prompt section ---------------------------------------------------------------------------

    def section_text(self, agent: Agent | None) -> str:
        """``plan:policy`` text: the configured section verbatim while the effective state is
        active, ``""`` otherwise and for agent-less assemblies (B36, B37, B43)."""
        if agent is None or self.closed or not self.effective(agent):
            return ""
        return self.config.section

    # --- exit tool --------------------------------------------------------------------------------

    def tool_spec(self) -> ToolSpec:
        """``exit_plan_mode``: one required string ``plan``; output ``{approved: true}`` (B64, B40)."""
        return ToolSpec(
            name=EXIT_PLAN_MODE,
            description=self.catalog.text("tool.description"),
            parameters={
                "type": "object",
                "properties": {
                    "plan": {"type": "string", "description": self.catalog.text("tool.plan_param")},
                },
                "required": ["plan"],
                "additionalProperties": False,
            },
            output={
                "type": "object",
                "properties": {"approved": {"type": "boolean", "const": True}},
                "required": ["approved"],
                "additionalProperties": False,
            },
        )

    def review_question(self, plan: str) -> Question:
        """The one ``plan-review`` question: header, question, the plan verbatim as ``detail``,
        options Approve / Keep planning, single choice, intent naming Approve (B74, B75)."""
        c = self.catalog
        return Question(
            id=PLAN_REVIEW_ID,
            header=c.text("review.header"),
            question=c.text("review.question"),
            options=(Option(APPROVE_LABEL, c.text("review.approve_description")),
                     Option(KEEP_PLANNING_LABEL, c.text("review.keep_description"))),
            detail=plan,
            multi_select=False,
            intent={"kind": PLAN_REVIEW_ID, "approve": APPROVE_LABEL},
        )

    async def exit_plan_mode(
        self, args: Mapping[str, Any], agent: Agent | None, signal: AbortSignal | None = None
    ) -> ToolOutput:
        """Execute ``exit_plan_mode`` (B66 order, first failure wins; failures raise
        ``ToolFailure``): agent present (B67) → logged state active (B68) → plan heading (B69) →
        review channel (B71) → review (dismissal B85, other failures verbatim B72/B73/B86/B87)
        → not closed meanwhile (B88) → consent (B76, B78–B84). The review is durable
        (``fsm_stage.reviews``): its request and answer are logged, the approved, unredeemed
        exit is the pending exit (applied at the next accepted pre-step, B76, with its
        redemption in one batch), one plan review may be open at a time, a resumed call (same
        call id) reuses its logged answer, and ``ReviewPending`` propagates for a suspending
        channel. Failures change no plan state (B89)."""
        c, name = self.catalog, EXIT_PLAN_MODE
        if self.closed:  # called after close (normally unreachable: the tool is unregistered)
            raise ToolFailure(c.text("errors.reloaded"))
        if agent is None:
            raise ToolFailure(c.text("errors.no_agent", tool=name))
        if not self.logged(agent.session):
            raise ToolFailure(c.text("errors.not_in_plan", tool=name))
        plan = args.get("plan")
        if not isinstance(plan, str) or not plan_heading_ok(plan):
            raise ToolFailure(c.text("errors.bad_plan", tool=name))
        channel = self.review
        if channel is None:
            raise ToolFailure(c.text("errors.no_channel"))
        with agent.session.one_refresh():  # one read until the reviewer is asked, one after
            outcome = await plan_flow.review_exit(self, agent, plan, channel, signal)
        if self.closed:
            raise ToolFailure(c.text("errors.reloaded"))
        answer = outcome.answer
        if answer.expired:  # closed by its deadline: nobody decided
            raise ToolFailure(c.text("errors.expired"))
        if answer.outcome not in ("approve", "keep"):  # dismiss, or nothing any writer logs
            raise ToolFailure(c.text("errors.dismissed"))
        if answer.outcome == "keep":
            if answer.feedback:
                raise ToolFailure(c.text("errors.keep_planning_feedback", feedback=answer.feedback))
            raise ToolFailure(c.text("errors.keep_planning"))
        red = outcome.redemption
        if self.closed or (red is not None and not red.applied and red.reason == "closed"):
            raise ToolFailure(c.text("errors.reloaded"))
        with session_lock(agent.session.id):
            self._pending.clear(agent.session)  # the approval replaces an earlier user selection
        if answer.edited is not None:  # the reviewer edited the plan: one line, then that plan
            return ToolOutput({"approved": True}, c.text("tool.approved_edited") + "\n\n" + answer.edited)
        return ToolOutput({"approved": True}, c.text("tool.approved"))

    def answer_review(self, session: Session, review_id: str, outcome: str, *, feedback: str | None = None,
                      by: str = "api", edited: str | None = None) -> ReviewAnswer:
        """Record a human's answer to the open plan review ``review_id`` (``approve`` / ``keep``
        / ``dismiss``; ``edited``: approve the reviewer's edited plan); see
        ``fsm_stage.reviews._answer.answer_review`` for the errors raised."""
        return answer_review(session, review_id, outcome, feedback=feedback, by=by, edited=edited)

    def present_call(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Call card ``{card: generic, title, kind: other, content: [text block: plan]}`` (B91)."""
        plan = args.get("plan")
        text = plan if isinstance(plan, str) else ""
        title = plan_title(text) or self.catalog.text("card.call_fallback")
        return {"card": "generic", "title": title, "kind": "other",
                "content": [{"type": "text", "text": text}]}

    def present_result(self, content: Sequence[Any]) -> dict[str, Any]:
        """Result card ``{card: generic, title: <review title>, content: <unchanged>}`` (B92)."""
        return {"card": "generic", "title": self.catalog.text("card.result_title"), "content": content}

    # --- /plan ------------------------------------------------------------------------------------

    def command_spec(self) -> CommandSpec:
        """``/plan``: description, hint, images accepted (B49)."""
        return CommandSpec(
            name=PLAN_COMMAND,
            description=self.catalog.text("command.description"),
            hint=self.catalog.text("command.hint"),
            images=True,
        )

    def handle_command(self, agent: Agent, raw_input: str, images: Sequence[Block] = ()) -> CommandReply:
        """``/plan [message]`` and ``/plan off`` (B50–B62). The reply is truthful: ``noop`` while plan
        mode is logged active says it is already on; ``cancelled`` says the pending exit was withdrawn.

        ``raw_input.strip() == "off"`` exactly: refuse images (B51), ``set(False)`` and reply per
        B55; never steers. Anything else: ``set(True)`` first, then steer one user message (images
        first, then the trimmed text) when there is text or an image, whatever the outcome (B62).
        """
        c = self.catalog
        arg = raw_input.strip()
        if arg == "off":
            if images:
                return CommandReply.error(c.text("command.off_images"))
            outcome = self.set(agent, False)
            if outcome == "committed":
                return CommandReply.success(c.text("command.off_now"))
            if outcome == "queued":
                return CommandReply.success(c.text("command.off_deferred"))
            if outcome == "cancelled":
                return CommandReply.success(c.text("command.entry_cancelled"))
            if self.logged(agent.session):
                return CommandReply.success(c.text("command.off_deferred"))
            return CommandReply.success(c.text("command.already_off"))
        outcome = self.set(agent, True)
        if arg or images:
            agent.steer(user_message(arg or None, images=images))
        if outcome == "committed":
            return CommandReply.success(c.text("command.on_now"))
        if outcome == "cancelled":
            return CommandReply.success(c.text("command.exit_cancelled"))
        if outcome == "noop" and self.logged(agent.session):
            return CommandReply.success(c.text("command.already_on"))
        return CommandReply.success(c.text("command.on_deferred"))

    # --- invariant --------------------------------------------------------------------------------

    @staticmethod
    def check_event(event: Event) -> str | None:
        """The ``plan/mode`` invariant: ``active`` must be a boolean (B105–B108). Returns a
        one-line problem naming the offending value as JSON, else None."""
        return plan_mode_problem(event)

    @staticmethod
    def check_log(events: Sequence[Event]) -> list[str]:
        """Every invariant problem of a whole log, in order (empty when valid; B109–B111)."""
        return [p for p in map(plan_mode_problem, events) if p is not None]

