"""The ``exit_plan_mode`` tool and ``/plan`` command objects a ``PlanModeController`` registers;
both forward to the controller."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.commands import CommandReply
from fsm_stage.runtime.messages import Block
from fsm_stage.runtime.tools import ToolOutput

if TYPE_CHECKING:
    from fsm_stage.plan_mode._controller import PlanModeController


class _ExitTool:
    """The ``exit_plan_mode`` tool object registered with the runtime."""

    logs_call_with_review = True
    """Its first write is the review request: ``dispatch_tool`` logs the call in that batch."""

    def __init__(self, controller: PlanModeController) -> None:
        self._controller = controller
        self.spec = controller.tool_spec()

    async def execute(
        self, args: Mapping[str, Any], agent: Agent | None, signal: AbortSignal | None = None
    ) -> ToolOutput:
        return await self._controller.exit_plan_mode(args, agent, signal)


class _PlanCommand:
    """The ``/plan`` command object registered with the runtime."""

    def __init__(self, controller: PlanModeController) -> None:
        self._controller = controller
        self.spec = controller.command_spec()

    def handle(self, agent: Agent, raw_input: str, images: Sequence[Block]) -> CommandReply:
        return self._controller.handle_command(agent, raw_input, images)
