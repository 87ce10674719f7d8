"""The stage switch's per-request model choice and budget (``ModelSource`` order 10).

The current stage's ``model`` / ``reasoning_effort`` / ``model_settings`` (aliases resolved
through the graph's ``models``) and its ``budget``; no budget applies while a transition is
pending, because the boundary is about to leave the stage. A budget review is asked under the
graph's ``review`` rules and offers a move only to a target whose edge is reviewed under those
same rules (a move to another would skip its edge's own rules) and whose guards hold when it is
asked; an approved move whose guards no longer hold when it is redeemed is not applied
(``guard-closed``), as an approved ``goto_stage`` is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage.config.review_rules import merged_rules, rules_json
from fsm_stage.runtime.stage_models import BudgetRule, ModelChoice, ModelSource, choice_of

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.stage_switch.controller import StageController

#: Merge order of the stage's choice (plan mode's, order 20, wins over it).
STAGE_MODEL_ORDER = 10


def stage_model_source(ctl: StageController) -> ModelSource:
    """The ``ModelSource`` of ``ctl``'s graph for the agent's current stage."""
    config = ctl.config
    moves: dict[str, dict[str, tuple[str, ...]]] = {}  # per stage, computed once

    def reviewed_moves(stage: str) -> dict[str, tuple[str, ...]]:
        """target -> guards of the edges of ``stage`` reviewed under the graph's own rules."""
        found = moves.get(stage)
        if found is None:
            rules = rules_json(config.review)
            found = moves[stage] = {e.target: e.guards for e in config.edges_from(stage)
                                    if rules_json(merged_rules(config.review, e.review)) == rules}
        return found

    def choice(agent: Agent | None) -> ModelChoice:
        stage = config.initial_stage if agent is None else ctl.current(agent.session)
        return choice_of(config.stage(stage), config.models, f"stage:{stage}")

    def budget(agent: Agent | None) -> BudgetRule | None:
        if agent is None:
            return None
        stage = ctl.current(agent.session)
        part = config.stage(stage)
        if part is None or part.budget is None or ctl.pending_stage(agent.session) is not None:
            return None
        guards = reviewed_moves(stage)
        return BudgetRule("stage", stage, part.budget, part.on_budget, config.language, tuple(guards),
                          lambda target: ctl.set(agent, target), rules_json(config.review),
                          lambda target: not guards[target] or ctl.guards_hold(agent, guards[target]))

    return ModelSource("stage", STAGE_MODEL_ORDER, choice, budget)
