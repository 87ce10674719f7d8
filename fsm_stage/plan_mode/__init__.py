"""Plan mode: a reviewed two-state stage (``default`` ↔ ``plan``) over the session log.

Port of ``dsh-plan-mode`` (plan-mode spec B1–B114). ``PlanModeController(config)`` runs the
``compile_plan_mode()`` machine over a fold of the log and ``attach(runtime)`` contributes its
tools, command, policy and projection (``_controller``); ``_texts`` checks the config and reads
a plan's heading, ``_tool`` holds the tool and command objects; the exit review lives in
``fsm_stage.reviews``. The rules
where plan mode differs from the seed are in ``docs/plan-mode-decisions.md``. Every name below
loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.plan_mode._controller import (
        PLAN_PROJECTION_KEY,
        PLAN_SERVICE,
        PlanModeConfigError,
        PlanModeController,
        PlanStatus,
        fold_plan_mode,
    )
    from fsm_stage.plan_mode._texts import (
        plan_heading_ok,
        plan_title,
        resolve_config,
    )

#: exported name -> the module (under this package) that defines it; ``__all__`` is its keys
_EXPORTS: dict[str, str] = {
    "PLAN_PROJECTION_KEY": "_controller",
    "PLAN_SERVICE": "_controller",
    "PlanModeConfigError": "_controller",
    "PlanModeController": "_controller",
    "PlanStatus": "_controller",
    "fold_plan_mode": "_controller",
    "plan_heading_ok": "_texts",
    "plan_title": "_texts",
    "resolve_config": "_texts",
}

__all__ = [
    "PLAN_PROJECTION_KEY",
    "PLAN_SERVICE",
    "PlanModeConfigError",
    "PlanModeController",
    "PlanStatus",
    "fold_plan_mode",
    "plan_heading_ok",
    "plan_title",
    "resolve_config",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
