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

from fsm_stage.constants import GRAPH_EVENT, REVIEW_ANSWER, REVIEW_REQUEST, TOOL_CALL, TOOL_RESULT
from fsm_stage.errors import LogWriteError, ReviewPending
from fsm_stage.log.events import Event, NewEvent, SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import (
    Answer,
    Question,
    ScriptedReviewChannel,
    SuspendingReviewChannel,
    answer_review,
    open_reviews,
)
from fsm_stage.runtime.tools import ToolCall, ToolOutput, ToolSpec, tool_result_message

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


def _in_step(tmp_path: Path, *, plan: bool = False) -> tuple[BatchLog, Rig]:
    """A rig over a ``BatchLog`` with a turn and a step open (in plan mode when ``plan``)."""
    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    if plan:
        rig.enter_plan()
    rig.open_turn()
    rig.step()
    return log, rig


def test_goto_stage_logs_its_call_with_the_review_request(tmp_path: Path) -> None:
    log, rig = _in_step(tmp_path)
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
    log, rig = _in_step(tmp_path, plan=True)
    result = run(rig.call(rig.exit_call()))
    assert not result.is_error, result.text
    batches = _call_batches(log)
    assert batches[0] == [TOOL_CALL, GRAPH_EVENT, REVIEW_REQUEST]  # the first review records the graph
    assert batches[1:] == [[REVIEW_ANSWER], [TOOL_RESULT]]
    _result_points_at_its_call(rig, "call_exit")


def test_a_refused_goto_stage_writes_its_call_and_result_in_one_batch(tmp_path: Path) -> None:
    log, rig = _in_step(tmp_path)
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
    assert batches[0] == [TOOL_CALL, GRAPH_EVENT, REVIEW_REQUEST]  # the first review records the graph
    assert batches[-1] == [TOOL_RESULT]
    _result_points_at_its_call(rig, "c_patch")


def test_a_host_tool_under_an_ask_rule_refused_before_its_review_still_logs_its_call(tmp_path: Path) -> None:
    """No review channel to ask: the refusal comes before any request, so the call is written
    alone first, then its refusal."""
    log = BatchLog(tmp_path)
    counter = tmp_path / "runs"
    rig = ToolRig(log, None, counter)
    rig.to_verify()
    refused = asyncio.run(rig.runtime.call_tool(rig.agent, rig.call(call_id="c_other")))
    assert refused.is_error and "no review channel" in refused.text and runs(counter) == 0
    tail = log.batches[-2:]
    assert tail[0] == [TOOL_CALL] and TOOL_RESULT in tail[1]
    _result_points_at_its_call(rig, "c_other")


def test_two_calls_under_an_ask_rule_each_get_their_own_review(tmp_path: Path) -> None:
    """Tool reviews are one per call: a second call while the first waits opens its own review
    (it used to be refused "a tool review is already open"); each answer settles its own call."""
    counter = tmp_path / "runs"
    rig = ToolRig(BatchLog(tmp_path), SuspendingReviewChannel(), counter)
    rig.to_verify()
    first, second = rig.call("one"), rig.call("two", call_id="c_two")
    ids = []
    for call in (first, second):
        with pytest.raises(ReviewPending) as pending:
            asyncio.run(rig.runtime.call_tool(rig.agent, call))
        ids.append(pending.value.review_id)
    assert ids[0] != ids[1] and len(open_reviews(rig.session)) == 2
    answer_review(rig.session, ids[1], "approve")
    answer_review(rig.session, ids[0], "keep", feedback="not this one")
    assert not rig.resume(second).is_error and runs(counter) == 1
    refused = rig.resume(first)
    assert refused.is_error and "not this one" in refused.text and runs(counter) == 1


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


def _started_driver(rig: Rig, call: ToolCall) -> Any:
    driver = rig.host.driver
    driver.start_turn()
    driver.begin_step()
    driver.record_reply("", [call])
    return driver


def _held_call(tmp_path: Path) -> tuple[Rig, _HeldStore, ToolCall, Any]:
    """A rig whose handoff writes wait (``_HeldStore``), with a reply calling goto_stage."""
    rig = Rig(BatchLog(tmp_path), APPROVE)
    store = _HeldStore(rig.stage.handoffs)
    rig.stage.handoffs = store
    call = rig.goto_call("implement")
    return rig, store, call, _started_driver(rig, call)


async def _running(driver: Any, store: _HeldStore, call: ToolCall) -> asyncio.Task[Any]:
    """``driver.run_tool(call)`` as a task, once it is writing its handoff document."""
    task = asyncio.create_task(driver.run_tool(call))
    while not store.started.is_set():
        await asyncio.sleep(0.005)
    return task


def test_a_run_tool_cancelled_before_its_request_closes_the_call_so_the_step_can_end(tmp_path: Path) -> None:
    """The host cancels ``run_tool`` itself (a timeout) while the handoff is written: the call
    is closed as aborted before dispatch, and the step ends."""
    rig, store, call, driver = _held_call(tmp_path)

    async def scenario() -> None:
        task = await _running(driver, store, call)
        task.cancel()
        store.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert driver.unsettled() == ()
    driver.end_step()
    events = rig.session.events
    assert [e.type for e in events].count(TOOL_CALL) == 1 and REVIEW_REQUEST not in [e.type for e in events]
    result = next(e for e in events if e.type == TOOL_RESULT)
    assert result.data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    _result_points_at_its_call(rig, "call_goto")


@pytest.mark.parametrize("second", ["run_tool", "record_tool_result"])
def test_a_running_reviewed_call_cannot_run_or_be_recorded_again(tmp_path: Path, second: str) -> None:
    """Until its review request is written only this process knows the call runs: the driver
    refuses the same call meanwhile (no second ``tool/call``)."""
    from fsm_stage.errors import DriverStateError

    rig, store, call, driver = _held_call(tmp_path)

    async def scenario() -> None:
        task = await _running(driver, store, call)
        with pytest.raises(DriverStateError, match="is running"):
            if second == "run_tool":
                await driver.run_tool(call)
            else:
                driver.record_tool_result(call, "ran it myself")
        store.release.set()
        assert not (await task).is_error

    run(scenario())
    _result_points_at_its_call(rig, "call_goto")


class _UnsureLog(BatchLog):
    """The batch with the review request commits, then its write reports a failure (a store
    that lost its connection after the commit)."""

    armed = True

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        events = super().append_many(specs, expect_last_seq=expect_last_seq)
        if self.armed and any(s.type == REVIEW_REQUEST for s in specs):
            self.armed = False
            raise LogWriteError("server closed the connection during the commit")
        return events


@pytest.mark.parametrize("tool", ["goto_stage", "exit_plan_mode"])
def test_a_failed_write_that_committed_does_not_log_the_call_twice(tmp_path: Path, tool: str) -> None:
    rig = Rig(_UnsureLog(tmp_path), APPROVE)
    if tool == "exit_plan_mode":
        rig.enter_plan()
    call = rig.exit_call() if tool == "exit_plan_mode" else rig.goto_call("implement")
    driver = _started_driver(rig, call)
    result = run(driver.run_tool(call))
    assert result.is_error and "closed the connection" in result.text
    _result_points_at_its_call(rig, call.id)


def test_a_call_logged_through_another_session_object_is_logged_before_its_request(tmp_path: Path) -> None:
    """``dispatch_tool(session=...)`` with a session object other than the agent's: the call
    is written before the tool runs, so it still precedes the request."""
    from fsm_stage.runtime.session import Session
    from fsm_stage.runtime.tools import dispatch_tool

    log = BatchLog(tmp_path)
    rig = Rig(log, APPROVE)
    rig.open_turn()
    rig.step()
    other = Session(log)
    result = run(dispatch_tool(rig.runtime.tools, rig.goto_call("implement"), rig.agent, session=other,
                               turn=1, step=1))
    assert not result.is_error, result.text
    types = [e.type for e in rig.session.events]
    assert types.index(TOOL_CALL) < types.index(REVIEW_REQUEST)
    _result_points_at_its_call(rig, "call_goto")


def test_answer_review_of_a_path_says_to_open_it_first(tmp_path: Path) -> None:
    from fsm_stage.reviews import answer_review

    with pytest.raises(TypeError, match="open it first"):
        answer_review(tmp_path / "s.jsonl", "rv_x", "approve")  # type: ignore[arg-type]


def test_a_review_closed_without_an_answer_is_not_reported_as_answered(tmp_path: Path) -> None:
    """A review whose call got a result before anyone answered is closed (call-closed): a late
    answer is refused saying so, not "answered already"."""
    from fsm_stage.errors import ReviewAlreadyAnsweredError
    from fsm_stage.reviews import answer_review

    rig = Rig(BatchLog(tmp_path), SuspendingReviewChannel())
    review_id = rig.suspend("stage")
    call = next(e for e in rig.session.events if e.type == TOOL_CALL)
    message = tool_result_message(rig.goto_call("implement"), "Error: interrupted", True)
    rig.session.append(TOOL_RESULT, {"message": message, "error": {"code": "TOOL_OUTCOME_UNKNOWN"}},
                       surface_op="append", source_event_seqs=[call.seq])  # what crash repair writes
    with pytest.raises(ReviewAlreadyAnsweredError, match="closed without an answer"):
        answer_review(rig.session, review_id, "approve", by="alice")


def test_two_workers_asking_about_one_call_at_once_share_its_review(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Tool reviews are one per call: a second writer that looked before the first one's request
    landed (the race window) joins that review instead of opening another; the call runs once."""
    from fsm_stage.reviews import _flow as flow

    log = MemoryLog(SessionHeader(id="race", cwd=str(tmp_path)))
    counter = tmp_path / "runs"
    first = ToolRig(log, SuspendingReviewChannel(), counter)
    first.to_verify()
    call = first.call()
    with pytest.raises(ReviewPending):
        asyncio.run(first.runtime.call_tool(first.agent, call))
    second = ToolRig(log, ScriptedReviewChannel().approve(), counter)
    with monkeypatch.context() as patched:
        patched.setattr(flow, "existing", _looked_too_early(flow))
        ran = asyncio.run(second.runtime.call_tool(second.agent, call))
    assert [e.type for e in log.events].count(REVIEW_REQUEST) == 1
    assert [e.type for e in log.events].count(TOOL_CALL) == 1
    assert not ran.is_error and runs(counter) == 1
    redeemed = [e.data for e in log.events if e.type == "fsm/review/redeemed"]
    assert [r["applied"] for r in redeemed] == [True]  # one approval, used once


def test_a_review_closed_while_its_channel_asks_refuses_the_call_in_one_line(tmp_path: Path) -> None:
    """Another writer settles the call (its review closed ``call-closed``) while this writer's
    reviewer is still deciding: the answer is not logged and the call is refused, saying why
    (it was an AssertionError)."""
    from fsm_stage.reviews._flow import call_closed_specs

    counter = tmp_path / "runs"
    holder: list[ToolRig] = []

    def approve_after_the_call_closed(questions: Sequence[Question]) -> list[Answer]:
        rig = holder[0]
        rig.session.append_many(call_closed_specs(rig.session, "c_patch"))
        return [Answer(questions[0].id, ("Approve",))]

    rig = ToolRig(MemoryLog(SessionHeader(id="closed", cwd=str(tmp_path))),
                  ScriptedReviewChannel(default=approve_after_the_call_closed), counter)
    holder.append(rig)
    rig.to_verify()
    result = asyncio.run(rig.runtime.call_tool(rig.agent, rig.call()))
    assert result.is_error and "closed before an answer could be logged" in result.text
    assert runs(counter) == 0


@pytest.mark.parametrize("raced", [False, True])
def test_writers_asking_about_a_call_that_runs_elsewhere_never_run_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raced: bool) -> None:
    """Writer A's approved call is still running; B and C ask about the same call (``raced``: B
    looked before A's request landed). Each finds A's review in the call's own step, used: it is
    refused "used already", and B's refusal result does not make C take the call for a reused id
    and ask afresh (the tool ran twice)."""
    import threading

    import tool_rig

    from fsm_stage.reviews import _flow as flow

    log = MemoryLog(SessionHeader(id="elsewhere", cwd=str(tmp_path)))
    counter, release = tmp_path / "runs", threading.Event()
    plain = tool_rig.CountingTool.execute

    async def slow(self: Any, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        out = await plain(self, args, agent, signal)
        if threading.current_thread().name == "A":
            release.wait(10)
        return out

    monkeypatch.setattr(tool_rig.CountingTool, "execute", slow)
    first = ToolRig(log, ScriptedReviewChannel().approve(), counter)
    first.to_verify()
    call = first.call()
    done: dict[str, Any] = {}
    runner = threading.Thread(name="A", target=lambda: done.setdefault(
        "A", asyncio.run(first.runtime.call_tool(first.agent, call))))
    runner.start()
    for _ in range(1000):
        if runs(counter):
            break
        threading.Event().wait(0.01)
    try:
        for name in "BC":
            other = ToolRig(log, ScriptedReviewChannel().approve(), counter)
            with monkeypatch.context() as patched:
                if raced and name == "B":
                    patched.setattr(flow, "existing", _looked_too_early(flow))
                done[name] = asyncio.run(other.runtime.call_tool(other.agent, call))
    finally:
        release.set()
        runner.join(30)
    assert runs(counter) == 1 and not done["A"].is_error
    assert all(done[n].is_error and "used already" in done[n].text for n in "BC")
    types = [e.type for e in log.events]
    assert types.count(REVIEW_REQUEST) == 1 and types.count(TOOL_CALL) == 1


def _looked_too_early(flow: Any) -> Any:
    """``flow.existing`` whose first look misses the review another writer logged (it looked
    before the request landed); later looks, the re-check under the session lock, see it."""
    real, looks = flow.existing, []

    def existing(*args: Any, **kwargs: Any) -> Any:
        looks.append(1)
        return None if len(looks) == 1 else real(*args, **kwargs)

    return existing
