"""``open_session``: the one place a session is composed — a ``Runtime`` with the stage switch
and plan mode of a stage-graph file, an ``InboxAgent`` over the log and its ``StagedSession``
driver — returned as one ``SessionHost``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fsm_stage.errors import ConfigError, UserError

if TYPE_CHECKING:  # the composition's parts load when a session is composed, not at import
    from fsm_stage.config import ConfigFile, GraphConfig, PlanModeConfig
    from fsm_stage.handoff import HandoffStore
    from fsm_stage.log.events import EventLog
    from fsm_stage.plan_mode import PlanModeController
    from fsm_stage.reviews._channel import ReviewChannel
    from fsm_stage.runtime.agent import Agent, InboxAgent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session
    from fsm_stage.runtime.tools import ToolCall
    from fsm_stage.stage_switch import StageController
    from fsm_stage.tokens import TokenMeter

__all__ = ["Predicate", "SessionHost", "guard_names", "open_session"]

Predicate = Callable[["Agent"], bool]
"""A synchronous ``(agent) -> bool`` eligibility predicate."""

H = TypeVar("H", bound="SessionHost")


def guard_names(graph: GraphConfig) -> frozenset[str]:
    """Every guard predicate name the graph's edges reference."""
    return frozenset(g for stage in graph.stages for edge in stage.targets or () for g in edge.guards)


def _predicate(value: bool | Predicate) -> Predicate:
    if isinstance(value, bool):
        return lambda _agent: value
    if not callable(value):
        raise TypeError(f"an eligibility predicate must be a bool or an (agent) -> bool callable, "
                        f"got {type(value).__name__}")
    return value


class SessionHost:
    """A composed session: ``runtime``, ``agent`` (its ``session`` over the log), the controllers
    ``stage`` / ``plan`` (None when not configured) and the step ``driver``.

    Build one with ``open_session``. Reading: ``current_stage()``, ``pending_reviews()``;
    answering: ``answer(review_id, approve)``; ``close()`` detaches the controllers and closes
    the log.
    """

    def __init__(self, runtime: Runtime, agent: InboxAgent, *, stage: StageController | None = None,
                 plan: PlanModeController | None = None, config: Mapping[str, Any] | None = None,
                 repair: bool = True) -> None:
        self.runtime = runtime
        self.agent = agent
        self.stage = stage
        self.plan = plan
        from fsm_stage.driver._step import StagedSession

        self.driver = StagedSession(runtime, agent, config=config)
        if repair:
            self.driver.repair()

    @classmethod
    def compose(cls: type[H], graph: ConfigFile | GraphConfig | str | Path | None, log: EventLog, *,
                review: ReviewChannel | None = None,
                plan_mode: bool | Mapping[str, Any] | PlanModeConfig = True,
                handoffs: HandoffStore | None = None,
                token_meter: TokenMeter | None = None,
                guidance: bool | Predicate = True,
                eligibility: Mapping[str, bool | Predicate] | None = None,
                language: str | None = None,
                runtime: Runtime | None = None,
                config: Mapping[str, Any] | None = None,
                repair: bool = True, accept_graph_change: bool = False,
                refuse_changed_graph: bool = True) -> H:
        """``open_session`` building an instance of ``cls`` (a host subclass adds its glue).
        ``refuse_changed_graph=False`` (the MCP server, which serves only fsm_stage's own tools)
        opens a log recorded under another graph and refuses its transitions one by one instead
        of raising ``GraphChangedError`` here."""
        from fsm_stage.config import ConfigFile, GraphConfig, load_config
        from fsm_stage.handoff import LocalHandoffStore
        from fsm_stage.plan_mode import PlanModeController
        from fsm_stage.runtime.agent import InboxAgent
        from fsm_stage.runtime.runtime import Runtime
        from fsm_stage.runtime.session import Session
        from fsm_stage.stage_switch import StageController
        from fsm_stage.stage_switch.durable import graph_specs
        from fsm_stage.tokens import HeuristicTokenMeter

        if isinstance(log, str | os.PathLike) or not hasattr(log, "append_many"):
            raise TypeError(f"open_session: log must be an EventLog (open_log(path, create=...), "
                            f"MemoryLog(...)), got {type(log).__name__}")
        cwd = log.header.cwd
        if isinstance(cwd, str) and not os.path.isabs(cwd):
            raise UserError(f"open_session: the session's cwd {cwd!r} is not an absolute path "
                            "(handoff documents are written under it): create the log with "
                            "SessionHeader(id, cwd=os.path.abspath(...))")
        loaded = graph if isinstance(graph, ConfigFile | GraphConfig | None) else load_config(graph)
        file = loaded if isinstance(loaded, ConfigFile) else None
        stage_graph = loaded.graph if isinstance(loaded, ConfigFile) else loaded
        lang = language or (stage_graph.language if stage_graph is not None else "en")
        given = dict(eligibility or {})
        if stage_graph is not None:
            guards = guard_names(stage_graph)
            missing = sorted(guards - set(given))
            unknown = ", ".join(map(str, sorted(set(given) - guards, key=str)))  # misspelt names
            if missing:
                also = f" (eligibility names no guard of the graph: {unknown})" if unknown else ""
                raise ConfigError([f"open_session: the graph's guard(s) {', '.join(missing)} have no "
                                  f"predicate; pass eligibility={{name: predicate or bool}}{also}"])
            if unknown:  # a misspelt name would otherwise be ignored silently
                raise ConfigError([f"open_session: eligibility names no guard of the graph: {unknown} "
                                  f"(its guards: {', '.join(sorted(guards)) or 'none'})"])
        elif given:
            raise ConfigError([f"open_session: eligibility {sorted(given)} given without a stage graph"])
        section: Mapping[str, Any] | PlanModeConfig | None = None
        if plan_mode is True:
            section = file.plan_mode if file is not None else None
        elif plan_mode is not False:
            section = plan_mode  # a Mapping or PlanModeConfig
        rt = runtime if runtime is not None else Runtime(review=review)
        stage = plan = None
        if stage_graph is not None:
            stage = StageController(
                stage_graph, handoffs=handoffs if handoffs is not None else LocalHandoffStore(),
                token_meter=token_meter if token_meter is not None else HeuristicTokenMeter(),
                accept_graph_change=accept_graph_change)
            rt.attach(stage)
            stage.register_eligibility(_predicate(guidance))
            for name, value in sorted(given.items()):
                stage.register_eligibility(_predicate(value), name=name)
        if section is not None:
            plan = PlanModeController(section, language=lang,
                                      models=stage_graph.models if stage_graph is not None else None,
                                      graph_review=stage_graph.review if stage_graph is not None else None)
            rt.attach(plan)
        session = Session(log)
        if stage is not None and refuse_changed_graph:  # refused before any tool runs under it
            graph_specs(stage, session)
        rt.track(session)
        return cls(rt, InboxAgent(session), stage=stage, plan=plan, config=config, repair=repair)

    # --- reading ---------------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The agent's session (its log is the truth)."""
        return self.agent.session

    @property
    def controllers(self) -> tuple[StageController | PlanModeController, ...]:
        """The attached controllers (stage switch first)."""
        return tuple(c for c in (self.stage, self.plan) if c is not None)

    def current_stage(self) -> str | None:
        """The stage folded from the log (None without a stage switch)."""
        return None if self.stage is None else self.stage.current(self.session)

    def pending_reviews(self) -> list[tuple[ToolCall, str, bool]]:
        """``(call, review_id, answered)`` for each suspended call of the open step."""
        suspended = self.driver.suspended()
        return [] if suspended is None else [(c.call, c.review_id, c.answered) for c in suspended.calls]

    # --- reviews ---------------------------------------------------------------------------------

    def answer(self, review_id: str, approve: bool, *, feedback: str | None = None,
               option: str | None = None, by: str = "api") -> None:
        """Record a human's answer to an open review (``answer_review``): ``approve`` or keep
        (with ``feedback``). A suspended call's review answered already is left as it is;
        raises ``ReviewNotFoundError`` for a review id the log never opened."""
        if any(rid == review_id and answered for _c, rid, answered in self.pending_reviews()):
            return
        from fsm_stage.reviews._answer import answer_review

        answer_review(self.session, review_id, "approve" if approve else "keep",
                      feedback=feedback, option=option, by=by)

    def close(self) -> None:
        """Detach the controllers and close the log (releases a JSONL writer lock). Idempotent."""
        for controller in self.controllers:
            controller.close()
        closer: Any = getattr(self.session.log, "close", None)
        if callable(closer):
            closer()


def open_session(graph: ConfigFile | GraphConfig | str | Path | None, log: EventLog, *,
                 review: ReviewChannel | None = None,
                 plan_mode: bool | Mapping[str, Any] | PlanModeConfig = True,
                 handoffs: HandoffStore | None = None,
                 token_meter: TokenMeter | None = None,
                 guidance: bool | Predicate = True,
                 eligibility: Mapping[str, bool | Predicate] | None = None,
                 language: str | None = None,
                 runtime: Runtime | None = None,
                 config: Mapping[str, Any] | None = None,
                 repair: bool = True, accept_graph_change: bool = False) -> SessionHost:
    """Compose a session over ``log`` and return its ``SessionHost``.

    ``graph``: a loaded ``ConfigFile`` (its stage graph and ``plan_mode`` section), a bare
    ``GraphConfig``, a YAML path, or None (no stage switch). ``plan_mode``: True attaches plan
    mode when the file has a ``plan_mode`` section, False never, a mapping / ``PlanModeConfig``
    is the section to use. ``review``: the channel every review goes through (default the
    runtime's). ``handoffs`` / ``token_meter`` default to ``LocalHandoffStore()`` /
    ``HeuristicTokenMeter()``. ``guidance`` gates the stage guidance section (a bool or an
    ``(agent) -> bool`` predicate); ``eligibility`` maps each guard name of the graph's edges to
    its predicate (or a fixed bool). ``language`` overrides the graph's ``language`` for plan
    mode's texts (default: the graph's, else ``en``). ``runtime``: a prepared ``Runtime`` to
    attach to (hooks registered first run first). ``config`` is the driver's request config;
    ``repair`` (default True) closes a dead turn left by a crash before the first step;
    ``accept_graph_change`` lets the stage switch resume a log written under another graph
    (otherwise ``GraphChangedError`` here, before any tool runs under the new graph's policy).

    Raises ``ConfigError`` (one line) for a guard of the graph with no predicate in
    ``eligibility`` (an edge would otherwise be closed silently) and for a name in
    ``eligibility`` that is no guard of the graph (a misspelling), ``UserError`` for a graph
    file that cannot be read or a log whose header's ``cwd`` is not an absolute path, and
    ``TypeError`` for a ``log`` that is not an ``EventLog`` (a path: open it with ``open_log``
    first).
    """
    return SessionHost.compose(graph, log, review=review, plan_mode=plan_mode, handoffs=handoffs,
                               token_meter=token_meter, guidance=guidance, eligibility=eligibility,
                               language=language, runtime=runtime, config=config, repair=repair,
                               accept_graph_change=accept_graph_change)
