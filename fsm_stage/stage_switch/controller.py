"""``StageController``: the stage switch over one compiled stage graph.

State is a fold of the log (``StageProjection``); ``goto_stage`` (``stage_switch.goto``) and
``/stage`` (``stage_switch.command``) make a transition pending or commit a user jump; the
accepted pre-step (``on_pre_step``) applies a pending transition durably first, through the
compiled machine's edge; an approval whose stage, edge, guard or handoff document changed is
closed (``redeemed applied: false`` with the reason, and one notice to the model), never
applied as a jump.
Attach and close go through ``fsm_stage.runtime.controller.ControllerLifecycle``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm_stage.config import GraphConfig
from fsm_stage.constants import (
    CURRENT_STAGE_PREFIX,
    STAGE_POLICY_CONTEXT,
    STAGE_POLICY_ORDER,
    STAGE_SWITCHED_PREFIX,
    USER_MESSAGE,
)
from fsm_stage.driver._pending import FLUSH_RETRY_ERRORS, PendingStore, Selection, redeem_once, session_lock
from fsm_stage.graph import CompiledGraph, StageCursor, compile_graph, goto
from fsm_stage.handoff import HandoffStore, SandboxPolicyProvider
from fsm_stage.log.events import NewEvent, Replace, SurfaceOp
from fsm_stage.log.projections import StageProjection, StageState
from fsm_stage.log.surface import shadow_range
from fsm_stage.policy._ask import PolicyGate
from fsm_stage.prompts import Catalog, load_catalog, render, section_lists_targets_plainly
from fsm_stage.reviews._answer import answer_review, current_payload_sha256
from fsm_stage.reviews._channel import ReviewChannel, check_review_channel
from fsm_stage.reviews._flow import redeemed_spec, state_of
from fsm_stage.reviews._fold import ReviewAnswer, ReviewRecord, stage_payload_sha256
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.assembly import ContextEntry
from fsm_stage.runtime.commands import CommandReply, Disposer
from fsm_stage.runtime.controller import ControllerLifecycle, Registration
from fsm_stage.runtime.messages import IdFactory, Message, new_id, notice, stage_notice
from fsm_stage.runtime.stage_models import check_aliases
from fsm_stage.runtime.tools import ToolOutput, ToolSpec
from fsm_stage.stage_switch import durable
from fsm_stage.stage_switch.command import StageCommand, handle_stage_command
from fsm_stage.stage_switch.durable import approved, approved_transition, graph_specs, redeem_specs
from fsm_stage.stage_switch.eligibility import Eligibility, Predicate
from fsm_stage.stage_switch.goto import requires_handoff, run_goto_stage
from fsm_stage.stage_switch.models import stage_model_source
from fsm_stage.stage_switch.state import (
    ControllerClosedError,
    PendingTransition,
    SetOutcome,
    StageStatus,
)
from fsm_stage.stage_switch.texts import (
    CATALOG_NAME,
    FLUSH_FAILURE_MESSAGE,
    PROJECTION_UNAVAILABLE_MESSAGE,
    check_stage_name,
    should_narrate,
    stage_body,
)
from fsm_stage.stage_switch.tool import (
    GotoStageTool,
    goto_stage_tool_spec,
    present_call,
    present_result,
    render_result,
)
from fsm_stage.tokens import TokenMeter

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session

__all__ = ["StageController"]

_log = logging.getLogger("fsm_stage.stage_switch")
_WHAT = "stage switch"
STAGE_SWITCH_PLUGIN = "stage-switch"
"""``source.plugin`` of the stage switch's plain notices (not stage records: no summary)."""


class StageController:
    """The stage switch over one compiled stage graph (see the package docstring).

    Construction (plain injection; every seam is optional except the graph):

    * ``graph``: a ``GraphConfig`` (compiled with ``compile_graph``, cached) or a ``CompiledGraph``;
    * ``review``: the ``ReviewChannel`` (default: the runtime's, at ``attach``);
    * ``handoffs``: a ``HandoffStore`` (e.g. ``LocalHandoffStore()``); without one a full
      transition fails with ``errors.no_fs``;
    * ``token_meter``: required only when ``min_handoff_tokens`` is configured;
    * ``sandbox``: optional ``SandboxPolicyProvider`` resolved once per handoff write;
    * ``catalog`` / ``override_dir``: wording (default: ``stage_switch`` in the graph's language,
      resolved once here);
    * ``logger``: where a failed flush is logged at error level; ``id_factory``: message ids;
    * ``accept_graph_change``: continue a log recorded with another graph fingerprint (the new
      one is logged) instead of raising ``GraphChangedError`` (docs/reviews.md).

    Use ``attach(runtime)`` (or, equivalently, ``runtime.attach(controller)``) to contribute
    ``stage:policy``, ``goto_stage``, ``/stage`` (when the runtime has commands), the pre-step
    participant and the ``stage`` service; ``close()`` removes them all. Read the state with
    ``get(agent)`` (``StageStatus(current, pending)``) or ``current(session)`` /
    ``pending_stage(session)``. The methods can also be called directly by a host with its own
    wiring.
    """

    def __init__(
        self,
        graph: GraphConfig | CompiledGraph,
        *,
        review: ReviewChannel | None = None,
        handoffs: HandoffStore | None = None,
        token_meter: TokenMeter | None = None,
        sandbox: SandboxPolicyProvider | None = None,
        catalog: Catalog | None = None,
        override_dir: str | Path | None = None,
        logger: logging.Logger | None = None,
        id_factory: IdFactory = new_id,
        accept_graph_change: bool = False,
    ) -> None:
        if not isinstance(graph, GraphConfig | CompiledGraph):
            raise TypeError("StageController needs a stage graph (a GraphConfig or CompiledGraph, "
                            f"e.g. load_config(path).graph), got {type(graph).__name__}")
        check_review_channel(review, "StageController(review=)")
        if handoffs is not None and not callable(getattr(handoffs, "write", None)):
            raise TypeError("StageController(handoffs=) must be a HandoffStore (e.g. LocalHandoffStore()) "
                            f"or None, got {type(handoffs).__name__}")
        compiled = graph if isinstance(graph, CompiledGraph) else compile_graph(graph)
        if compiled.config is None:
            raise TypeError("StageController needs a stage graph, not the plan-mode machine")
        self.graph: CompiledGraph = compiled
        self.config: GraphConfig = compiled.config
        check_aliases({f"stages[{i}] ({st.name})": st for i, st in enumerate(self.config.stages)},
                      self.config.models)
        self.catalog: Catalog = (
            catalog if catalog is not None
            else load_catalog(CATALOG_NAME, self.config.language, override_dir)
        )
        self.review = review
        self.handoffs = handoffs
        self.token_meter = token_meter
        self.sandbox = sandbox
        self.logger = logger if logger is not None else _log
        self.id_factory = id_factory
        self.accept_graph_change = accept_graph_change
        self.pending: PendingStore[str] = PendingStore(logger=self.logger, level=logging.ERROR)
        self.projection = StageProjection()
        self.eligibility = Eligibility(self.logger)
        self.lifecycle = ControllerLifecycle(_WHAT)

    # --- composition -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self.lifecycle.closed

    def attach(self, runtime: Runtime) -> None:
        """Register ``stage:policy`` (order 116), ``goto_stage``, ``/stage`` (when the runtime has
        a command registry), the pre-step participant and the ``stage`` service (S94).

        All or nothing: a clash (``ValueError``, e.g. a second stage switch on one runtime)
        leaves nothing registered. Raises ``ControllerClosedError`` (a ``RuntimeError``) when
        the controller is closed and ``RuntimeError`` when it is already attached, through the
        same ``ControllerLifecycle`` plan mode uses."""
        self.lifecycle.attach(runtime, self._contribute)

    def _contribute(self, reg: Registration) -> None:
        if self.review is None:
            self.review = reg.runtime.review
        reg.context(ContextEntry(STAGE_POLICY_CONTEXT, STAGE_POLICY_ORDER, self.policy_text))
        reg.tool(GotoStageTool(self))
        reg.command(StageCommand(self))
        reg.pre_step(self.on_pre_step)
        reg.model_source(stage_model_source(self))
        reg.service("stage", self)
        reg.tool_gate(PolicyGate(self))
        if self.config.min_handoff_tokens is not None and self.token_meter is None:
            # Construction and attach never fail for this (spec); say it once, now, instead
            # of only failing every threshold-deciding goto_stage later.
            self.logger.warning(
                "stage graph %r sets min_handoff_tokens=%s but this StageController has no "
                "token_meter: every goto_stage will fail with errors.missing_token_meter; "
                "pass token_meter= (e.g. fsm_stage.tokens.HeuristicTokenMeter()) before attach",
                self.config.name, self.config.min_handoff_tokens)

    def close(self) -> None:
        """Unregister everything, forget predicates and pending transitions, and mark the
        controller closed: open reviews then fail with ``RELOADED_MESSAGE`` and projection
        reads raise ``ControllerClosedError`` (S38, S60, S96). Idempotent."""
        if self.lifecycle.close():
            self.eligibility.clear()
            self.pending.clear_all()

    dispose = close

    # --- reads --------------------------------------------------------------------------------

    def session_lock(self, session: Session) -> threading.RLock:
        """The per-session lock held around fold → fire → append (docs/architecture.md concurrency), so
        a host driving one session from several threads never interleaves two stage writes.
        It is ``fsm_stage.driver._pending.session_lock(session.id)``: keyed by the session id
        like the pending selections, so every ``Session`` wrapper of one log and plan mode
        share it."""
        return session_lock(session.id)

    def _state(self, session: Session) -> StageState:
        if self.closed:
            raise ControllerClosedError("stage switch", PROJECTION_UNAVAILABLE_MESSAGE)
        return session.read(self.projection)

    def projection_state(self, session: Session) -> StageState | None:
        """The stage projection's state for ``session`` (None once closed, S96)."""
        return None if self.closed else session.read(self.projection)

    def current(self, session: Session) -> str:
        """The current stage: the last logged record, else ``initial``. Raises
        ``ControllerClosedError`` after ``close()`` (S97)."""
        stage: str | None = self._state(session).stage
        return stage if stage is not None else self.graph.initial

    def graph_record(self, session: Session) -> list[NewEvent]:
        """``[fsm/graph]`` to write with the next review request while ``session``'s log records
        no graph (or, with ``accept_graph_change``, another one); ``[]`` when it records this
        graph. Raises ``GraphChangedError`` for another recorded graph without it."""
        return graph_specs(self, session)

    def pending_stage(self, session: Session) -> str | None:
        """The stage of the pending transition of ``session``, if any: a user selection made
        during an open turn (memory), else the approved, unredeemed stage review (the log)."""
        selection = self.pending.get(session)
        if selection is not None:
            return selection.target
        record = approved(session)
        return record.target if record is not None else None

    def get(self, agent: Agent) -> StageStatus:
        """``StageStatus(current, pending)`` for ``agent``'s session — the same reading style as
        ``PlanModeController.get(agent)``; ``current(session)`` and ``pending_stage(session)``
        are the two parts. Raises ``ControllerClosedError`` after ``close()``."""
        session = agent.session
        return StageStatus(self.current(session), self.pending_stage(session))

    def pending_transition(self, session: Session) -> PendingTransition | None:
        """The pending transition's payload for ``session``, if any (see ``pending_stage``)."""
        selection = self.pending.get(session)
        if selection is not None:
            payload: PendingTransition = selection.payload
            return payload
        record = approved(session)
        return approved_transition(session, record) if record is not None else None

    def sorted_stages(self) -> str:
        """Configured names sorted alphabetically, ``", "``-joined (diagnostics)."""
        return ", ".join(sorted(self.config.stage_names))

    # --- eligibility --------------------------------------------------------------------------

    def register_eligibility(self, predicate: Predicate, *, name: str | None = None) -> Disposer:
        """Register a synchronous ``(agent) -> bool`` predicate; returns its disposer.

        Unnamed: gates the ``stage:policy`` guidance (any true → shown; S31–S33, S37f: the same
        callable is stored once). Named: a guard graph edges reference by ``name``; a name holds
        one predicate (another callable under a taken name raises ``ValueError``). Raises
        ``TypeError`` for a non-callable (S37e). See ``Eligibility.register``.
        """
        return self.eligibility.register(predicate, name=name)

    def is_eligible(self, agent: Agent) -> bool:
        """True when any unnamed predicate returns true (registration order, stops at the
        first true); False with none."""
        return self.eligibility.is_eligible(agent)

    def guards_hold(self, agent: Agent | None, names: Sequence[str]) -> bool:
        """True when every named guard is registered and returns exactly True for ``agent``."""
        return self.eligibility.guards_hold(agent, names)

    def eligible_fn(self, agent: Agent | None) -> Callable[[tuple[str, ...]], bool]:
        """The ``eligible`` callback ``CompiledGraph`` asks about an edge's guard names."""
        return lambda names: self.guards_hold(agent, names)

    def targets(self, agent: Agent | None, session: Session | None = None) -> tuple[str, ...]:
        """Stages the model may move to right now: edges out of the current stage whose guards
        hold, in configured order (for a current stage no longer in the graph: every configured
        stage except it, S37d)."""
        sess = session if session is not None else (agent.session if agent is not None else None)
        if sess is None:
            return ()
        current = self.current(sess)
        if not self.graph.has_state(current):
            return tuple(n for n in self.config.stage_names if n != current)
        return tuple(e.target for e in self.graph.edges_from(current) if self.guards_hold(agent, e.guards))

    # --- policy context -----------------------------------------------------------------------

    def variables(self, agent: Agent | None) -> dict[str, str] | None:
        """``{stage_current, stage_targets}`` for ``agent``; None without an agent (S36, S37a)."""
        if agent is None:
            return None
        session = agent.session
        return {
            "stage_current": self.current(session),
            "stage_targets": ", ".join(self.targets(agent, session)),
        }

    def policy_text(self, agent: Agent | None) -> str:
        """Text of ``stage:policy``: ``""`` without an agent or while no unnamed predicate holds;
        otherwise ``section`` rendered with the variables (S31–S34)."""
        if agent is None or self.closed or not self.is_eligible(agent):
            return ""
        variables = self.variables(agent)
        assert variables is not None
        if not variables["stage_targets"] and section_lists_targets_plainly(self.config.section):
            return self._no_targets_text(agent)
        return render(self.config.section, **variables)

    def _no_targets_text(self, agent: Agent) -> str:
        """``notice.policy_blocked`` (edges out of the current stage exist, every one waits for a
        guard; names the closed guards in configured order) or ``notice.policy_terminal`` (no edge)."""
        current = self.current(agent.session)
        closed: dict[str, None] = {}
        for edge in self.graph.edges_from(current) if self.graph.has_state(current) else ():
            for name in edge.guards:
                if not self.guards_hold(agent, (name,)):
                    closed[name] = None
        if closed:
            return self.catalog.text("notice.policy_blocked", stage=current, guards=", ".join(closed))
        return self.catalog.text("notice.policy_terminal", stage=current)

    # --- messages -----------------------------------------------------------------------------

    def stage_prompt(self, stage: str, *, narrate: bool) -> Message:
        """The stage-prompt record message (``Current stage: <stage>`` summary), with the
        user-switch prefix when ``narrate``."""
        text = stage_body(self.config, stage)
        if narrate:
            text = self.catalog.text("notice.user_switch_prefix", stage=stage) + text
        return stage_notice(text, summary=f"{CURRENT_STAGE_PREFIX}{stage}", id_factory=self.id_factory)

    def handoff_notice(self, stage: str, path: str, *, edited: bool = False) -> Message:
        """The handoff notice record (``Stage switched to <stage>`` summary): the archive wording
        (then ``notice.handoff_edited`` when the reviewer edited the document), a blank line, then
        the stage body; never narrated (S77)."""
        text = self.catalog.text("notice.handoff_replaced", stage=stage, path=path) + (
            " " + self.catalog.text("notice.handoff_edited") if edited else "") + "\n\n" + stage_body(
            self.config, stage)
        return stage_notice(text, summary=f"{STAGE_SWITCHED_PREFIX}{stage}", id_factory=self.id_factory)

    # --- user jumps -----------------------------------------------------------------------------

    def _narrate_now(self, session: Session, target: str) -> bool:
        return should_narrate(self._state(session).stage_at_last_header, self.graph.initial, target)

    def _jump(self, session: Session, target: str, message: Message, extra: Sequence[NewEvent] = ()) -> None:
        """Durable-first user jump: append ``message`` (inside the machine's commit for a
        configured target) in one batch with ``extra`` (a superseded approval's
        redemption), then the state follows from the log."""
        current = self.current(session)

        def commit() -> None:
            if extra:  # the stage prompt stays model-visible (surface append) in the batch
                session.append_many([NewEvent(USER_MESSAGE, dict(message), "append"), *extra])
            else:
                session.append_message(message)

        if self.graph.has_state(target):
            self.graph.jump(StageCursor(current), target, commit=commit)
        else:
            commit()

    def set(self, agent: Agent, stage: str) -> SetOutcome:
        """Switch ``agent``'s session to ``stage`` as the user (no validation;, S88, S89).

        ``stage == current`` → ``"noop"`` (a pending transition is neither consulted nor
        cancelled, S93b). During an open turn → pending (narrated at flush time), ``"queued"``.
        Otherwise the stage prompt (narrated per) is appended now and any pending
        transition is discarded after the append succeeded (Appendix B1) → ``"committed"``.
        A failed append raises and changes nothing. Raises ``ControllerClosedError`` (a
        ``RuntimeError``) after ``close()``, as ``PlanModeController.set`` does. The name is not
        checked against the graph (S89), but it must be a ``str`` (``TypeError``) that
        ``constants.STAGE_NAME_RE`` fully matches (``ValueError``): any other name could never
        be read back as a stage record, so it would be written while the fold stays put.
        """
        check_stage_name(stage)
        self.lifecycle.ensure_open()
        session = agent.session
        with self.session_lock(session):
            current = self.current(session)
            if stage == current:
                return "noop"
            if session.is_turn_open:
                self.pending.put(session, Selection(stage, True, PendingTransition("user", current)))
                return "queued"
            narrate = self._narrate_now(session, stage)
            superseded = redeem_specs(session, applied=False, reason="superseded")
            self._jump(session, stage, self.stage_prompt(stage, narrate=narrate), superseded)
            self.pending.clear(session)
            return "committed"

    def handle_stage_command(self, agent: Agent, raw_input: str) -> CommandReply:
        """``/stage [stage [message]]`` (S82–S91, S93d); see ``command.handle_stage_command``."""
        return handle_stage_command(self, agent, raw_input)

    # --- goto_stage -----------------------------------------------------------------------------

    def tool_spec(self) -> ToolSpec:
        """The ``goto_stage`` schema: ``stage`` (required), ``handoff`` (optional), in that
        order; output ``{approved: true, stage, handoffPath?}`` (S39)."""
        return goto_stage_tool_spec(self.catalog, self.config.stage_names)

    def render_result(self, value: Mapping[str, Any], *, dropped_handoff: bool = False) -> str:
        """Success text: ``tool_result.approved`` then ``tool_result.handoff_path`` for a full
        transition (S42); for a light transition that was given a non-blank handoff,
        ``tool_result.handoff_dropped`` tells the model the document was not saved (S66)."""
        return render_result(self.catalog, value, dropped_handoff=dropped_handoff)

    def present_call(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Call card: generic, titled by the target; body = the ``handoff`` argument when present
        (even empty), else ``present.light_call_content`` (S40)."""
        return present_call(self.catalog, args)

    def present_result(self, args: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        """Result card: generic, ``present.result_title``, the result's content unchanged (S41)."""
        return present_result(self.catalog, args, result)

    def requires_handoff(self, session: Session) -> bool:
        """Full (True) or light (False), decided now (S63, S64, S68). Raises
        ``ToolFailure(errors.missing_token_meter)`` when a threshold is set without a meter."""
        return requires_handoff(self, session)

    async def goto_stage(self, args: Mapping[str, Any], agent: Agent | None,
                         signal: AbortSignal | None = None) -> ToolOutput:
        """Execute ``goto_stage`` (validation chain plus graph edges; S43–S68; see
        ``fsm_stage.stage_switch.goto.run_goto_stage``).

        Returns ``ToolOutput(value, text, meta)`` on approval (the transition is then pending);
        raises ``ToolFailure`` with the model-facing reason otherwise. No failure writes a log
        event or sets a pending transition. ``asyncio.CancelledError`` propagates.
        """
        return await run_goto_stage(self, args, agent, signal)

    def answer_review(self, session: Session, review_id: str, outcome: str, *, feedback: str | None = None,
                      option: str | None = None, by: str = "api", edited: str | None = None) -> ReviewAnswer:
        """Record a human's answer to the open stage review ``review_id`` (``approve`` with an
        optional ``option`` label choosing the shape and an ``edited`` handoff document, ``keep``
        with ``feedback``, ``dismiss``); see ``fsm_stage.reviews._answer.answer_review``."""
        return answer_review(session, review_id, outcome, feedback=feedback, option=option, by=by,
                             edited=edited)

    # --- boundary -----------------------------------------------------------------------------

    def on_pre_step(self, agent: Agent, messages: list[Message], aborted: bool) -> list[Message]:
        """Accepted pre-step: flush a pending transition, else inject the initial
        stage prompt once for a top-level session. An aborted step changes nothing (S30a)."""
        if aborted or self.closed:
            return list(messages)
        session = agent.session
        with self.session_lock(session):
            changed = graph_specs(self, session)
            if changed and state_of(session).graph is not None:
                session.append_many(changed)  # accept_graph_change: record the new graph now
            selection = self.pending.get(session)
            record = approved(session)
            if selection is None and record is not None:
                def apply(rec: ReviewRecord, expect: int) -> None:
                    self._apply(agent, Selection(rec.target, False, approved_transition(session, rec)),
                                expect_last_seq=expect)

                try:  # conditional: a worker sharing the session may apply it first (docs/postgres.md)
                    redeem_once(session, approved, apply)
                except FLUSH_RETRY_ERRORS as error:
                    self.logger.error(FLUSH_FAILURE_MESSAGE.format(stage=record.target, error=error))
                return list(messages)
            if selection is not None:
                target = selection.target
                return self.pending.flush(
                    agent, messages, aborted=aborted, apply=self._apply,
                    failure=lambda error: FLUSH_FAILURE_MESSAGE.format(stage=target, error=error))
            state = self._state(session)
            if state.has_stage_prompt or session.header.is_subagent:
                return list(messages)
            return [*messages, self.stage_prompt(self.current(session), narrate=False)]

    def _apply(self, agent: Agent, selection: Selection[str], *,
               expect_last_seq: int | None = None) -> list[Message]:
        """Durably apply ``selection`` (called by ``PendingStore.flush``); raises on failure.
        An approved transition's batch (with its redemption) is appended with
        ``expect_last_seq`` when given (``AppendConflictError``: nothing written)."""
        session = agent.session
        target = selection.target
        payload: PendingTransition = selection.payload
        if payload.kind == "user":
            narrate = selection.narrate and self._narrate_now(session, target)
            superseded = redeem_specs(session, applied=False, reason="superseded")
            self._jump(session, target, self.stage_prompt(target, narrate=narrate), superseded)
            return []
        if payload.review_id is not None and self.current(session) == target:
            # The log already shows the target (a crash kept the notice but tore off the rest of
            # its batch, or the user moved there): close the approval, switch nothing twice.
            session.append_many([redeemed_spec(payload.review_id, False, "already-current")],
                                expect_last_seq=expect_last_seq)
            return []
        if payload.review_id is not None:
            reason = self._unredeemable(agent, session, payload, target)
            if reason is not None:
                self._not_applied(session, payload.review_id, target, reason, expect_last_seq)
                return []
        redeem = [redeemed_spec(payload.review_id, True)] if payload.review_id is not None else []
        if payload.handoff_path is None:
            message = self.stage_prompt(target, narrate=False)
            op: SurfaceOp = "append"
            sources: list[int] | None = None
        else:
            rec = state_of(session).records.get(payload.review_id or "")
            edited = rec is not None and durable.write_edited(self, session, rec)
            message = self.handoff_notice(target, payload.handoff_path, edited=edited)
            nodes = list(session.surface())
            head_is_system = session.head_is_system
            shadowed = shadow_range(nodes, head_is_system)
            if shadowed:
                op, sources = Replace(shadowed[0], shadowed[-1]), shadowed
            else:
                op, sources = "append", None

        def commit() -> None:
            if redeem:
                session.append_many([NewEvent(USER_MESSAGE, dict(message), op, sources), *redeem],
                                    expect_last_seq=expect_last_seq)
            else:
                session.append_message(message, surface_op=op, source_event_seqs=sources)

        current = self.current(session)
        cursor = StageCursor(current)
        if not self.graph.has_state(current):
            self.graph.jump(cursor, target, commit=commit)  # the machine has no state to fire from
            return []
        # The machine is asked honestly: its edge fires with the live eligibility and the approval.
        if self.graph.fire(cursor, goto(target), approval=target, eligible=self.eligible_fn(agent),
                           commit=commit):
            return []
        # A guard closed between the check above and the fire: never applied as a jump.
        if payload.review_id is not None:
            self._not_applied(session, payload.review_id, target, "guard-closed", expect_last_seq)
        return []

    def _unredeemable(self, agent: Agent, session: Session, payload: PendingTransition,
                      target: str) -> str | None:
        """Why the approved transition must not be applied now, or None (docs/reviews.md,
        "Redemption"): ``stage-changed`` (the stage is not the review's ``from``),
        ``edge-removed`` (the accepted graph has no such stage or edge), ``guard-closed`` (a guard
        of the edge no longer holds), ``payload-changed`` (the handoff document the reviewer
        approved, read again, hashes differently: edited, deleted, replaced by a symlink)."""
        current = self.current(session)
        if current != payload.from_stage:
            return "stage-changed"
        if not self.graph.has_state(target):
            return "edge-removed"
        if self.graph.has_state(current):
            refusal = self.graph.explain_refusal(StageCursor(current), target, self.eligible_fn(agent))
            if refusal is not None:
                return "guard-closed" if refusal.kind == "guard" else "edge-removed"
        if payload.handoff_path is not None and payload.review_id is not None:
            record = state_of(session).records.get(payload.review_id)
            if record is None or self._document_sha256(session, record) not in durable.accepted_digests(
                    session, record):
                return "payload-changed"
        return None

    def _document_sha256(self, session: Session, record: ReviewRecord) -> str | None:
        """The reviewed payload's hash now: a store that keeps documents itself (``document(path)``,
        e.g. ``MemoryHandoffStore``) is asked, else the file is re-read safely
        (``runtime.reviews.current_payload_sha256``); a missing document hashes as ``"missing"``."""
        reader = getattr(self.handoffs, "document", None)
        if callable(reader) and record.handoff_path is not None:
            text = reader(record.handoff_path)
            return "missing" if not isinstance(text, str) else stage_payload_sha256(record.target, text)
        return current_payload_sha256(session, record)

    def _not_applied(self, session: Session, review_id: str, target: str, reason: str,
                     expect_last_seq: int | None) -> None:
        """Close the approval ``redeemed applied: false`` with ``reason`` and tell the model in
        one model-visible line (``notice.not_applied``), in one conditional batch."""
        current = self.current(session)
        why = self.catalog.text("notice.not_applied_why." + reason.replace("-", "_"), stage=target,
                                current=current)
        text = self.catalog.text("notice.not_applied", stage=target, current=current, why=why)
        message = notice(text, plugin=STAGE_SWITCH_PLUGIN, id_factory=self.id_factory)
        session.append_many([NewEvent(USER_MESSAGE, dict(message), "append"),
                             redeemed_spec(review_id, False, reason)], expect_last_seq=expect_last_seq)
