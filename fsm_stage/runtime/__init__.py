"""Runtime seams (DESIGN.md §8): small protocols plus working implementations.

A host plugs fsm_stage into its own agent loop through ``StagedSession`` (``driver``: one step
at a time) or runs the reference ``Loop`` (``loop``). ``Runtime`` (``runtime``) is the registry
controllers attach to: system sections, tools, commands, pre-step participants. The other
modules hold the seams: ``session`` (a ``Session`` over an ``EventLog``), ``agent``, ``review``
(``ReviewChannel`` and the shipped channels), ``tools`` / ``toolspecs`` (``ToolSpec`` and its
exports), ``commands`` (``/name``), ``assembly`` (the request), ``pending`` (boundary flush),
``repair`` (closing a dead turn) and ``messages``. Every name below loads on first use.

Concurrency: a fold → fire → append sequence never awaits, so one event loop serialises it per
session; drive a runtime from one event-loop thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.runtime.abort import (
        AbortSignal,
    )
    from fsm_stage.runtime.agent import (
        Agent,
        InboxAgent,
        InboxItem,
    )
    from fsm_stage.runtime.assembly import (
        Assembly,
        ContextEntry,
        RenderedSection,
        Request,
        SystemSection,
    )
    from fsm_stage.runtime.commands import (
        Command,
        CommandRegistry,
        CommandReply,
        CommandSpec,
        parse_command,
    )
    from fsm_stage.runtime.controller import (
        ControllerLifecycle,
        Registration,
    )
    from fsm_stage.runtime.driver import (
        StagedSession,
        StepRequest,
        SuspendedCall,
        SuspendedStep,
    )
    from fsm_stage.runtime.loop import (
        Loop,
        Model,
        ModelError,
        ModelReply,
        ScriptedModel,
        TurnOutcome,
    )
    from fsm_stage.runtime.messages import (
        message_text,
        new_id,
        notice,
        stage_notice,
        text_block,
        user_message,
    )
    from fsm_stage.runtime.pending import (
        PendingStore,
        Selection,
        session_lock,
    )
    from fsm_stage.runtime.repair import (
        repair_open_turn,
    )
    from fsm_stage.runtime.review import (
        Answer,
        Decision,
        Gate,
        Option,
        Question,
        ReviewChannel,
        ReviewDismissed,
        ScriptedReviewChannel,
        SuspendingReviewChannel,
        TerminalReviewChannel,
        evaluate,
    )
    from fsm_stage.runtime.reviews import (
        answer_review,
        fork_log,
        open_reviews,
        review_state,
    )
    from fsm_stage.runtime.runtime import (
        Contributions,
        Controller,
        Runtime,
    )
    from fsm_stage.runtime.session import (
        Session,
    )
    from fsm_stage.runtime.tools import (
        Tool,
        ToolCall,
        ToolFailure,
        ToolOutput,
        ToolResult,
        ToolSpec,
        current_tool_call,
        dispatch_tool,
        execute_tool,
        export_tools,
    )
    from fsm_stage.runtime.toolspecs import (
        strict_schema,
        to_anthropic,
        to_gemini,
        to_mcp,
        to_openai,
        with_stage_enum,
    )

_EXPORTS: dict[str, str] = {
    "AbortSignal": "abort",
    "Agent": "agent",
    "InboxAgent": "agent",
    "InboxItem": "agent",
    "Assembly": "assembly",
    "ContextEntry": "assembly",
    "RenderedSection": "assembly",
    "Request": "assembly",
    "SystemSection": "assembly",
    "Command": "commands",
    "CommandRegistry": "commands",
    "CommandReply": "commands",
    "CommandSpec": "commands",
    "parse_command": "commands",
    "ControllerLifecycle": "controller",
    "Registration": "controller",
    "StagedSession": "driver",
    "StepRequest": "driver",
    "SuspendedCall": "driver",
    "SuspendedStep": "driver",
    "Loop": "loop",
    "Model": "loop",
    "ModelError": "loop",
    "ModelReply": "loop",
    "ScriptedModel": "loop",
    "TurnOutcome": "loop",
    "message_text": "messages",
    "new_id": "messages",
    "notice": "messages",
    "stage_notice": "messages",
    "text_block": "messages",
    "user_message": "messages",
    "PendingStore": "pending",
    "Selection": "pending",
    "session_lock": "pending",
    "repair_open_turn": "repair",
    "Answer": "review",
    "Decision": "review",
    "Gate": "review",
    "Option": "review",
    "Question": "review",
    "ReviewChannel": "review",
    "ReviewDismissed": "review",
    "ScriptedReviewChannel": "review",
    "SuspendingReviewChannel": "review",
    "TerminalReviewChannel": "review",
    "evaluate": "review",
    "answer_review": "reviews",
    "fork_log": "reviews",
    "open_reviews": "reviews",
    "review_state": "reviews",
    "Contributions": "runtime",
    "Controller": "runtime",
    "Runtime": "runtime",
    "Session": "session",
    "Tool": "tools",
    "ToolCall": "tools",
    "ToolFailure": "tools",
    "ToolOutput": "tools",
    "ToolResult": "tools",
    "ToolSpec": "tools",
    "current_tool_call": "tools",
    "dispatch_tool": "tools",
    "execute_tool": "tools",
    "export_tools": "tools",
    "strict_schema": "toolspecs",
    "to_anthropic": "toolspecs",
    "to_gemini": "toolspecs",
    "to_mcp": "toolspecs",
    "to_openai": "toolspecs",
    "with_stage_enum": "toolspecs",
}

__all__ = [
    "AbortSignal",
    "Agent",
    "Answer",
    "Assembly",
    "Command",
    "CommandRegistry",
    "CommandReply",
    "CommandSpec",
    "ContextEntry",
    "Contributions",
    "Controller",
    "ControllerLifecycle",
    "Decision",
    "Gate",
    "InboxAgent",
    "InboxItem",
    "Loop",
    "Model",
    "ModelError",
    "ModelReply",
    "Option",
    "PendingStore",
    "Question",
    "Registration",
    "RenderedSection",
    "Request",
    "ReviewChannel",
    "ReviewDismissed",
    "Runtime",
    "ScriptedModel",
    "ScriptedReviewChannel",
    "Selection",
    "Session",
    "StagedSession",
    "StepRequest",
    "SuspendedCall",
    "SuspendedStep",
    "SuspendingReviewChannel",
    "SystemSection",
    "TerminalReviewChannel",
    "Tool",
    "ToolCall",
    "ToolFailure",
    "ToolOutput",
    "ToolResult",
    "ToolSpec",
    "TurnOutcome",
    "answer_review",
    "current_tool_call",
    "dispatch_tool",
    "evaluate",
    "execute_tool",
    "export_tools",
    "fork_log",
    "message_text",
    "new_id",
    "notice",
    "open_reviews",
    "parse_command",
    "repair_open_turn",
    "review_state",
    "session_lock",
    "stage_notice",
    "strict_schema",
    "text_block",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "user_message",
    "with_stage_enum",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
