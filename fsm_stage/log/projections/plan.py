"""Plan-mode folds (docs/contracts.md, docs/session-log.md).

* ``PlanModeFold`` — the logged plan mode: last valid ``plan/mode`` wins, else False;
  ``fold_plan_mode(events, end=None)``.
* ``PlanView`` — the ``plan`` unit ``{active, wanted, running}``, version 2, rules R0–R5,
  view ``{active, pending}``.
* ``PlanModeProblems`` — counts the ``plan/mode`` records with an invalid payload
  (``plan_mode_problem``), which every fold above skips, so readers can warn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from fsm_stage.constants import (
    COMMAND_DONE,
    COMMAND_RUN,
    PLAN_COMMAND,
    PLAN_MODE_EVENT,
    PLAN_PROJECTION_STATE_VERSION,
)
from fsm_stage.log.events import Event
from fsm_stage.log.projections.core import _data


class PlanModeFold:
    """Logged plan mode (docs/contracts.md, B6–B8): the last ``plan/mode.active`` (a bool), else False.

    A ``plan/mode`` whose ``active`` is not a bool (an invariant violation, B107) is ignored.
    """

    key = "plan-mode"
    STATE_VERSION = 1
    READS = frozenset({PLAN_MODE_EVENT})

    def init(self) -> bool:
        return False

    def apply(self, state: bool, event: Event) -> bool:
        if event.type != PLAN_MODE_EVENT:
            return state
        active = _data(event).get("active")
        return active if isinstance(active, bool) else state

    def view(self, state: bool) -> bool:
        return state

    def dump(self, state: bool) -> Any:
        return state

    def load(self, raw: Any) -> bool:
        if not isinstance(raw, bool):
            raise ValueError(f"plan-mode state must be a bool, got {raw!r}")
        return raw


def fold_plan_mode(events: Sequence[Event], end: int | None = None) -> bool:
    """``fold(log, end)`` of docs/contracts.md: the last ``plan/mode`` in ``events[0:end]`` wins (B6–B8)."""
    stop = len(events) if end is None else max(0, min(end, len(events)))
    for i in range(stop - 1, -1, -1):
        ev = events[i]
        if ev.type == PLAN_MODE_EVENT:
            active = _data(ev).get("active")
            if isinstance(active, bool):
                return active
    return False


def plan_mode_problem(event: Event) -> str | None:
    """The plan-mode invariant (docs/contracts.md, B105–B108): a ``plan/mode`` must carry a
    boolean ``active``. Returns a one-line problem for a bad ``plan/mode`` (the offending value
    as JSON, ``undefined`` when missing), else None (other types are ignored)."""
    if event.type != PLAN_MODE_EVENT:
        return None
    d = event.data
    if isinstance(d, dict) and isinstance(d.get("active"), bool):
        return None
    import json

    shown = json.dumps(d.get("active")) if isinstance(d, dict) and "active" in d else "undefined"
    return f"seq {event.seq}: plan/mode active must be a boolean, got {shown}"


@attrs.frozen
class PlanModeProblemsState:
    """``count`` invalid ``plan/mode`` records seen; ``first``: the one-line problems
    (``plan_mode_problem``) of the first ``PlanModeProblems.KEEP`` of them, in log order."""

    count: int = 0
    first: tuple[str, ...] = ()


class PlanModeProblems:
    """Fold of the ``plan/mode`` records with an invalid payload (B105–B108).

    The plan folds (``PlanModeFold``, ``PlanView``) skip such a record, so the plan mode is the
    last *valid* record's value; this fold lets a reader say so. View:
    ``{"count": int, "problems": [str, …]}`` (at most ``KEEP`` problems, in log order).
    """

    key = "planModeProblems"
    STATE_VERSION = 1
    #: Event types that can change the state: an event of another type changes it
    #: only through a ``surfaceOp``, so a streaming reader may skip it (tests check this).
    READS = frozenset({PLAN_MODE_EVENT})
    KEEP = 20

    def init(self) -> PlanModeProblemsState:
        return _NO_PLAN_MODE_PROBLEMS

    def apply(self, state: PlanModeProblemsState, event: Event) -> PlanModeProblemsState:
        problem = plan_mode_problem(event)
        if problem is None:
            return state
        first = state.first if len(state.first) >= self.KEEP else (*state.first, problem)
        return PlanModeProblemsState(state.count + 1, first)

    def view(self, state: PlanModeProblemsState) -> dict[str, Any]:
        return {"count": state.count, "problems": list(state.first)}

    def dump(self, state: PlanModeProblemsState) -> Any:
        return {"count": state.count, "first": list(state.first)}

    def load(self, raw: Any) -> PlanModeProblemsState:
        if not isinstance(raw, dict) or set(raw) != {"count", "first"}:
            raise ValueError(f"bad plan-mode problems state {raw!r}")
        count, first = raw["count"], raw["first"]
        if (
            not isinstance(count, int)
            or isinstance(count, bool)
            or not isinstance(first, list)
            or not all(isinstance(p, str) for p in first)
            or not len(first) <= min(count, self.KEEP)
        ):
            raise ValueError(f"bad plan-mode problems state {raw!r}")
        return PlanModeProblemsState(count, tuple(first))


_NO_PLAN_MODE_PROBLEMS = PlanModeProblemsState()


@attrs.frozen
class RunningSelection:
    """A ``/plan`` command in flight: its id and whether it asks for plan mode on."""

    command_id: str
    wanted: bool


@attrs.frozen
class PlanState:
    """The ``plan`` unit state ``{active, wanted, running}`` (docs/contracts.md)."""

    active: bool = False
    wanted: bool | None = None
    running: RunningSelection | None = None


_PLAN_INIT = PlanState()


class PlanView:
    """The ``plan`` projection unit (docs/contracts.md rules R0–R5, docs/session-log.md).

    View: ``{"active": bool, "pending": bool}`` where the target is ``running.wanted`` if a
    command is running, else ``wanted``; pending = target is not None and != active. A
    ``plan/mode`` whose ``active`` is not a boolean is skipped (``active`` stays the last valid
    record's value); ``PlanModeProblems`` counts such records so readers can warn.
    """

    key = "plan"
    STATE_VERSION = PLAN_PROJECTION_STATE_VERSION
    #: Event types that can change the state: an event of another type changes it
    #: only through a ``surfaceOp``, so a streaming reader may skip it (tests check this).
    READS = frozenset({COMMAND_RUN, COMMAND_DONE, PLAN_MODE_EVENT})

    def init(self) -> PlanState:
        return _PLAN_INIT

    def apply(self, state: PlanState, event: Event) -> PlanState:
        t = event.type
        if t == COMMAND_RUN:
            d = _data(event)
            args, cid = d.get("args"), d.get("commandId")
            if d.get("name") != PLAN_COMMAND or not isinstance(args, str) or not isinstance(cid, str):
                return state  # R1 / R5
            return PlanState(state.active, state.wanted, RunningSelection(cid, args.strip() != "off"))  # R2
        if t == COMMAND_DONE:
            running = state.running
            if running is None or _data(event).get("commandId") != running.command_id:
                return state  # R5
            ok = _data(event).get("kind") == "success" and running.wanted != state.active
            return PlanState(state.active, running.wanted if ok else None, None)  # R3
        if t == PLAN_MODE_EVENT:
            active = _data(event).get("active")
            if not isinstance(active, bool):
                return state
            if active == state.active and state.wanted is None:
                return state
            return PlanState(active, None, state.running)  # R4
        return state

    def view(self, state: PlanState) -> dict[str, bool]:
        target = state.running.wanted if state.running is not None else state.wanted
        return {"active": state.active, "pending": target is not None and target != state.active}

    def dump(self, state: PlanState) -> Any:
        running = state.running
        return {
            "active": state.active,
            "wanted": state.wanted,
            "running": None
            if running is None
            else {"commandId": running.command_id, "wanted": running.wanted},
        }

    def load(self, raw: Any) -> PlanState:
        if not isinstance(raw, dict) or set(raw) != {"active", "wanted", "running"}:
            raise ValueError(f"bad plan state {raw!r}")
        active, wanted, running = raw["active"], raw["wanted"], raw["running"]
        if not isinstance(active, bool) or not (wanted is None or isinstance(wanted, bool)):
            raise ValueError(f"bad plan state {raw!r}")
        sel: RunningSelection | None = None
        if running is not None:
            if (
                not isinstance(running, dict)
                or set(running) != {"commandId", "wanted"}
                or not isinstance(running["commandId"], str)
                or not isinstance(running["wanted"], bool)
            ):
                raise ValueError(f"bad plan state {raw!r}")
            sel = RunningSelection(running["commandId"], running["wanted"])
        return PlanState(active, wanted, sel)
