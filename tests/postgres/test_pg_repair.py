"""Crash repair on the PostgreSQL store: two workers' sessions over one stored session. The
second worker's view is stale (the first worker finished its turn since it last read): repair
re-reads, sees the turn ended and writes nothing; a turn that is really dead still gets its
closers once."""

from __future__ import annotations

from collections.abc import Callable

from fsm_stage.constants import TOOL_RESULT, TURN_END, TURN_START
from fsm_stage.driver import repair_open_turn
from fsm_stage.log import open_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.postgres import split_location
from fsm_stage.runtime.session import Session


def _open_turn(worker: Session) -> None:
    worker.append(TURN_START, {"turn": 1})
    worker.append("step/start", {"turn": 1, "step": 1})
    call = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{}"}
    worker.append("assistant/message", {"turn": 1, "step": 1, "message": {
        "role": "assistant", "content": [call], "id": "m1",
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


def test_a_stale_worker_does_not_close_a_turn_that_ended_meanwhile(pg_url: Callable[..., str]) -> None:
    url = pg_url("repair")
    session_id = split_location(url)[1]
    assert session_id is not None
    with open_log(url, create=SessionHeader(session_id)) as log_a:
        first = Session(log_a)
        _open_turn(first)
        with open_log(url) as log_b:
            second = Session(log_b)
            assert second.is_turn_open  # what the second worker saw
            _finish_turn(first)  # the first worker's live turn completes
            assert repair_open_turn(second) == []
            types = [e.type for e in second.events]
            assert types.count(TOOL_RESULT) == 1 and types.count(TURN_END) == 1


def test_a_dead_turn_is_closed_once(pg_url: Callable[..., str]) -> None:
    url = pg_url("repair-dead")
    session_id = split_location(url)[1]
    assert session_id is not None
    with open_log(url, create=SessionHeader(session_id)) as log_a:
        _open_turn(Session(log_a))
    with open_log(url) as log_b:
        written = repair_open_turn(Session(log_b))
        assert [e.type for e in written] == [TOOL_RESULT, "step/end", TURN_END]
    with open_log(url) as log_c:
        assert repair_open_turn(Session(log_c)) == []
