"""The runtime kernel: ``Runtime``, the registry controllers attach to (system sections,
tools, commands, pre-step participants), over a ``Session`` on an ``EventLog``; ``Agent``,
``Tool`` / ``ToolSpec``, ``/name`` commands, request assembly, messages, abort signals and the
controller lifecycle. The step driver lives in ``fsm_stage.driver``, reviews in
``fsm_stage.reviews``, the tool gate in ``fsm_stage.policy``. Every name below loads on first use.
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
    from fsm_stage.runtime.messages import (
        message_text,
        new_id,
        notice,
        stage_notice,
        text_block,
        user_message,
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

#: exported name -> the module (under this package) that defines it; ``__all__`` is its keys
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
    "message_text": "messages",
    "new_id": "messages",
    "notice": "messages",
    "stage_notice": "messages",
    "text_block": "messages",
    "user_message": "messages",
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
}

__all__ = [
    "AbortSignal",
    "Agent",
    "Assembly",
    "Command",
    "CommandRegistry",
    "CommandReply",
    "CommandSpec",
    "ContextEntry",
    "Contributions",
    "Controller",
    "ControllerLifecycle",
    "InboxAgent",
    "InboxItem",
    "Registration",
    "RenderedSection",
    "Request",
    "Runtime",
    "Session",
    "SystemSection",
    "Tool",
    "ToolCall",
    "ToolFailure",
    "ToolOutput",
    "ToolResult",
    "ToolSpec",
    "current_tool_call",
    "dispatch_tool",
    "execute_tool",
    "export_tools",
    "message_text",
    "new_id",
    "notice",
    "parse_command",
    "stage_notice",
    "text_block",
    "user_message",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
