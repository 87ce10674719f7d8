"""One attach/close lifecycle for every controller of a ``Runtime`` (plan mode, the stage switch).

A controller owns a ``ControllerLifecycle`` and builds its ``attach`` on it::

    self.lifecycle = ControllerLifecycle("plan-mode controller")
    def attach(self, runtime):
        self.lifecycle.attach(runtime, self._contribute)   # _contribute(reg: Registration)
    def close(self):
        if self.lifecycle.close(): ...forget per-session state...

``Registration`` wraps the runtime's ``add_*`` calls and remembers every disposer. Attaching is
all or nothing (a failing contribution undoes the earlier ones); ``close()`` undoes every
contribution once, last first; attaching a closed controller raises ``ControllerClosedError``
and attaching an attached one raises ``RuntimeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fsm_stage.runtime.assembly import ContextEntry, SystemSection
from fsm_stage.runtime.commands import Command, Disposer
from fsm_stage.runtime.runtime import (
    Contributions,
    ControllerClosedError,
    EventCheck,
    PreStepFn,
    PreStepParticipant,
    ToolGate,
    ViewProjection,
)
from fsm_stage.runtime.stage_models import ModelSource
from fsm_stage.runtime.tools import Tool

if TYPE_CHECKING:
    from fsm_stage.runtime.runtime import Runtime

__all__ = ["ControllerLifecycle", "Registration"]


class Registration:
    """The contributions of one ``attach``: each method registers with ``runtime`` and keeps
    the disposer; ``dispose()`` (called by ``ControllerLifecycle``) undoes them, last first.

    ``command`` and ``projection`` are skipped (returning False) when the runtime has no such
    registry (B48, B95); the other methods raise what the runtime's ``add_*`` raises (e.g.
    ``ValueError`` for a duplicate tool or service name, ``RecordShapeError`` for a tracked log
    that already breaks an invariant)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._contributions = Contributions()

    def add(self, disposer: Disposer) -> Disposer:
        """Keep any other disposer (undone with the rest); returns it."""
        return self._contributions.add(disposer)

    def section(self, section: SystemSection) -> None:
        """Register a system-prompt section."""
        self.add(self.runtime.add_section(section))

    def context(self, entry: ContextEntry) -> None:
        """Register a runtime-context entry."""
        self.add(self.runtime.add_context(entry))

    def tool(self, tool: Tool) -> None:
        """Register a tool under its spec name."""
        self.add(self.runtime.add_tool(tool))

    def command(self, command: Command) -> bool:
        """Register a slash command when the runtime has a command registry; True if registered."""
        if self.runtime.commands is None:
            return False
        self.add(self.runtime.add_command(command))
        return True

    def projection(self, key: str, projection: ViewProjection) -> bool:
        """Register a client projection when the runtime has a projection registry; True if registered."""
        if self.runtime.projections is None:
            return False
        self.add(self.runtime.add_projection(key, projection))
        return True

    def pre_step(self, participant: PreStepParticipant | PreStepFn) -> None:
        """Register a pre-step participant."""
        self.add(self.runtime.add_pre_step(participant))

    def model_source(self, source: ModelSource) -> None:
        """Register a per-request model choice and budget source."""
        self.add(self.runtime.add_model_source(source))

    def tool_gate(self, gate: ToolGate) -> None:
        """Register a gate every tool call passes before it runs (the tool policy)."""
        self.add(self.runtime.add_tool_gate(gate))

    def service(self, name: str, service: object) -> None:
        """Publish a service handle under ``name``."""
        self.add(self.runtime.add_service(name, service))

    def invariant(self, check: EventCheck) -> None:
        """Install an event invariant (scans the tracked logs first)."""
        self.add(self.runtime.add_invariant(check))

    def dispose(self) -> None:
        """Undo every contribution, last first, each once."""
        self._contributions.dispose()


class ControllerLifecycle:
    """Attached/closed state of one controller; ``what`` names it in errors (e.g.
    ``"plan-mode controller"``, ``"stage switch"``).

    ``runtime`` is the runtime of the last successful ``attach`` (kept after ``close()`` so a
    controller can still name it), ``attached`` says whether contributions are live, and
    ``closed`` whether ``close()`` ran."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.runtime: Runtime | None = None
        self.closed = False
        self._registration: Registration | None = None

    @property
    def attached(self) -> bool:
        """True between a successful ``attach`` and ``close()``."""
        return self._registration is not None

    def ensure_open(self) -> None:
        """Raise ``ControllerClosedError`` (a ``RuntimeError``) once ``close()`` ran."""
        if self.closed:
            raise ControllerClosedError(self.what)

    def attach(self, runtime: Runtime, contribute: Callable[[Registration], None]) -> None:
        """Run ``contribute(registration)`` against ``runtime``, all or nothing.

        Raises ``ControllerClosedError`` after ``close()`` and ``RuntimeError`` ("… is already
        attached to a runtime") when attached; whatever ``contribute`` raises propagates after
        every contribution it made was undone (the lifecycle then stays unattached)."""
        self.ensure_open()
        if self._registration is not None:
            raise RuntimeError(f"this {self.what} is already attached to a runtime")
        registration = Registration(runtime)
        try:
            contribute(registration)
        except BaseException:
            registration.dispose()
            raise
        self._registration = registration
        self.runtime = runtime

    def close(self) -> bool:
        """Undo every contribution and mark the lifecycle closed. Returns True the first time,
        False on later calls (which do nothing), so the controller forgets its own state once."""
        if self.closed:
            return False
        self.closed = True
        registration, self._registration = self._registration, None
        if registration is not None:
            registration.dispose()
        return True
