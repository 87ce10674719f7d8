"""fsm_stage: explicit, durable, reviewable stages for LLM agent orchestrators.

Everything an orchestrator needs is importable from here (``from fsm_stage import Runtime,
StageController, open_log``); names load on first use (PEP 562), so ``import fsm_stage`` stays
cheap and imports neither ``transitions``, jinja2, ruamel.yaml nor click. Data flows one way:
config → graph → controllers → runtime → adapters / CLI. Every exception lives in
``fsm_stage.errors``; catch ``UserError`` for every user mistake.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.config import (
        ConfigFile,
        EdgeConfig,
        GraphConfig,
        PlanModeConfig,
        StageConfig,
        load_config,
        load_config_text,
        normalised,
    )
    from fsm_stage.errors import (
        AppendConflictError,
        CatalogError,
        ConfigError,
        ControllerClosedError,
        DiagramError,
        DriverStateError,
        FsmStageError,
        GraphChangedError,
        HandoffPathError,
        InvalidEventError,
        InvariantError,
        LogFormatError,
        LogLockedError,
        LogWriteError,
        PromptTemplateError,
        RecordShapeError,
        ReviewAlreadyAnsweredError,
        ReviewError,
        ReviewNotFoundError,
        ReviewPayloadChangedError,
        ReviewPending,
        ReviewSuspended,
        SimulationError,
        SurfaceOpError,
        TurnSuspendedError,
        UserError,
    )
    from fsm_stage.graph import CompiledGraph, StageCursor, compile_graph, compile_plan_mode, fingerprint
    from fsm_stage.handoff import HandoffStore, LocalHandoffStore, MemoryHandoffStore
    from fsm_stage.log.dsh import read_log
    from fsm_stage.log.events import Event, EventLog, NewEvent, SessionHeader
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.log.locations import open_log, read_location, register_log_scheme
    from fsm_stage.log.memory import MemoryLog
    from fsm_stage.log.projections import (
        PlanView,
        ProjectionCursor,
        StageProjection,
        current_stage,
        fold_plan_mode,
        fold_stage,
    )
    from fsm_stage.plan_mode import PlanModeController, PlanStatus
    from fsm_stage.resources import data_dir
    from fsm_stage.runtime.abort import AbortSignal
    from fsm_stage.runtime.agent import Agent, InboxAgent
    from fsm_stage.runtime.assembly import ContextEntry, Request, SystemSection
    from fsm_stage.runtime.commands import CommandReply
    from fsm_stage.runtime.driver import StagedSession, StepRequest, SuspendedStep
    from fsm_stage.runtime.loop import Loop, Model, ModelReply, ScriptedModel, TurnOutcome
    from fsm_stage.runtime.review import (
        Answer,
        Option,
        Question,
        ReviewChannel,
        ScriptedReviewChannel,
        SuspendingReviewChannel,
        TerminalReviewChannel,
    )
    from fsm_stage.runtime.reviews import answer_review, fork_log, open_reviews, review_state
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session
    from fsm_stage.runtime.tools import Tool, ToolCall, ToolOutput, ToolResult, ToolSpec, current_tool_call
    from fsm_stage.scenario import load_scenario, load_scenario_text
    from fsm_stage.simulate import SimulationResult, render_human, simulate_async, simulate_scenario
    from fsm_stage.stage_switch import StageController, StageStatus
    from fsm_stage.tokens import HeuristicTokenMeter, TokenMeter

#: exported name -> the module (under ``fsm_stage``) that defines it
_EXPORTS: dict[str, str] = {
    "load_config": "config",
    "load_config_text": "config",
    "ConfigFile": "config",
    "GraphConfig": "config",
    "StageConfig": "config",
    "EdgeConfig": "config",
    "PlanModeConfig": "config",
    "normalised": "config",
    "compile_graph": "graph",
    "compile_plan_mode": "graph",
    "CompiledGraph": "graph",
    "StageCursor": "graph",
    "fingerprint": "graph",
    "StageController": "stage_switch",
    "StageStatus": "stage_switch",
    "PlanModeController": "plan_mode",
    "PlanStatus": "plan_mode",
    "Runtime": "runtime.runtime",
    "Session": "runtime.session",
    "Agent": "runtime.agent",
    "InboxAgent": "runtime.agent",
    "StagedSession": "runtime.driver",
    "StepRequest": "runtime.driver",
    "SuspendedStep": "runtime.driver",
    "Loop": "runtime.loop",
    "Model": "runtime.loop",
    "ModelReply": "runtime.loop",
    "ScriptedModel": "runtime.loop",
    "TurnOutcome": "runtime.loop",
    "answer_review": "runtime.reviews",
    "open_reviews": "runtime.reviews",
    "review_state": "runtime.reviews",
    "fork_log": "runtime.reviews",
    "ReviewChannel": "runtime.review",
    "ScriptedReviewChannel": "runtime.review",
    "SuspendingReviewChannel": "runtime.review",
    "TerminalReviewChannel": "runtime.review",
    "Question": "runtime.review",
    "Option": "runtime.review",
    "Answer": "runtime.review",
    "Tool": "runtime.tools",
    "ToolSpec": "runtime.tools",
    "ToolCall": "runtime.tools",
    "ToolResult": "runtime.tools",
    "ToolOutput": "runtime.tools",
    "current_tool_call": "runtime.tools",
    "Request": "runtime.assembly",
    "SystemSection": "runtime.assembly",
    "ContextEntry": "runtime.assembly",
    "AbortSignal": "runtime.abort",
    "CommandReply": "runtime.commands",
    "Event": "log.events",
    "NewEvent": "log.events",
    "EventLog": "log.events",
    "SessionHeader": "log.events",
    "MemoryLog": "log.memory",
    "JsonlLog": "log.jsonl",
    "open_log": "log.locations",
    "read_location": "log.locations",
    "register_log_scheme": "log.locations",
    "read_log": "log.dsh",
    "ProjectionCursor": "log.projections",
    "StageProjection": "log.projections",
    "PlanView": "log.projections",
    "fold_stage": "log.projections",
    "fold_plan_mode": "log.projections",
    "current_stage": "log.projections",
    "HandoffStore": "handoff",
    "LocalHandoffStore": "handoff",
    "MemoryHandoffStore": "handoff",
    "TokenMeter": "tokens",
    "HeuristicTokenMeter": "tokens",
    "load_scenario": "scenario",
    "load_scenario_text": "scenario",
    "simulate_scenario": "simulate",
    "simulate_async": "simulate",
    "render_human": "simulate",
    "SimulationResult": "simulate",
    "data_dir": "resources",
    "FsmStageError": "errors",
    "UserError": "errors",
    "ConfigError": "errors",
    "LogFormatError": "errors",
    "LogWriteError": "errors",
    "LogLockedError": "errors",
    "AppendConflictError": "errors",
    "ReviewSuspended": "errors",
    "ReviewPending": "errors",
    "ReviewError": "errors",
    "ReviewNotFoundError": "errors",
    "ReviewAlreadyAnsweredError": "errors",
    "ReviewPayloadChangedError": "errors",
    "GraphChangedError": "errors",
    "InvalidEventError": "errors",
    "SurfaceOpError": "errors",
    "ControllerClosedError": "errors",
    "InvariantError": "errors",
    "DiagramError": "errors",
    "SimulationError": "errors",
    "PromptTemplateError": "errors",
    "CatalogError": "errors",
    "HandoffPathError": "errors",
    "DriverStateError": "errors",
    "TurnSuspendedError": "errors",
    "RecordShapeError": "errors",
}

__all__ = [
    "AbortSignal",
    "Agent",
    "Answer",
    "AppendConflictError",
    "CatalogError",
    "CommandReply",
    "CompiledGraph",
    "ConfigError",
    "ConfigFile",
    "ContextEntry",
    "ControllerClosedError",
    "DiagramError",
    "DriverStateError",
    "EdgeConfig",
    "Event",
    "EventLog",
    "FsmStageError",
    "GraphChangedError",
    "GraphConfig",
    "HandoffPathError",
    "HandoffStore",
    "HeuristicTokenMeter",
    "InboxAgent",
    "InvalidEventError",
    "InvariantError",
    "JsonlLog",
    "LocalHandoffStore",
    "LogFormatError",
    "LogLockedError",
    "LogWriteError",
    "Loop",
    "MemoryHandoffStore",
    "MemoryLog",
    "Model",
    "ModelReply",
    "NewEvent",
    "Option",
    "PlanModeConfig",
    "PlanModeController",
    "PlanStatus",
    "PlanView",
    "ProjectionCursor",
    "PromptTemplateError",
    "Question",
    "RecordShapeError",
    "Request",
    "ReviewAlreadyAnsweredError",
    "ReviewChannel",
    "ReviewError",
    "ReviewNotFoundError",
    "ReviewPayloadChangedError",
    "ReviewPending",
    "ReviewSuspended",
    "Runtime",
    "ScriptedModel",
    "ScriptedReviewChannel",
    "Session",
    "SessionHeader",
    "SimulationError",
    "SimulationResult",
    "StageConfig",
    "StageController",
    "StageCursor",
    "StageProjection",
    "StageStatus",
    "StagedSession",
    "StepRequest",
    "SurfaceOpError",
    "SuspendedStep",
    "SuspendingReviewChannel",
    "SystemSection",
    "TerminalReviewChannel",
    "TokenMeter",
    "Tool",
    "ToolCall",
    "ToolOutput",
    "ToolResult",
    "ToolSpec",
    "TurnOutcome",
    "TurnSuspendedError",
    "UserError",
    "__version__",
    "answer_review",
    "compile_graph",
    "compile_plan_mode",
    "current_stage",
    "current_tool_call",
    "data_dir",
    "fingerprint",
    "fold_plan_mode",
    "fold_stage",
    "fork_log",
    "load_config",
    "load_config_text",
    "load_scenario",
    "load_scenario_text",
    "normalised",
    "open_log",
    "open_reviews",
    "read_location",
    "read_log",
    "register_log_scheme",
    "render_human",
    "review_state",
    "simulate_async",
    "simulate_scenario",
]


def __getattr__(name: str) -> Any:
    """Import the module defining ``name`` on first access and cache the value here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
