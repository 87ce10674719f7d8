"""``ToldProjection``: what the last ``request/header`` told the model.

Plan mode and stage folded up to and including the last header (docs/contracts.md), through
the one ``HeaderRelative`` mechanism. Also
``standard_projections()``: one instance of every built-in projection.
"""

from __future__ import annotations

from typing import Any

import attrs

from fsm_stage.constants import (
    PLAN_MODE_EVENT,
    REQUEST_HEADER,
    USER_MESSAGE,
)
from fsm_stage.log.events import Event
from fsm_stage.log.projections.core import HeaderRelative, HeaderRelativeState, Projection, _data, _int
from fsm_stage.log.projections.plan import PlanModeFold, PlanView
from fsm_stage.log.projections.stage import StageFold, StageProjection
from fsm_stage.log.projections.turns import OpenTurn


@attrs.frozen
class ToldFacts:
    """What a ``request/header`` tells: its ``header_seq``/``reason`` (None before any) and
    ``plan_active``/``stage`` as folded up to and including it."""

    header_seq: int | None = None
    reason: str | None = None
    plan_active: bool = False
    stage: str | None = None


class _ToldFacts:
    """Inner fold of ``ToldProjection``: plan mode (``PlanModeFold``), stage (``StageFold``)
    and the latest header's seq and reason."""

    _plan = PlanModeFold()
    _stage = StageFold()

    def init(self) -> ToldFacts:
        return ToldFacts()

    def apply(self, state: ToldFacts, event: Event) -> ToldFacts:
        if event.type == REQUEST_HEADER:
            reason = _data(event).get("reason")
            reason = reason if isinstance(reason, str) else None
            return attrs.evolve(state, header_seq=event.seq, reason=reason)
        plan = self._plan.apply(state.plan_active, event)
        stage = self._stage.apply(state.stage, event)
        if plan is state.plan_active and stage is state.stage:
            return state
        return attrs.evolve(state, plan_active=plan, stage=stage)


ToldState = HeaderRelativeState[ToldFacts]
"""State of ``ToldProjection``: ``current`` facts and the facts at the last header."""

_TOLD = HeaderRelative(_ToldFacts())


class ToldProjection:
    """What the model was last told (docs/contracts.md narration ``told``).

    ``HeaderRelative`` over ``PlanModeFold`` + ``StageFold`` — the folds plan mode and the
    stage controller judge "told" with. View: None before the first header, else
    ``{"seq", "reason", "planActive", "stage"}``.
    """

    key = "told"
    STATE_VERSION = 2
    #: Event types that can change the state: an event of another type changes it
    #: only through a ``surfaceOp``, so a streaming reader may skip it (tests check this).
    READS = frozenset({REQUEST_HEADER, PLAN_MODE_EVENT, USER_MESSAGE})

    def init(self) -> ToldState:
        return _TOLD.init()

    def apply(self, state: ToldState, event: Event) -> ToldState:
        return _TOLD.apply(state, event)

    def view(self, state: ToldState) -> dict[str, Any] | None:
        facts = state.at_last_header
        if not state.has_header or facts is None:
            return None
        return {
            "seq": facts.header_seq,
            "reason": facts.reason,
            "planActive": facts.plan_active,
            "stage": facts.stage,
        }

    def dump(self, state: ToldState) -> Any:
        at = state.at_last_header
        return {
            "current": attrs.asdict(state.current),
            "atLastHeader": None if at is None else attrs.asdict(at),
            "hasHeader": state.has_header,
        }

    def load(self, raw: Any) -> ToldState:
        if not isinstance(raw, dict) or set(raw) != {"current", "atLastHeader", "hasHeader"}:
            raise ValueError(f"bad told state {raw!r}")
        if not isinstance(raw["hasHeader"], bool):
            raise ValueError(f"bad told state {raw!r}")
        at = None if raw["atLastHeader"] is None else _load_facts(raw["atLastHeader"])
        return HeaderRelativeState(_load_facts(raw["current"]), at, raw["hasHeader"])


def _load_facts(raw: Any) -> ToldFacts:
    if not isinstance(raw, dict) or set(raw) != {f.name for f in attrs.fields(ToldFacts)}:
        raise ValueError(f"bad told state {raw!r}")
    ok = (
        (raw["header_seq"] is None or _int(raw["header_seq"]))
        and (raw["reason"] is None or isinstance(raw["reason"], str))
        and isinstance(raw["plan_active"], bool)
        and (raw["stage"] is None or isinstance(raw["stage"], str))
    )
    if not ok:
        raise ValueError(f"bad told state {raw!r}")
    return ToldFacts(**raw)


def standard_projections() -> tuple[Projection[Any], ...]:
    """One instance of every built-in projection (plan-mode, plan, turn, stage, told)."""
    return (PlanModeFold(), PlanView(), OpenTurn(), StageProjection(), ToldProjection())
