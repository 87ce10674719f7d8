"""``Session.one_refresh``: a step or boundary reads the log once; a lost race, a failed append,
``mark_stale`` and the block's ends make the next ``refresh()`` read it again. A reviewed
transition refreshes once until the reviewer is asked, once after, and once at the boundary."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig
from fsm_stage.errors import AppendConflictError
from fsm_stage.handoff import MemoryHandoffStore
from fsm_stage.log.events import NewEvent, SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall
from fsm_stage.stage_switch import StageController


class CountingLog(MemoryLog):
    """A ``MemoryLog`` that counts the reads of other writers' events (``refresh``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refreshes = 0

    def refresh(self) -> int:
        self.refreshes += 1
        return super().refresh()


def _session() -> tuple[Session, CountingLog]:
    log = CountingLog(SessionHeader("s", cwd="/workspace"))
    return Session(log), log


def test_only_the_first_refresh_of_a_block_reads_the_log() -> None:
    session, log = _session()
    session.refresh()
    session.refresh()
    assert log.refreshes == 2  # outside a block every refresh reads
    with session.one_refresh():
        session.refresh()
        session.refresh()
        assert log.refreshes == 3
        session.append("fsm/a", {})  # an own append keeps the view current
        session.refresh()
        assert log.refreshes == 3
        session.mark_stale()
        session.refresh()
        session.refresh()
        assert log.refreshes == 4
    with session.one_refresh():  # a new block reads again
        session.refresh()
    session.refresh()  # and after a block, every refresh reads again
    assert log.refreshes == 6


def test_one_refresh_is_also_a_decorator_with_a_block_per_call() -> None:
    """As a ``contextlib.contextmanager`` block is: every call of the decorated function runs in
    a block of its own (its first refresh reads the log), nested calls included."""
    session, log = _session()

    @session.one_refresh()
    def step(depth: int) -> None:
        session.refresh()
        session.refresh()
        if depth:
            step(depth - 1)
        session.refresh()  # the outer block again after the nested one ended

    step(0)
    assert log.refreshes == 1
    step(2)
    assert log.refreshes == 4


def test_the_block_belongs_to_the_running_task() -> None:
    session, log = _session()
    with session.one_refresh():
        session.refresh()
        other = threading.Thread(target=lambda: (session.refresh(), session.refresh()))
        other.start()  # another thread (or a task started before the block) reads the log each time
        other.join()
        assert log.refreshes == 3
        session.refresh()
        assert log.refreshes == 3


def test_a_lost_race_makes_the_next_refresh_read() -> None:
    session, log = _session()
    with session.one_refresh():
        session.refresh()
        session.append("fsm/a", {})
        with pytest.raises(AppendConflictError):
            session.append("fsm/b", {}, expect_last_seq=-1)
        session.refresh()
        assert log.refreshes == 2
        with pytest.raises(AppendConflictError):
            session.append_many([NewEvent("fsm/c", {})], expect_last_seq=7)
        session.refresh()
        assert log.refreshes == 3
    assert [e.type for e in session.events] == ["fsm/a"]


def test_a_reviewed_transition_reads_the_log_three_times() -> None:
    graph = GraphConfig(name="two", section="Current stage: << stage_current >>.", stages=(
        StageConfig(name="a", instruction="Do a.", targets=(EdgeConfig("b"),)),
        StageConfig(name="b", instruction="Do b.", targets=(EdgeConfig("a"),))))
    controller = StageController(graph, handoffs=MemoryHandoffStore())
    review = ScriptedReviewChannel()
    approve = controller.catalog.text("review.approve_label")
    review.default = lambda questions: [Answer(questions[0].id, (approve,))]
    runtime = Runtime(review=review, commands=False)
    runtime.attach(controller)
    session, log = _session()
    agent = InboxAgent(session)
    session.append("turn/start", {"turn": 1})
    loop = asyncio.new_event_loop()
    try:
        for k, target in enumerate(("b", "a", "b")):
            before = log.refreshes
            call = ToolCall.of("goto_stage", {"stage": target, "handoff": f"Handoff {k}: done."}, id=f"c{k}")
            result = loop.run_until_complete(runtime.call_tool(agent, call))
            assert not result.is_error, result.text
            runtime.pre_step(agent, [], aborted=False)
            assert controller.current(session) == target
            # until the reviewer is asked, after the answer, at the boundary
            assert log.refreshes - before == 3
    finally:
        loop.close()
