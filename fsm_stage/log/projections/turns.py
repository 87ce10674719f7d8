"""``OpenTurn``: idle vs open turn (docs/contracts.md).

The last ``turn/start``/``turn/end`` decides; the state also keeps the last turn number and
the ``request/header`` count. The runtime's ``Session`` reads this same fold
(``runtime.session.TurnFold`` is a subclass).
"""

from __future__ import annotations

from typing import Any

import attrs

from fsm_stage.constants import (
    REQUEST_HEADER,
    TURN_END,
    TURN_START,
)
from fsm_stage.log.events import Event
from fsm_stage.log.projections.core import _data, _int


@attrs.frozen
class TurnState:
    """State of ``OpenTurn``.

    ``open``: the last turn boundary is a ``turn/start``; ``turn``: the open turn's number
    (None when idle); ``last_turn``: the highest turn number seen (0 before any);
    ``headers``: how many ``request/header`` events the log holds.
    """

    open: bool = False
    turn: int | None = None
    last_turn: int = 0
    headers: int = 0


_TURN_IDLE = TurnState()


class OpenTurn:
    """Idle vs open turn from the log (docs/contracts.md, docs/session-log.md).

    A ``turn/start`` opens a turn numbered ``data.turn``, or ``last_turn + 1`` when it
    carries no integer number (hand-trimmed logs); ``last_turn`` keeps the highest number.
    A ``turn/end`` closes an open turn. ``request/header`` events are counted. The view is
    ``{"open", "turn"}``. The runtime's ``Session.is_turn_open``/``last_turn``/
    ``has_request_header`` read this fold, so runtime and CLI agree.
    """

    key = "turn"
    STATE_VERSION = 2
    #: Event types that can change the state: an event of another type changes it
    #: only through a ``surfaceOp``, so a streaming reader may skip it (tests check this).
    READS = frozenset({TURN_START, TURN_END, REQUEST_HEADER})

    def init(self) -> TurnState:
        return _TURN_IDLE

    def apply(self, state: TurnState, event: Event) -> TurnState:
        t = event.type
        if t == TURN_START:
            turn = _data(event).get("turn")
            number = turn if _int(turn) else state.last_turn + 1
            return TurnState(True, number, max(number, state.last_turn), state.headers)
        if t == TURN_END:
            return TurnState(False, None, state.last_turn, state.headers) if state.open else state
        if t == REQUEST_HEADER:
            return attrs.evolve(state, headers=state.headers + 1)
        return state

    def view(self, state: TurnState) -> dict[str, Any]:
        return {"open": state.open, "turn": state.turn}

    def dump(self, state: TurnState) -> Any:
        return {"open": state.open, "turn": state.turn, "lastTurn": state.last_turn, "headers": state.headers}

    def load(self, raw: Any) -> TurnState:
        if not isinstance(raw, dict) or set(raw) != {"open", "turn", "lastTurn", "headers"}:
            raise ValueError(f"bad turn state {raw!r}")
        ok = (
            isinstance(raw["open"], bool)
            and (raw["turn"] is None or _int(raw["turn"]))
            and _int(raw["lastTurn"])
            and _int(raw["headers"])
        )
        if not ok:
            raise ValueError(f"bad turn state {raw!r}")
        return TurnState(raw["open"], raw["turn"], raw["lastTurn"], raw["headers"])
