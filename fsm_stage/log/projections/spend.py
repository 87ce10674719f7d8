"""What the current stage visit and plan-mode stretch spent: a fold of the log.

``SpendFold`` (``SPEND_FOLD``) folds ``step/start``, ``turn/start``, ``assistant/message.usage``,
stage records, ``plan/mode`` and ``fsm/budget`` into a ``SpendState``: each scope's ``Spend``
(tokens in / out, turns, steps, start time) and the budget stops the model was not told of yet.
Budgets themselves are checked by ``fsm_stage.runtime.stage_models``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    BUDGET_EVENT,
    PLAN_MODE_EVENT,
    STEP_START,
    TURN_START,
    USER_MESSAGE,
)
from fsm_stage.log.events import Event
from fsm_stage.log.projections.stage import stage_from_event


@attrs.frozen
class Spend:
    """What one visit spent: tokens in / out (from ``assistant/message.usage``), turns, steps,
    and ``since`` (epoch ms of the visit's first event, None before any)."""

    tokens_in: int = 0
    tokens_out: int = 0
    turns: int = 0
    steps: int = 0
    since: int | None = None

    def seconds(self, now_ms: int) -> float:
        """Wall-clock seconds from ``since`` to ``now_ms`` (0 when the visit has no start)."""
        return 0.0 if self.since is None else max(0, now_ms - self.since) / 1000

    def to_json(self, now_ms: int | None = None) -> dict[str, Any]:
        """``{"tokens_in", "tokens_out", "turns", "steps"[, "seconds"]}``."""
        out: dict[str, Any] = {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                               "turns": self.turns, "steps": self.steps}
        if now_ms is not None:
            out["seconds"] = round(self.seconds(now_ms), 3)
        return out


def _usage_tokens(data: Mapping[str, Any]) -> tuple[int, int]:
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return 0, 0

    def n(key: str) -> int:
        v = usage.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

    return n("inputTokens") + n("cacheReadTokens") + n("cacheWriteTokens"), n("outputTokens")


@attrs.frozen
class SpendState:
    """``SpendFold`` state: the current ``stage`` (None before any stage record), whether plan
    mode is on, each scope's ``Spend`` and the turn last counted for it, and the scopes whose
    budget stop the model has not been told about yet (``untold``: tuple of budget-event data)."""

    stage: str | None = None
    plan: bool = False
    stage_spend: Spend = Spend()
    plan_spend: Spend = Spend()
    turn: int | None = None
    stage_turn: int | None = None
    plan_turn: int | None = None
    stops: tuple[Mapping[str, Any], ...] = ()


def _add_tokens(spend: Spend, tokens_in: int, tokens_out: int) -> Spend:
    """``spend`` with ``tokens_in`` / ``tokens_out`` more."""
    return Spend(spend.tokens_in + tokens_in, spend.tokens_out + tokens_out, spend.turns, spend.steps,
                 spend.since)


def _count_step(spend: Spend, counted: int | None, turn: int | None, time: int) -> tuple[Spend, int | None]:
    """``spend`` with one more step, the current ``turn`` counted once (a turn a visit enters
    mid-way counts) and ``since`` set at the first; one new ``Spend`` (the folds' hot path)."""
    since = spend.since if spend.since is not None else time
    if turn is None or counted == turn:
        return Spend(spend.tokens_in, spend.tokens_out, spend.turns, spend.steps + 1, since), counted
    return Spend(spend.tokens_in, spend.tokens_out, spend.turns + 1, spend.steps + 1, since), turn


class SpendFold:
    """Projection: what the current stage visit and plan-mode stretch spent (``SpendState``).

    A stage visit starts at a stage record naming another stage (a flush, a ``/stage`` jump) or
    at an ``fsm/budget`` ``fresh`` for scope ``stage``; the initial stage's visit starts with the
    session (its notice is logged inside the first step, which it spends); a plan stretch at
    ``plan/mode {active: true}`` or a ``fresh`` for scope ``plan``. Steps count ``step/start``;
    turns count each turn with a step in the visit; tokens come from
    ``assistant/message.usage``."""

    key = "stage-spend"
    STATE_VERSION = 2
    READS = frozenset({STEP_START, TURN_START, ASSISTANT_MESSAGE, PLAN_MODE_EVENT, BUDGET_EVENT,
                       USER_MESSAGE})

    def init(self) -> SpendState:
        return SpendState()

    def apply(self, state: SpendState, event: Event) -> SpendState:
        t = event.type
        data = event.data if isinstance(event.data, dict) else {}
        if t == STEP_START:
            turn = data.get("turn") if isinstance(data.get("turn"), int) else state.turn
            stage_spend, stage_turn = _count_step(state.stage_spend, state.stage_turn, turn, event.time)
            plan_spend, plan_turn = state.plan_spend, state.plan_turn
            if state.plan:
                plan_spend, plan_turn = _count_step(plan_spend, plan_turn, turn, event.time)
            # built directly, not through attrs.evolve: the hot path of a long log's fold
            return SpendState(state.stage, state.plan, stage_spend, plan_spend, turn, stage_turn, plan_turn,
                              state.stops)
        if t == ASSISTANT_MESSAGE:
            tin, tout = _usage_tokens(data)
            if not tin and not tout:
                return state
            plan_spend = _add_tokens(state.plan_spend, tin, tout) if state.plan else state.plan_spend
            return SpendState(state.stage, state.plan, _add_tokens(state.stage_spend, tin, tout), plan_spend,
                              state.turn, state.stage_turn, state.plan_turn, state.stops)
        if t == TURN_START:
            turn = data.get("turn")
            if not isinstance(turn, int):
                return state
            return SpendState(state.stage, state.plan, state.stage_spend, state.plan_spend, turn,
                              state.stage_turn, state.plan_turn, state.stops)
        if t == PLAN_MODE_EVENT:
            active = data.get("active")
            if not isinstance(active, bool) or active == state.plan:
                return state
            return attrs.evolve(state, plan=active, plan_spend=Spend(since=event.time) if active else Spend(),
                                plan_turn=None)
        if t == BUDGET_EVENT:
            scope = data.get("scope")
            if data.get("action") == "fresh":
                if scope == "plan":
                    return attrs.evolve(state, plan_spend=Spend(since=event.time), plan_turn=None)
                if scope == "stage":
                    return attrs.evolve(state, stage_spend=Spend(since=event.time), stage_turn=None)
            elif data.get("action") == "stop" and scope in ("stage", "plan"):
                return attrs.evolve(state, stops=(*_without(state.stops, scope), data))
            elif data.get("action") == "told":
                return attrs.evolve(state, stops=())
            return state
        stage = stage_from_event(event)
        if stage is None or stage == state.stage:
            return state
        if state.stage is None:  # the initial stage: its notice comes inside the first step,
            return attrs.evolve(state, stage=stage)  # which (and all before it) is its spend
        return attrs.evolve(state, stage=stage, stage_spend=Spend(since=event.time), stage_turn=None)

    def view(self, state: SpendState) -> SpendState:
        return state

    def dump(self, state: SpendState) -> Any:
        return {"stage": state.stage, "plan": state.plan, "stage_spend": attrs.asdict(state.stage_spend),
                "plan_spend": attrs.asdict(state.plan_spend), "turn": state.turn,
                "stage_turn": state.stage_turn, "plan_turn": state.plan_turn,
                "stops": [dict(s) for s in state.stops]}

    def load(self, raw: Any) -> SpendState:
        try:
            return SpendState(raw["stage"], bool(raw["plan"]), Spend(**raw["stage_spend"]),
                              Spend(**raw["plan_spend"]), raw["turn"], raw["stage_turn"], raw["plan_turn"],
                              tuple(dict(s) for s in raw["stops"]))
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a stage-spend state: {err}") from None


def _without(stops: tuple[Mapping[str, Any], ...], scope: str) -> tuple[Mapping[str, Any], ...]:
    return tuple(s for s in stops if s.get("scope") != scope)


SPEND_FOLD = SpendFold()
