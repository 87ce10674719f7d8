"""Plan mode's per-request model choice and budget (``ModelSource`` order 20, over the stage's).

While plan mode is logged on, the ``plan_mode`` mapping's ``model`` / ``reasoning_effort`` /
``model_settings`` win over the stage's, and its ``budget`` covers the plan-mode stretch; no plan
budget applies while an approved exit is pending (the boundary is about to leave plan mode). A
plan budget review is asked under the rules of the plan's own review.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from fsm_stage.config.review_rules import merged_rules, rules_json
from fsm_stage.runtime.stage_models import DEFAULT_CHOICE, BudgetRule, ModelChoice, ModelSource, choice_of

if TYPE_CHECKING:
    from fsm_stage.plan_mode._controller import PlanModeController
    from fsm_stage.runtime.agent import Agent

#: Merge order of plan mode's choice (above the stage's 10).
PLAN_MODEL_ORDER = 20


def plan_model_source(ctl: PlanModeController, aliases: Mapping[str, str] | None,
                      language: str) -> ModelSource:
    """The ``ModelSource`` of ``ctl``'s config (aliases resolved through ``aliases``)."""
    config = ctl.config

    def on(agent: Agent | None) -> bool:
        return agent is not None and ctl.logged(agent.session)

    def choice(agent: Agent | None) -> ModelChoice:
        return choice_of(config, aliases, "plan_mode") if on(agent) else DEFAULT_CHOICE

    def budget(agent: Agent | None) -> BudgetRule | None:
        if config.budget is None or agent is None or not on(agent) or ctl.get(agent).pending is False:
            return None
        return BudgetRule("plan", "plan mode", config.budget, config.on_budget, language,
                          rules=rules_json(merged_rules(ctl.graph_review, config.review)))

    return ModelSource("plan", PLAN_MODEL_ORDER, choice, budget)
