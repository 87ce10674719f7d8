"""Crash repair on a shared store: two workers' ``Session``s over one log. A worker's repair
folds, then appends its closers with ``expect_last_seq``: when the other worker's live turn
appended (and ended) meanwhile, repair re-folds and writes nothing instead of closing an
answered call a second time."""

from __future__ import annotations

from typing import Any

from fsm_stage.constants import TOOL_RESULT, TURN_END, TURN_START
from fsm_stage.driver import repair_open_turn
from fsm_stage.log.events import Event, MemoryLog, SessionHeader
from fsm_stage.runtime.session import Session

_CALL = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}


def _open_turn(worker: Session) -> None:
    worker.append(TURN_START, {"turn": 1})
    worker.append("step/start", {"turn": 1, "step": 1})
    worker.append("assistant/message", {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": [_CALL], "id": "m1",
        "source": {"kind": "model", "provider": "p", "model": "m"}}}, surface_op="append")
    worker.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": "{}"})


def _finish_turn(worker: Session) -> None:
    call_seq = worker.last_seq
    worker.append(TOOL_RESULT, {"turn": 1, "step": 1, "message": {
        "role": "tool", "toolCallId": "c1", "toolName": "bash", "id": "r1",
        "content": [{"type": "text", "text": "done"}], "isError": False}},
        surface_op="append", source_event_seqs=[call_seq])
    worker.append("step/end", {"turn": 1, "step": 1})
    worker.append(TURN_END, {"turn": 1, "reason": {"kind": "completed"}})


def test_repair_refolds_when_the_live_worker_finishes_its_turn_meanwhile() -> None:
    log = MemoryLog(SessionHeader("shared"))
    first, second = Session(log), Session(log)
    _open_turn(first)
    fired: list[Any] = []

    def the_first_worker_finishes(_event: Event) -> None:
        if not fired:  # between the second worker's fold and its append
            fired.append(True)
            _finish_turn(first)

    second.add_validator(the_first_worker_finishes)
    assert repair_open_turn(second) == []
    types = [e.type for e in log.events]
    assert types.count(TOOL_RESULT) == 1
    assert types.count(TURN_END) == 1
    assert log.events[-1].data["reason"] == {"kind": "completed"}


def test_repair_still_closes_a_dead_turn_after_a_concurrent_append() -> None:
    log = MemoryLog(SessionHeader("shared2"))
    first, second = Session(log), Session(log)
    _open_turn(first)
    fired: list[Any] = []

    def another_event_lands(_event: Event) -> None:
        if not fired:
            fired.append(True)
            first.append("custom/note", {"x": 1}, ignorable=True)

    second.add_validator(another_event_lands)
    written = repair_open_turn(second)
    assert [e.type for e in written] == [TOOL_RESULT, "step/end", TURN_END]
    assert [e.type for e in log.events].count(TURN_END) == 1
