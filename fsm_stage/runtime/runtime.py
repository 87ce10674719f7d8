"""``Runtime``: the per-composition registry of contributions (docs/architecture.md).

Controllers (plan mode, the stage switch) ``attach`` to a ``Runtime`` and contribute system
sections, runtime-context entries, tools, commands, pre-step participants, projections,
invariants and service handles. Every ``add_*`` returns an idempotent **disposer**; a
controller's ``close()`` runs all of its disposers at once (docs/contracts.md) through
``fsm_stage.runtime.controller.ControllerLifecycle``.

Optional registries mirror optional composition in the harness: ``Runtime(commands=False)``
has ``runtime.commands is None`` (no ``/`` commands, B48); ``Runtime(projections=False)`` has
``runtime.projections is None`` (B95); ``review=None`` means no review channel (B71).

Step boundary
-------------
``pre_step(agent, messages, *, aborted=False) -> messages`` is called by the host **after** its
final accept/reject decision, once per accepted pre-step (initial and continuation alike), and
never for rejected steps or same-step retries (seam S4), so a participant's append is
never followed by a rejection. Participants run in registration order; each receives and
returns the full list of messages entering the step.

``assemble(agent | None) -> Assembly`` renders system sections by order (empty ones dropped),
lists tools (sorted by name, then assemble hooks may add more), and renders context entries.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from fsm_stage.errors import ControllerClosedError as ControllerClosedError
from fsm_stage.errors import RecordShapeError
from fsm_stage.log.events import Event
from fsm_stage.observe import boundary
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.assembly import (
    Assembly,
    ContextEntry,
    RenderedSection,
    Request,
    SystemSection,
    render_sections,
)
from fsm_stage.runtime.commands import Command, CommandRegistry, CommandReply, Disposer
from fsm_stage.runtime.messages import Block, Message
from fsm_stage.runtime.questions import ReviewChannel, check_review_channel
from fsm_stage.runtime.session import Session, session_lock
from fsm_stage.runtime.stage_models import DEFAULT_CHOICE, BudgetRule, ModelChoice, ModelSource, merged_choice
from fsm_stage.runtime.tools import (
    Tool,
    ToolCall,
    ToolResult,
    ToolSpec,
    dispatch_tool,
)

T = TypeVar("T")


@runtime_checkable
class PreStepParticipant(Protocol):
    """A step-boundary participant: returns the full message list entering the step."""

    def on_pre_step(self, agent: Agent, messages: list[Message], aborted: bool) -> list[Message]: ...


PreStepFn = Callable[[Agent, list[Message], bool], list[Message]]
AssembleHook = Callable[["Agent | None", Assembly], Assembly]
EventCheck = Callable[[Event], "str | None"]


class ViewProjection(Protocol):
    """A projection that also serves a client view (``init``, ``apply``, ``view``)."""

    def init(self) -> Any: ...

    def apply(self, state: Any, event: Event) -> Any: ...

    def view(self, state: Any) -> Any: ...


class ProjectionRegistry:
    """Keyed client projections (docs/session-log.md): ``snapshot(session) -> {key: view}``."""

    def __init__(self) -> None:
        self._units: dict[str, ViewProjection] = {}

    def register(self, key: str, projection: ViewProjection) -> Disposer:
        """Register ``projection`` under ``key`` (duplicate keys raise ``ValueError``)."""
        if key in self._units:
            raise ValueError(f"projection {key!r} is already registered")
        self._units[key] = projection

        def dispose() -> None:
            if self._units.get(key) is projection:
                del self._units[key]

        return dispose

    @property
    def keys(self) -> tuple[str, ...]:
        """Registered keys, sorted."""
        return tuple(sorted(self._units))

    def view(self, session: Session, key: str) -> Any:
        """The view of unit ``key`` over ``session`` (``KeyError`` when not registered)."""
        unit = self._units[key]
        return unit.view(session.read(unit))

    def snapshot(self, session: Session) -> dict[str, Any]:
        """Every registered unit's view over ``session``."""
        return {k: self.view(session, k) for k in self.keys}


class Contributions:
    """Collects disposers; ``dispose()`` runs them all (last registered first), once. The
    bookkeeping under ``fsm_stage.runtime.controller.Registration``."""

    def __init__(self) -> None:
        self._disposers: list[Disposer] = []

    def add(self, disposer: Disposer) -> Disposer:
        """Keep ``disposer``; returns it."""
        self._disposers.append(disposer)
        return disposer

    def dispose(self) -> None:
        """Run every disposer in reverse order (each at most once)."""
        disposers, self._disposers = self._disposers, []
        for d in reversed(disposers):
            d()


@runtime_checkable
class ToolGate(Protocol):
    """A contribution that decides whether a tool call runs (the tool policy is one); a
    controller registers it through ``Registration.tool_gate``. Each method returns None when
    the gate lets the call run, else the call's ``ToolResult``."""

    async def call(self, runtime: Runtime, agent: Agent | None, call: ToolCall, *, turn: int | None,
                   step: int | None, signal: AbortSignal | None, log: bool) -> ToolResult | None:
        """Before ``call_tool`` dispatches ``call``: None to dispatch it, else its result (a
        refusal, logged when ``log``; or the result of a call the gate ran after a review)."""

    async def authorize(self, runtime: Runtime, agent: Agent | None, call: ToolCall, *,
                        turn: int | None, step: int | None, signal: AbortSignal | None,
                        log: bool) -> ToolResult | None:
        """For a call the host runs itself: None to run it, else the refusal (logged when ``log``)."""


@runtime_checkable
class Controller(Protocol):
    """A behaviour attached to a ``Runtime`` (plan mode, the stage switch)."""

    def attach(self, runtime: Runtime) -> None:
        """Register every contribution with ``runtime``."""

    def close(self) -> None:
        """Unregister every contribution at once; later calls do nothing."""


def _remover(items: list[T], item: T) -> Disposer:
    def dispose() -> None:
        for i, x in enumerate(items):
            if x is item:
                del items[i]
                return

    return dispose


class Runtime:
    """Registry of contributions plus the pre-step, assembly, tool and command entry points."""

    def __init__(
        self,
        *,
        review: ReviewChannel | None = None,
        commands: bool | CommandRegistry = True,
        projections: bool | ProjectionRegistry = True,
    ) -> None:
        check_review_channel(review, "Runtime(review=)")
        self.review: ReviewChannel | None = review
        self.commands: CommandRegistry | None = (
            commands if isinstance(commands, CommandRegistry) else CommandRegistry() if commands else None
        )
        self.projections: ProjectionRegistry | None = (
            projections if isinstance(projections, ProjectionRegistry)
            else ProjectionRegistry() if projections else None
        )
        self._sections: list[SystemSection] = []
        self._contexts: list[ContextEntry] = []
        self._tools: dict[str, Tool] = {}
        self._pre_steps: list[PreStepFn] = []
        self._assemble_hooks: list[AssembleHook] = []
        self._services: dict[str, object] = {}
        self._gates: list[ToolGate] = []
        self._invariants: list[EventCheck] = []
        self._model_sources: list[ModelSource] = []
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()

    # --- registration -------------------------------------------------------------------------

    def add_section(self, section: SystemSection) -> Disposer:
        """Register a system-prompt section."""
        self._sections.append(section)
        return _remover(self._sections, section)

    def add_context(self, entry: ContextEntry) -> Disposer:
        """Register a runtime-context entry."""
        self._contexts.append(entry)
        return _remover(self._contexts, entry)

    def add_tool(self, tool: Tool) -> Disposer:
        """Register ``tool`` under its spec name (duplicates raise ``ValueError``)."""
        name = tool.spec.name
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered")
        self._tools[name] = tool

        def dispose() -> None:
            if self._tools.get(name) is tool:
                del self._tools[name]

        return dispose

    def add_command(self, command: Command) -> Disposer:
        """Register a slash command; raises ``RuntimeError`` when the runtime has no command
        registry (check ``runtime.commands`` first, B48)."""
        if self.commands is None:
            raise RuntimeError("this runtime has no command registry")
        return self.commands.register(command)

    def add_projection(self, key: str, projection: ViewProjection) -> Disposer:
        """Register a client projection; raises ``RuntimeError`` without a registry (B95)."""
        if self.projections is None:
            raise RuntimeError("this runtime has no projection registry")
        return self.projections.register(key, projection)

    def add_pre_step(self, participant: PreStepParticipant | PreStepFn) -> Disposer:
        """Register a pre-step participant (object with ``on_pre_step`` or a function)."""
        fn: PreStepFn = (participant.on_pre_step if isinstance(participant, PreStepParticipant)
                         else participant)
        self._pre_steps.append(fn)
        return _remover(self._pre_steps, fn)

    def add_assemble_hook(self, hook: AssembleHook) -> Disposer:
        """Register a hook that may rewrite each ``Assembly`` (run after the registries)."""
        self._assemble_hooks.append(hook)
        return _remover(self._assemble_hooks, hook)

    def add_model_source(self, source: ModelSource) -> Disposer:
        """Register a per-request model choice and budget source (the stage switch, plan mode)."""
        self._model_sources.append(source)
        return _remover(self._model_sources, source)

    def model_choice(self, agent: Agent | None) -> ModelChoice:
        """The merged model choice of every source for ``agent`` (``DEFAULT_CHOICE`` for none)."""
        return merged_choice(self._model_sources, agent) if self._model_sources else DEFAULT_CHOICE

    def budget_rules(self, agent: Agent | None) -> tuple[BudgetRule, ...]:
        """The budgets in force for ``agent``'s next step, one per source that has one."""
        rules = (s.budget(agent) for s in sorted(self._model_sources, key=lambda s: s.order))
        return tuple(r for r in rules if r is not None)

    def add_tool_gate(self, gate: ToolGate) -> Disposer:
        """Register a ``ToolGate``; the same gate registered by several controllers is asked once."""
        self._gates.append(gate)
        return _remover(self._gates, gate)

    def add_service(self, name: str, service: object) -> Disposer:
        """Publish a service handle (e.g. ``"plan_mode"``); duplicates raise ``ValueError``."""
        if name in self._services:
            raise ValueError(f"service {name!r} is already registered")
        self._services[name] = service

        def dispose() -> None:
            if self._services.get(name) is service:
                del self._services[name]

        return dispose

    def service(self, name: str) -> object | None:
        """The service published under ``name`` or None."""
        return self._services.get(name)

    def attach(self, controller: Controller) -> Controller:
        """``controller.attach(self)``; returns the controller."""
        controller.attach(self)
        return controller

    # --- invariants -----------------------------------------------------------------------------

    def add_invariant(self, check: EventCheck) -> Disposer:
        """Install an event invariant: every tracked session's log is scanned now (raises
        ``RecordShapeError`` and installs nothing on the first violation, B109), later tracked
        sessions are scanned when tracked, and every later append is validated before it is
        committed (B111)."""
        for session in list(self._sessions):
            _scan(session.events, (check,))
        self._invariants.append(check)
        return _remover(self._invariants, check)

    def track(self, session: Session) -> None:
        """Make ``session`` subject to the installed invariants: scanned in full the first time
        (raises ``RecordShapeError``), then every append is validated. Idempotent; sessions are
        held weakly. ``pre_step``, ``call_tool``, ``run_command`` and the ``Loop`` track the
        sessions they see."""
        if session in self._sessions:
            return
        _scan(session.events, self._invariants)
        self._sessions.add(session)
        session.add_validator(self._validate)

    def _validate(self, event: Event) -> None:
        _scan((event,), self._invariants)

    # --- boundary, assembly, tools, commands -----------------------------------------------------

    def session_lock(self, session_id: str) -> threading.RLock:
        """The per-session re-entrant lock every controller holds around fold → fire → append
        (docs/architecture.md): ``fsm_stage.runtime.session.session_lock(session_id)``, keyed by the
        session id like pending selections, hence shared by every ``Session`` wrapper of one
        log and by plan mode and the stage switch. A host that appends to a session from
        several threads outside the controllers should hold it too."""
        return session_lock(session_id)

    def pre_step(self, agent: Agent, messages: Sequence[Message], *, aborted: bool = False) -> list[Message]:
        """Run every participant on an accepted pre-step; returns the entering messages.

        ``messages`` is a list (or tuple) of message mappings; anything else (a ``str``, one
        message dict, None) raises ``TypeError`` before any participant runs. The agent's
        session is tracked first (see ``track``). No open turn is required: hosts and the
        spec's tests run step boundaries and tools outside ``turn/start``…``turn/end`` (S44–S51,
        B46, B47), so the seam does not police the host's turn bracketing."""
        if not isinstance(messages, list | tuple):
            raise TypeError("pre_step(agent, messages): messages must be a list of message dicts, "
                            f"got {type(messages).__name__}")
        bad = [m for m in messages if not isinstance(m, Mapping)]
        if bad:
            raise TypeError("pre_step(agent, messages): messages must be a list of message dicts, "
                            f"got a {type(messages).__name__} holding a {type(bad[0]).__name__}")
        self.track(agent.session)
        out = list(messages)
        # The registry holds session locks weakly: referenced here, the lock lives through the
        # boundary, so the participants' many short holds find it rather than make a new one.
        held = session_lock(agent.session.id)
        # one read of the log for the whole boundary (``Session.one_refresh``)
        with boundary(agent.session.id), agent.session.one_refresh():  # span fsm_stage.step.boundary
            for fn in list(self._pre_steps):
                out = fn(agent, out, aborted)
        del held
        return out

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """Registered tool specs sorted by name (the harness's lexicographic order)."""
        return tuple(self._tools[n].spec for n in sorted(self._tools))

    @property
    def tools(self) -> Mapping[str, Tool]:
        """Registered tools by name (read-only view)."""
        return dict(self._tools)

    @property
    def section_names(self) -> tuple[str, ...]:
        """Names of every registered section (rendered or not)."""
        return tuple(s.name for s in self._sections)

    @property
    def context_names(self) -> tuple[str, ...]:
        """Names of every registered context entry."""
        return tuple(c.name for c in self._contexts)

    def assemble(self, agent: Agent | None) -> Assembly:
        """Render sections, tools and context entries for ``agent`` (None: agent-less)."""
        assembly = Assembly(
            sections=render_sections(self._sections, agent),
            tools=self.tool_specs,
            context=render_sections(self._contexts, agent),
            model=self.model_choice(agent),
        )
        for hook in list(self._assemble_hooks):
            assembly = hook(agent, assembly)
        return assembly

    def build_request(self, agent: Agent, assembly: Assembly | None = None, *, copy: bool = True) -> Request:
        """The request for ``agent``'s next model call: the assembly's system text and tools
        (``assemble(agent)`` unless given, e.g. a frozen one for a retry) and the surface
        messages of its session (a tuple of deep copies; ``copy=False``: the session's shared,
        read-only ``shared_messages()`` sequence, for a caller that copies them itself)."""
        asm = assembly if assembly is not None else self.assemble(agent)
        session = agent.session
        messages = tuple(session.messages()) if copy else session.shared_messages()
        return Request(system=asm.system, messages=messages, tools=asm.tools, model=asm.model)

    def render_context(self, agent: Agent | None) -> tuple[RenderedSection, ...]:
        """Only the runtime-context entries of ``assemble`` (rendered, non-empty, by order)."""
        return render_sections(self._contexts, agent)

    async def call_tool(
        self,
        agent: Agent | None,
        call: ToolCall,
        *,
        turn: int | None = None,
        step: int | None = None,
        signal: AbortSignal | None = None,
        log: bool = True,
    ) -> ToolResult:
        """Dispatch ``call`` to the registered tools; logs ``tool/call``/``tool/result`` on the
        agent's session when ``log`` and an agent is given. Like ``pre_step`` it does not
        require an open turn (the spec's tool tests call it outside one); ``turn``/``step`` are
        written only when given. The registered tool gates (the tool policy) are asked first, on
        the complete arguments: a denied call runs nothing and gets an error result (logged with
        ``fsm/tool/refused``); an ``ask`` call runs only after the review channel approves it
        (``ReviewPending`` when the channel suspends)."""
        held = None
        if agent is not None:
            self.track(agent.session)
            held = session_lock(agent.session.id)  # lives through the call, as in ``pre_step``
        session = agent.session if (log and agent is not None) else None
        for gate in self._unique_gates():
            gated = await gate.call(self, agent, call, turn=turn, step=step, signal=signal, log=log)
            if gated is not None:
                return gated
        result = await dispatch_tool(self._tools, call, agent, session=session, turn=turn, step=step,
                                     signal=signal)
        del held
        return result

    @property
    def tool_gates(self) -> tuple[ToolGate, ...]:
        """The registered tool gates in registration order, each once."""
        return tuple(self._unique_gates())

    def _unique_gates(self) -> list[ToolGate]:
        seen: list[ToolGate] = []
        for gate in self._gates:
            if all(g is not gate for g in seen):
                seen.append(gate)
        return seen

    async def authorize(self, agent: Agent | None, call: ToolCall, *, turn: int | None = None,
                        step: int | None = None, signal: AbortSignal | None = None,
                        log: bool = True) -> ToolResult | None:
        """The registered tool gates (the tool policy) on a call the host runs itself: None —
        run it; else the refusal (logged when ``log``: ``tool/call``, error ``tool/result``,
        ``fsm/tool/refused``). An ``ask`` rule reviews the call first (``ReviewPending`` when
        the channel suspends: call ``authorize`` again with the same call once it is answered)."""
        for gate in self._unique_gates():
            refused = await gate.authorize(self, agent, call, turn=turn, step=step, signal=signal, log=log)
            if refused is not None:
                return refused
        return None

    async def run_command(self, agent: Agent, line: str, images: Sequence[Block] = ()) -> CommandReply | None:
        """Run a ``/name rest`` line; None when there is no registry or no such command."""
        if self.commands is None:
            return None
        self.track(agent.session)
        return await self.commands.run(agent, line, images)


def _scan(events: Iterable[Event], checks: Sequence[EventCheck]) -> None:
    for ev in events:
        for check in checks:
            problem = check(ev)
            if problem is not None:
                raise RecordShapeError(problem)
