"""The vocabulary of compiled graphs: trigger names, the session cursor, refusals.

``goto(target)`` is the trigger of a model transition (``"goto:<target>"``); the plan-mode
machine's states and triggers are ``PLAN_*``. A session's stage lives on a ``StageCursor``
(``__slots__ = ("state",)``): it is handed to the machine for one call and never registered
with it, so nothing is bound onto it and the machine keeps no reference to it. ``Refusal``
says why a transition would be refused; ``UnknownStageError`` names a stage the graph lacks.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

from fsm_stage.errors import UnknownStageError as UnknownStageError

GOTO_PREFIX: Final = "goto:"
PLAN_DEFAULT: Final = "default"
PLAN_STATE: Final = "plan"
PLAN_ENTER: Final = "enter_plan"
PLAN_LEAVE: Final = "leave_plan"
PLAN_EXIT: Final = "exit_plan"


def goto(target: str) -> str:
    """The trigger name of a model transition to ``target`` (``"goto:<target>"``)."""
    return f"{GOTO_PREFIX}{target}"


class StageCursor:
    """A session's position in a compiled graph: only ``state`` (a stage name).

    Never registered with the machine; nothing can be bound onto it (``__slots__``).
    """

    __slots__ = ("state",)

    def __init__(self, state: str) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"StageCursor({self.state!r})"


@attrs.frozen
class Refusal:
    """Why a model transition ``current -> target`` would be refused (see ``explain_refusal``).

    ``kind``:
      * ``"unknown_target"``: ``target`` is not a stage of the graph;
      * ``"current"``: ``target`` is the current stage;
      * ``"unknown_current"``: the cursor's stage is not in the graph (e.g. a log from an
        older graph); only a user jump can leave it;
      * ``"not_an_edge"``: the graph has no edge ``current -> target`` (``allowed`` lists the
        targets it has, in configured order);
      * ``"guard"``: the edge's eligibility guards do not hold (``failing`` names them).
    """

    kind: Literal["unknown_target", "current", "unknown_current", "not_an_edge", "guard"]
    current: str
    target: str
    allowed: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "unknown_target":
            return f"{self.target!r} is not a stage of this graph"
        if self.kind == "current":
            return f"{self.target!r} is already the current stage"
        if self.kind == "unknown_current":
            return f"the current stage {self.current!r} is not in this graph"
        if self.kind == "not_an_edge":
            allowed = ", ".join(self.allowed) or "none"
            return f"no transition {self.current} -> {self.target} (allowed: {allowed})"
        return f"transition {self.current} -> {self.target} refused: guard(s) {', '.join(self.failing)} fail"
