"""Projections: pure, incremental folds of the session log (docs/architecture.md, docs/session-log.md).

Modules: ``core`` (the ``Projection`` protocol, ``fold``, ``ProjectionCursor``,
``HeaderRelative``/``told``), ``plan`` (``PlanModeFold``, ``PlanView``,
``PlanModeProblems``), ``turns`` (``OpenTurn``), ``stage`` (stage records, ``StageFold``,
``StageProjection``) and ``last_header`` (``ToldProjection``, ``standard_projections``). This
package re-exports all of their public names. Checkpoints (``CheckpointStore``,
``cold_fold``) live in ``fsm_stage.log.checkpoints``.
"""

from __future__ import annotations

from fsm_stage.log.projections.core import (
    Fold,
    HeaderRelative,
    HeaderRelativeState,
    Projection,
    ProjectionCursor,
    Routes,
    fold,
    routes,
    told,
)
from fsm_stage.log.projections.last_header import ToldFacts, ToldProjection, ToldState, standard_projections
from fsm_stage.log.projections.plan import (
    PlanModeFold,
    PlanModeProblems,
    PlanModeProblemsState,
    PlanState,
    PlanView,
    RunningSelection,
    fold_plan_mode,
    plan_mode_problem,
)
from fsm_stage.log.projections.stage import (
    StageFold,
    StageProjection,
    StageRecord,
    StageState,
    current_stage,
    fold_stage,
    fold_stage_records,
    is_stage_prompt,
    message_text,
    stage_from_event,
)
from fsm_stage.log.projections.turns import OpenTurn, TurnState

__all__ = [
    "Fold",
    "HeaderRelative",
    "HeaderRelativeState",
    "OpenTurn",
    "PlanModeFold",
    "PlanModeProblems",
    "PlanModeProblemsState",
    "PlanState",
    "PlanView",
    "Projection",
    "ProjectionCursor",
    "Routes",
    "RunningSelection",
    "StageFold",
    "StageProjection",
    "StageRecord",
    "StageState",
    "ToldFacts",
    "ToldProjection",
    "ToldState",
    "TurnState",
    "current_stage",
    "fold",
    "fold_plan_mode",
    "fold_stage",
    "fold_stage_records",
    "is_stage_prompt",
    "message_text",
    "plan_mode_problem",
    "routes",
    "stage_from_event",
    "standard_projections",
    "told",
]
