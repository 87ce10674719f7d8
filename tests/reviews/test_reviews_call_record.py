"""A reviewed call's ``tool/call`` shares its review request's write (one fsync / commit fewer):
the durability contract needs the call recorded before its review is asked, not before the tool
starts. A call that opens no review writes it with its result; a host tool writes it first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from rig import Rig, run
from tool_rig import ToolRig, runs

from fsm_stage.constants import REVIEW_ANSWER, REVIEW_REQUEST, TOOL_CALL, TOOL_RESULT
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import Event, NewEvent, SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel, SuspendingReviewChannel
from fsm_stage.runtime.tools import ToolCall, ToolOutput, ToolSpec

APPROVE = ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])


class BatchLog(MemoryLog):
    """A ``MemoryLog`` that remembers the event types of every write (one batch per write)."""

    def __init__(self, cwd: Path) -> None:
        super().__init__(SessionHeader(id="calls", cwd=str(cwd)))
        self.batches: list[list[str]] = []

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        events = super().append_many(specs, expect_last_seq=expect_last_seq)
        self.batches.append([e.type for e in events])
        return events


def _call_batches(log: BatchLog) -> list[list[str]]:
    """The writes from the first ``tool/call`` on."""
    first = next(i for i, b in enumerate(log.batches) if TOOL_CALL in b)
    return log.batches[first:]


def _result_points_at_its_call(rig: Rig | ToolRig, call_id: str) -> None:
    events = rig.session.events
    call = next(e for e in events if e.type == TOOL_CALL and e.data["callId"] == call_id)
    result = next(e for e in events if e.type == TOOL_RESULT
                  and e.data["message"]["content"][0]["toolCallId"] == call_id)
    assert result.source_event_seqs == (call.seq,)
    assert sum(e.type == TOOL_CALL and e.data["callId"] == call_id for e in events) == 1


def test_goto_stage_logs_its_call_with_the_review_request(tmp_path: Path) -> None:
    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    rig.open_turn()
    rig.step()
    result = run(rig.call(rig.goto_call("implement")))
    assert not result.is_error, result.text
    batches = _call_batches(log)
    assert batches[0][0] == TOOL_CALL and batches[0][-1] == REVIEW_REQUEST  # one write: call .. request
    assert batches[1] == [REVIEW_ANSWER]
    assert batches[2] == [TOOL_RESULT]
    assert len(batches) == 3
    _result_points_at_its_call(rig, "call_goto")
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1


def test_exit_plan_mode_logs_its_call_with_the_review_request(tmp_path: Path) -> None:
    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    result = run(rig.call(rig.exit_call()))
    assert not result.is_error, result.text
    batches = _call_batches(log)
    assert batches[0] == [TOOL_CALL, REVIEW_REQUEST]
    assert batches[1:] == [[REVIEW_ANSWER], [TOOL_RESULT]]
    _result_points_at_its_call(rig, "call_exit")


def test_a_refused_goto_stage_writes_its_call_and_result_in_one_batch(tmp_path: Path) -> None:
    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    rig.open_turn()
    rig.step()
    result = run(rig.call(rig.goto_call("nowhere")))
    assert result.is_error
    assert _call_batches(log) == [[TOOL_CALL, TOOL_RESULT]]
    _result_points_at_its_call(rig, "call_goto")


def test_a_suspended_call_is_logged_and_its_resume_points_at_it(tmp_path: Path) -> None:
    log = BatchLog(tmp_path)
    rig = Rig(log, SuspendingReviewChannel())
    review_id = rig.suspend("stage")
    assert _call_batches(log)[0][0] == TOOL_CALL and _call_batches(log)[-1][-1] == REVIEW_REQUEST
    assert len(_call_batches(log)) == 1  # nothing else: the call waits
    from fsm_stage.reviews import answer_review
    answer_review(rig.session, review_id, "approve", by="alice")
    result = run(rig.resume(rig.goto_call("implement")))
    assert not result.is_error, result.text
    assert [e.type for e in rig.session.events].count(TOOL_CALL) == 1


def test_a_host_tool_under_an_ask_rule_logs_its_call_with_the_request_before_it_runs(tmp_path: Path) -> None:
    log = BatchLog(tmp_path)
    counter = tmp_path / "runs"
    rig = ToolRig(log, APPROVE, counter)
    rig.to_verify()
    result = asyncio.run(rig.runtime.call_tool(rig.agent, rig.call()))
    assert not result.is_error, result.text
    assert runs(counter) == 1
    batches = _call_batches(log)
    assert batches[0] == [TOOL_CALL, REVIEW_REQUEST]
    assert batches[-1] == [TOOL_RESULT]
    _result_points_at_its_call(rig, "c_patch")


def test_a_host_tool_under_an_ask_rule_refused_before_its_review_still_logs_its_call(tmp_path: Path) -> None:
    """A review of the same call already open (busy): the refusal comes before any request, so
    the call is written alone first, then its refusal."""
    log = BatchLog(tmp_path)
    counter = tmp_path / "runs"
    rig = ToolRig(log, SuspendingReviewChannel(), counter)
    rig.to_verify()
    with pytest.raises(ReviewPending):
        asyncio.run(rig.runtime.call_tool(rig.agent, rig.call()))
    second = asyncio.run(rig.runtime.call_tool(rig.agent, rig.call(call_id="c_other")))
    assert second.is_error and runs(counter) == 0
    tail = log.batches[-2:]
    assert tail[0] == [TOOL_CALL] and TOOL_RESULT in tail[1]
    _result_points_at_its_call(rig, "c_other")


class _Recorder:
    """A host tool that records which events the log held when it started."""

    def __init__(self) -> None:
        self.spec = ToolSpec("look", "Look.", {"type": "object"})
        self.seen: list[str] = []

    async def execute(self, args: Mapping[str, Any], agent: Any, signal: Any = None) -> ToolOutput:
        self.seen = [e.type for e in agent.session.events]
        return ToolOutput(None, "ok")


def test_a_host_tool_still_logs_its_call_before_it_runs(tmp_path: Path) -> None:
    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    tool = _Recorder()
    rig.runtime.add_tool(tool)
    rig.open_turn()
    rig.step()
    run(rig.runtime.call_tool(rig.agent, ToolCall.of("look", {}, id="c_look")))
    assert tool.seen[-1] == TOOL_CALL
    assert _call_batches(log) == [[TOOL_CALL], [TOOL_RESULT]]


class _HeldStore:
    """A handoff store of unknown cost (``blocking``: written in a thread) whose writes wait
    for ``release``; ``started`` is set when one begins."""

    blocking = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started = threading.Event()
        self.release = threading.Event()

    def write(self, relative: Any, text: str, *, cwd: str | None, policy: Any = None) -> str:
        self.started.set()
        self.release.wait(10)
        return str(self.inner.write(relative, text, cwd=cwd, policy=policy))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_call_cancelled_before_its_request_logs_nothing_and_closes_as_not_started(tmp_path: Path) -> None:
    """Cancelled while its handoff document is written (before the request): no ``tool/call``
    reached the log, so closing the turn records the call as never dispatched, once."""
    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    store = _HeldStore(rig.stage.handoffs)
    rig.stage.handoffs = store
    staged = rig.host.driver
    call = rig.goto_call("implement")

    async def scenario() -> None:
        staged.start_turn()
        staged.begin_step()
        staged.record_reply("", [call])
        task = asyncio.create_task(staged.run_tool(call))
        while not store.started.is_set():
            await asyncio.sleep(0.005)
        await staged.cancel()
        store.release.set()
        assert task.done()

    run(scenario())
    types = [e.type for e in rig.session.events]
    assert types.count(TOOL_CALL) == 1 and REVIEW_REQUEST not in types
    result = next(e for e in rig.session.events if e.type == TOOL_RESULT)
    assert result.data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert not rig.session.is_turn_open
