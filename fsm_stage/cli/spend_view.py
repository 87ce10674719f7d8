"""The ``spend`` part of ``fsm-stage state``: the current stage visit's spend against its budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from fsm_stage.log.projections.spend import SpendState


def spend_report(state: SpendState, cfg: Any, stage: str | None) -> dict[str, Any]:
    """What the current stage visit (and plan-mode stretch, while on) spent, with the budget
    each is held to when ``--graph`` declares one (``{"tokens_in", …, "budget"?}``; ``seconds``
    only under a seconds budget, so the report stays a pure function of the log otherwise)."""
    from fsm_stage.log.events import wall_clock_ms

    parts: list[tuple[str, Any, Any]] = [("stage", state.stage_spend, _declared(cfg, "stage", stage))]
    if state.plan:
        parts.append(("plan_mode", state.plan_spend, _declared(cfg, "plan_mode", stage)))
    out: dict[str, Any] = {}
    for key, spend, where in parts:
        budget = where.budget if where is not None else None
        entry = spend.to_json(wall_clock_ms() if budget is not None and budget.seconds else None)
        if budget is not None:
            entry["budget"] = {k: v for k, v in attrs.asdict(budget).items() if v is not None}
            entry["on_budget"] = where.on_budget
        out[key] = entry
    return out


def _declared(cfg: Any, key: str, stage: str | None) -> Any:
    """The ``StageConfig`` (``key="stage"``) or ``PlanModeConfig`` of ``--graph``, or None."""
    if cfg is None or cfg.graph is None:
        return None
    if key == "plan_mode":
        return cfg.plan_mode
    return cfg.graph.stage(stage) if stage is not None else None


def spend_line(sp: Mapping[str, Any]) -> str:
    """``tokens in 30, out 120, turns 2, steps 3, 12 s`` with ``/limit`` where budgeted."""
    budget = sp.get("budget") or {}
    shown = []
    for key, word in (("tokens_in", "tokens in"), ("tokens_out", "out"), ("turns", "turns"),
                      ("steps", "steps"), ("seconds", "seconds")):
        limit = budget.get(key)
        if key in sp:
            shown.append(f"{word} {sp[key]:g}" + (f"/{limit:g}" if limit is not None else ""))
    tail = f" (budget, on_budget: {sp['on_budget']})" if budget else ""
    return ", ".join(shown) + tail
