"""``NOTIFY`` only where someone listens: an append notifies channel ``fsm_events`` once per batch
when the session's listener lock is held (``wait_for_events`` holds it while it listens, an
outside client may too), and not at all otherwise; a waiter still wakes for every append. And
the review flow's single read per phase still finds an answer logged elsewhere meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fsm_stage.log import open_log
from fsm_stage.log.events import NewEvent, SessionHeader
from fsm_stage.log.pg_schema import NOTIFY_CHANNEL, listener_lock
from fsm_stage.log.postgres import PostgresLog, connect, split_location


def _open(url: str) -> PostgresLog:
    session = split_location(url)[1]
    assert session is not None
    log = open_log(url, create=SessionHeader(session))
    assert isinstance(log, PostgresLog)
    return log


def _payloads_until_marker(listen: Any, dsn: str) -> list[str]:
    """The payloads ``listen`` got before a marker notified after them (commit order)."""
    with connect(dsn) as other:
        other.execute("SELECT pg_notify(%s, 'marker')", (NOTIFY_CHANNEL,))
    got = []
    for note in listen.notifies(timeout=30):
        if note.payload == "marker":
            return got
        got.append(note.payload)
    raise AssertionError("the marker notification never arrived")


def test_an_append_notifies_once_per_batch_only_while_the_lock_is_held(pg_url: Callable[..., str]) -> None:
    log = _open(pg_url())
    dsn = log.conninfo
    with connect(dsn) as listen:
        listen.execute(f"LISTEN {NOTIFY_CHANNEL}")
        log.append_many([NewEvent("fsm/a", {}), NewEvent("fsm/b", {})])
        assert _payloads_until_marker(listen, dsn) == []  # nobody holds the lock: no NOTIFY
        listen.execute("SELECT pg_advisory_lock_shared(%s, %s)", listener_lock(log.session))
        log.append_many([NewEvent("fsm/c", {}), NewEvent("fsm/d", {}), NewEvent("fsm/e", {})])
        log.append("fsm/f", {})
        assert _payloads_until_marker(listen, dsn) == [log.session, log.session]  # one per batch
        listen.execute("SELECT pg_advisory_unlock_shared(%s, %s)", listener_lock(log.session))
        log.append("fsm/g", {})
        assert _payloads_until_marker(listen, dsn) == []
    assert [e.type for e in log.events] == [f"fsm/{c}" for c in "abcdefg"]
    log.close()


def test_wait_for_events_holds_the_lock_so_appends_notify(pg_url: Callable[..., str]) -> None:
    url = pg_url()
    writer = _open(url)
    follower = open_log(url)
    assert isinstance(follower, PostgresLog)
    with connect(writer.conninfo) as listen:
        listen.execute(f"LISTEN {NOTIFY_CHANNEL}")
        assert follower.wait_for_events(0.05) == 0  # listening from now on, until closed
        writer.append("fsm/a", {})
        assert _payloads_until_marker(listen, writer.conninfo) == [writer.session]
        follower.close()  # its connection, lock included, goes (the server notices a moment later)
        key = listener_lock(writer.session)
        for _ in range(600):
            if listen.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()[0]:
                listen.execute("SELECT pg_advisory_unlock(%s, %s)", key)
                break
            time.sleep(0.05)
        writer.append("fsm/b", {})
        assert _payloads_until_marker(listen, writer.conninfo) == []
    writer.close()


def test_a_waiter_wakes_when_the_append_races_its_start(pg_url: Callable[..., str]) -> None:
    """Each round a new follower starts waiting while the writer appends: the append either
    commits before the follower's catch-up (read at once) or sees the lock and notifies."""
    url = pg_url()
    writer = _open(url)
    for i in range(12):
        follower = open_log(url)
        assert isinstance(follower, PostgresLog)
        got: list[int] = []
        go = threading.Barrier(2)

        def wait(f: PostgresLog = follower, go: threading.Barrier = go, got: list[int] = got) -> None:
            go.wait()
            total = 0
            while not total:  # a lost wake-up would hang here until the join below gives up
                total += f.wait_for_events(120)
            got.append(total)

        t = threading.Thread(target=wait, daemon=True)
        t.start()
        go.wait()
        writer.append("fsm/tick", {"i": i})
        t.join(60)
        assert not t.is_alive() and got == [1], f"round {i}: the waiter did not wake"
        follower.close()
    writer.close()


def test_an_answer_logged_elsewhere_while_the_reviewer_is_asked_wins(pg_url: Callable[..., str]) -> None:
    """The review flow reads the log once per phase (``Session.one_refresh``): an answer another
    process logs while this one asks its reviewer is still found (the next read, or the lost
    conditional append), and only one answer is logged."""
    import asyncio

    from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig
    from fsm_stage.constants import REVIEW_ANSWER
    from fsm_stage.handoff import MemoryHandoffStore
    from fsm_stage.reviews import Answer, ScriptedReviewChannel, answer_review
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session
    from fsm_stage.runtime.tools import ToolCall
    from fsm_stage.stage_switch import StageController

    url = pg_url()
    log = _open(url)
    other = open_log(url)
    graph = GraphConfig(name="two", section="Current stage: << stage_current >>.", stages=(
        StageConfig(name="a", instruction="Do a.", targets=(EdgeConfig("b"),)),
        StageConfig(name="b", instruction="Do b.", targets=(EdgeConfig("a"),))))
    controller = StageController(graph, handoffs=MemoryHandoffStore())
    approve = controller.catalog.text("review.approve_label")
    review = ScriptedReviewChannel()

    def answer_elsewhere_then_approve(questions: Any) -> list[Answer]:
        other.refresh()
        rid = [e for e in other.events if e.type == "fsm/review/request"][-1].data["id"]
        answer_review(other, rid, "keep", feedback="not yet")  # another process answers first
        return [Answer(questions[0].id, (approve,))]

    review.default = answer_elsewhere_then_approve
    runtime = Runtime(review=review, commands=False)
    runtime.attach(controller)
    session = Session(log)
    agent = InboxAgent(session)
    session.append("turn/start", {"turn": 1})
    loop = asyncio.new_event_loop()
    try:
        call = ToolCall.of("goto_stage", {"stage": "b", "handoff": "Handoff: done."}, id="c1")
        result = loop.run_until_complete(runtime.call_tool(agent, call))
        runtime.pre_step(agent, [], aborted=False)
    finally:
        loop.close()
    assert result.is_error  # kept: the first logged answer wins
    assert controller.current(session) == "a"
    answers = [e for e in session.events if e.type == REVIEW_ANSWER]
    assert [a.data["outcome"] for a in answers] == ["keep"]
    other.close()
    log.close()
