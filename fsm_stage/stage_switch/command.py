"""The ``/stage`` command (docs/contracts.md).

Bare ``/stage`` shows the current stage and the configured stages; ``/stage <name> [message]``
is a user jump to any configured stage (``StageController.set``), with the trailing text
steered into the new stage as a user message. ``StageCommand`` is the runtime ``Command``
bound to a ``StageController``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fsm_stage.constants import STAGE_COMMAND
from fsm_stage.runtime.commands import CommandReply, CommandSpec
from fsm_stage.runtime.messages import user_message
from fsm_stage.stage_switch.texts import COMMAND_HINT

if TYPE_CHECKING:
    from fsm_stage.runtime.agent import Agent
    from fsm_stage.stage_switch.controller import StageController

__all__ = ["StageCommand", "handle_stage_command"]

_WS = re.compile(r"\s+")


def handle_stage_command(ctl: StageController, agent: Agent, raw_input: str) -> CommandReply:
    """``/stage [stage [message]]`` (S82–S91, S93d)."""
    text = raw_input.strip()
    session = agent.session
    if not text:
        return CommandReply.success(ctl.catalog.text(
            "command.current", stage=ctl.current(session), stages=ctl.sorted_stages()))
    target, *rest = _WS.split(text)
    if ctl.config.stage(target) is None:
        return CommandReply.error(ctl.catalog.text("command.unknown", target=target,
                                                   stages=ctl.sorted_stages()))
    trailing = " ".join(rest).strip()
    outcome = ctl.set(agent, target)
    if trailing:
        agent.steer(user_message(trailing, id_factory=ctl.id_factory))
    key = {"noop": "command.already_current", "committed": "command.switched", "queued": "command.queued"}
    return CommandReply.success(ctl.catalog.text(key[outcome], target=target))



class StageCommand:
    """The ``/stage`` command (``fsm_stage.runtime.commands.Command``) bound to a controller."""

    def __init__(self, controller: StageController) -> None:
        self._controller = controller
        description = controller.catalog.text("command.description")
        self.spec = CommandSpec(STAGE_COMMAND, description, hint=COMMAND_HINT)

    def handle(self, agent: Agent, raw_input: str, images: Sequence[Any]) -> CommandReply:
        """Run ``StageController.handle_stage_command``."""
        return self._controller.handle_stage_command(agent, raw_input)
