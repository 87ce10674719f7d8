"""fsm_stage: explicit, durable, reviewable stages for LLM agent orchestrators.

The names a host needs first are importable from here (``from fsm_stage import Runtime,
StageController, open_log``); extension points live in their packages (``fsm_stage.runtime``,
``.log``, ``.graph``, ``.config``, ``.driver``, ``.reviews``, ``.policy``, ``.plan_mode``,
``.stage_switch``) and tools in theirs (``.simulate``, ``.scenario``, ``.integrations``,
``.mcp``). Names load on first use (PEP 562), so ``import fsm_stage`` stays cheap and imports
neither ``transitions``, jinja2, ruamel.yaml nor click. Data flows one way: config → graph,
log → runtime → controllers → driver → adapters / MCP / CLI. Every exception lives in
``fsm_stage.errors``; catch ``UserError`` for every user mistake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

__version__ = "0.2.0"

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage import errors
    from fsm_stage.config import load_config
    from fsm_stage.driver import Loop, Model, ModelReply, ScriptedModel, StagedSession, StepRequest
    from fsm_stage.errors import FsmStageError, UserError
    from fsm_stage.graph import compile_graph
    from fsm_stage.handoff import LocalHandoffStore
    from fsm_stage.log import EventLog, MemoryLog, SessionHeader, open_log
    from fsm_stage.plan_mode import PlanModeController
    from fsm_stage.reviews import (
        Answer,
        Option,
        Question,
        ReviewChannel,
        ScriptedReviewChannel,
        SuspendingReviewChannel,
        TerminalReviewChannel,
        answer_review,
        fork_log,
        open_reviews,
    )
    from fsm_stage.runtime import Runtime, Session, Tool, ToolCall, ToolOutput, ToolSpec
    from fsm_stage.stage_switch import StageController

#: exported name -> the package (under ``fsm_stage``) that defines it; a name equal to its
#: package is that submodule itself. ``__all__`` is ``__version__`` plus these keys.
_EXPORTS: dict[str, str] = {
    "load_config": "config",
    "compile_graph": "graph",
    "open_log": "log",
    "SessionHeader": "log",
    "EventLog": "log",
    "MemoryLog": "log",
    "Runtime": "runtime",
    "Session": "runtime",
    "Tool": "runtime",
    "ToolSpec": "runtime",
    "ToolCall": "runtime",
    "ToolOutput": "runtime",
    "StagedSession": "driver",
    "StepRequest": "driver",
    "Loop": "driver",
    "Model": "driver",
    "ModelReply": "driver",
    "ScriptedModel": "driver",
    "ReviewChannel": "reviews",
    "ScriptedReviewChannel": "reviews",
    "SuspendingReviewChannel": "reviews",
    "TerminalReviewChannel": "reviews",
    "Question": "reviews",
    "Option": "reviews",
    "Answer": "reviews",
    "answer_review": "reviews",
    "open_reviews": "reviews",
    "fork_log": "reviews",
    "StageController": "stage_switch",
    "PlanModeController": "plan_mode",
    "LocalHandoffStore": "handoff",
    "errors": "errors",
    "FsmStageError": "errors",
    "UserError": "errors",
}

__all__ = [
    "Answer",
    "EventLog",
    "FsmStageError",
    "LocalHandoffStore",
    "Loop",
    "MemoryLog",
    "Model",
    "ModelReply",
    "Option",
    "PlanModeController",
    "Question",
    "ReviewChannel",
    "Runtime",
    "ScriptedModel",
    "ScriptedReviewChannel",
    "Session",
    "SessionHeader",
    "StageController",
    "StagedSession",
    "StepRequest",
    "SuspendingReviewChannel",
    "TerminalReviewChannel",
    "Tool",
    "ToolCall",
    "ToolOutput",
    "ToolSpec",
    "UserError",
    "__version__",
    "answer_review",
    "compile_graph",
    "errors",
    "fork_log",
    "load_config",
    "open_log",
    "open_reviews",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
