"""``get_stage``'s ``model`` and ``budgets``: the model choice of the session's next request and
the current visit's spend against each budget in force (docs/mcp.md, docs/stage-models.md).

Both are read from what the session already holds (the runtime's model sources and the log's
spend fold), so ``get_stage`` stays a cheap read that changes nothing.
"""

from __future__ import annotations

from typing import Any

import attrs

from fsm_stage.log.events import wall_clock_ms
from fsm_stage.log.projections.spend import SPEND_FOLD, SpendState
from fsm_stage.mcp.sessions import McpSession

__all__ = ["BUDGETS_OUTPUT", "MODEL_OUTPUT", "budgets_of", "model_of"]

MODEL_OUTPUT: dict[str, Any] = {
    "type": "object",
    "description": "The model choice of the next request (only when the graph declares one): "
                   "model (provider-qualified), alias, reasoningEffort, settings, source.",
    "properties": {
        "model": {"type": "string"}, "alias": {"type": "string"},
        "reasoningEffort": {"type": "string"}, "settings": {"type": "object"},
        "source": {"type": "string", "description": "stage:<name>, plan_mode, or both joined by +."},
    },
}
"""``get_stage``'s ``model`` schema."""

BUDGETS_OUTPUT: dict[str, Any] = {
    "type": "array",
    "description": "The budgets in force (only when declared): {scope, label, limits, onBudget, spent}.",
    "items": {"type": "object", "properties": {
        "scope": {"enum": ["stage", "plan"]}, "label": {"type": "string"},
        "limits": {"type": "object"}, "onBudget": {"enum": ["stop", "review"]},
        "spent": {"type": "object", "description": "tokens_in, tokens_out, turns, steps (and "
                  "seconds under a seconds budget) of the current visit, folded from the log."}}},
}
"""``get_stage``'s ``budgets`` schema."""


def model_of(ms: McpSession) -> dict[str, Any] | None:
    """The model choice of ``ms``'s next request (``ModelChoice.to_json`` plus ``source``);
    None when the graph declares none."""
    choice = ms.runtime.model_choice(ms.agent)
    if choice.is_default:
        return None
    return {**choice.to_json(), "source": choice.source}


def budgets_of(ms: McpSession) -> list[dict[str, Any]]:
    """Each budget in force for ``ms``'s next step with the current visit's spend (``[]`` for none)."""
    rules = ms.runtime.budget_rules(ms.agent)
    if not rules:
        return []
    state: SpendState = ms.session.read(SPEND_FOLD)
    out = []
    for rule in rules:
        spend = state.plan_spend if rule.scope == "plan" else state.stage_spend
        limits = {k: v for k, v in attrs.asdict(rule.budget).items() if v is not None}
        out.append({"scope": rule.scope, "label": rule.label, "limits": limits, "onBudget": rule.on_budget,
                    "spent": spend.to_json(wall_clock_ms() if rule.budget.seconds else None)})
    return out
