"""The step driver: ``StagedSession`` (a host's own loop drives one step at a time), the
reference ``Loop`` over a ``Model``, the open-step fold, dead-turn repair and the pending
boundary flush. Every name below loads on first use.

Concurrency: a fold → fire → append sequence never awaits, so one event loop serialises it per
session; drive a session from one event-loop thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.driver._loop import (
        Loop,
        Model,
        ModelReply,
        ScriptedModel,
        TurnOutcome,
    )
    from fsm_stage.driver._openstep import (
        CallState,
        OpenTurnView,
        open_turn_view,
    )
    from fsm_stage.driver._pending import (
        PendingStore,
        Selection,
        session_lock,
    )
    from fsm_stage.driver._repair import (
        is_turn_live,
        live_turn,
        repair_open_turn,
    )
    from fsm_stage.driver._step import (
        StagedSession,
        StepRequest,
        SuspendedCall,
        SuspendedStep,
    )

#: exported name -> the module (under this package) that defines it; ``__all__`` is its keys
_EXPORTS: dict[str, str] = {
    "StagedSession": "_step",
    "StepRequest": "_step",
    "SuspendedCall": "_step",
    "SuspendedStep": "_step",
    "Loop": "_loop",
    "Model": "_loop",
    "ModelReply": "_loop",
    "ScriptedModel": "_loop",
    "TurnOutcome": "_loop",
    "CallState": "_openstep",
    "OpenTurnView": "_openstep",
    "open_turn_view": "_openstep",
    "is_turn_live": "_repair",
    "live_turn": "_repair",
    "repair_open_turn": "_repair",
    "PendingStore": "_pending",
    "Selection": "_pending",
    "session_lock": "_pending",
}

__all__ = [
    "CallState",
    "Loop",
    "Model",
    "ModelReply",
    "OpenTurnView",
    "PendingStore",
    "ScriptedModel",
    "Selection",
    "StagedSession",
    "StepRequest",
    "SuspendedCall",
    "SuspendedStep",
    "TurnOutcome",
    "is_turn_live",
    "live_turn",
    "open_turn_view",
    "repair_open_turn",
    "session_lock",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
