"""``OpenTurnFold``: the incremental open-turn fold gives, after every event, the view a fresh
scan of the whole log gives (checked against an independent back-scan oracle on the recorded
DSH corpus and on driver-written logs), and refolds when the log is not the one it grew."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from driver_helpers import Reviewed, answer
from runtime_helpers import Echo, new_agent
from shared_data import DSH_SESSIONS

from fsm_stage.driver import StagedSession
from fsm_stage.driver._openstep import OpenTurnFold, answered_call_id, open_turn_view
from fsm_stage.errors import DriverStateError, LogFormatError, ReviewPending
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall


def oracle(events: Sequence[Event]) -> Any:
    """The open turn as the pre-incremental back-scan computed it: (turn, start, open step,
    last step, replied, calls as tuples, open reviews), or None."""
    start = None
    for i in range(len(events) - 1, -1, -1):
        if events[i].type == "turn/end":
            return None
        if events[i].type == "turn/start":
            start = i
            break
    if start is None:
        return None

    def data(ev: Event) -> Mapping[str, Any]:
        return ev.data if isinstance(ev.data, Mapping) else {}

    raw = data(events[start]).get("turn")
    turn = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    open_step, last_step, replied = None, 0, False
    asked: dict[str, tuple[Any, ...]] = {}
    recorded: dict[str, int] = {}
    answered: set[str] = set()
    reviews: dict[str, str] = {}
    order: list[str] = []
    review_answers: set[str] = set()
    for ev in events[start + 1:]:
        d = data(ev)
        where = (d.get("turn", turn), d.get("step"))
        if ev.type == "step/start":
            open_step, replied = where, False
            if isinstance(d.get("step"), int) and not isinstance(d.get("step"), bool):
                last_step = max(last_step, d["step"])
        elif ev.type == "step/end":
            open_step = None
        elif ev.type == "assistant/message":
            replied = replied or open_step is not None
            msg = d.get("message")
            for b in (msg.get("content") or ()) if isinstance(msg, Mapping) else ():
                if isinstance(b, Mapping) and b.get("type") == "tool-call" and isinstance(b.get("id"), str):
                    asked.setdefault(b["id"], (b["id"], str(b.get("name", "")),
                                               str(b.get("arguments", "{}")), *where))
        elif ev.type == "tool/call" and isinstance(d.get("callId"), str):
            recorded[d["callId"]] = ev.seq
            asked.setdefault(d["callId"], (d["callId"], str(d.get("name", "")),
                                           str(d.get("arguments", "{}")), *where))
        elif ev.type == "tool/result":
            cid = answered_call_id(ev)
            if cid is not None:
                answered.add(cid)
        elif ev.type == "fsm/review/request" and isinstance(d.get("id"), str):
            order.append(d["id"])
            if isinstance(d.get("callId"), str):
                reviews[d["callId"]] = d["id"]
        elif ev.type == "fsm/review/answer" and isinstance(d.get("id"), str):
            review_answers.add(d["id"])
    calls = tuple((*a, recorded.get(cid), cid in answered, reviews.get(cid),
                   reviews.get(cid) in review_answers) for cid, a in asked.items())
    return (turn, start, open_step, last_step, replied, calls,
            tuple(r for r in order if r not in review_answers))


def as_tuple(view: Any) -> Any:
    if view is None:
        return None
    calls = tuple((c.call.id, c.call.name, c.call.arguments, c.turn, c.step, c.call_seq, c.answered,
                   c.review_id, c.review_answered) for c in view.calls)
    return (view.turn, view.start_seq, view.open_step, view.last_step, view.replied, calls,
            view.open_reviews)


def check_every_prefix(events: Sequence[Event]) -> int:
    """Grow a list event by event; the incremental fold must match the oracle at each length."""
    fold, grown, opened = OpenTurnFold(), [], 0
    for ev in events:
        grown.append(ev)
        fold.sync(grown)
        want = oracle(grown)
        assert as_tuple(fold.view()) == want, f"after seq {ev.seq}"
        opened += want is not None
    return opened


CORPUS = sorted(DSH_SESSIONS.glob("*.jsonl")) if DSH_SESSIONS.is_dir() else []


@pytest.mark.skipif(not CORPUS, reason=f"no recorded DSH sessions at {DSH_SESSIONS}")
def test_the_incremental_fold_matches_a_full_scan_after_every_event_of_the_corpus() -> None:
    opened = 0
    for path in CORPUS:
        try:
            events = read_log(path).events
        except LogFormatError:  # not every recorded file is a session log (ACP transcripts)
            continue
        opened += check_every_prefix(events)
    assert opened > 100  # the corpus really has open turns with calls in them


def _reviewed_driver() -> StagedSession:
    rt = Runtime()
    rt.add_tool(Echo())
    rt.add_tool(Reviewed())
    return StagedSession(rt, new_agent(), config={"provider": "p", "model": "m"})


def test_a_driver_log_with_many_calls_reviews_and_a_resume_matches_after_every_event() -> None:
    driver = _reviewed_driver()
    loop = asyncio.new_event_loop()
    driver.start_turn()
    for step in range(4):
        driver.begin_step()
        calls = [ToolCall.of("echo", {"x": f"{step}-{i}"}, id=f"c{step}-{i}") for i in range(3)]
        review = ToolCall.of("review_me", {}, id=f"r{step}")
        driver.record_reply("x", [*calls, review])
        for call in calls:
            loop.run_until_complete(driver.run_tool(call))
        with pytest.raises(ReviewPending) as pending:
            loop.run_until_complete(driver.run_tool(review))
        suspended = driver.suspended()
        assert suspended is not None and suspended.review_ids == (pending.value.review_id,)
        answer(driver.session, pending.value.review_id)
        loop.run_until_complete(driver.resume())
        driver.end_step()
    driver.begin_step()
    driver.record_reply("done")
    driver.end_step()
    driver.end_turn()
    loop.close()
    assert check_every_prefix(driver.session.events) > 20


def test_a_log_that_is_not_the_one_grown_is_refolded() -> None:
    driver = _reviewed_driver()
    driver.start_turn()
    driver.begin_step()
    call = ToolCall.of("echo", {"x": 1}, id="a")
    driver.record_reply("x", [call])
    events = list(driver.session.events)
    fold = OpenTurnFold()
    assert fold.sync(events) and fold.call("a") is not None
    # the same list cut back (a rolled-back batch) and grown with other events
    cut = events[:3]
    assert fold.sync(cut) and fold.call("a") is None and fold.open_step is not None
    # another list of the same length whose last event differs
    other = [*events[:-1], events[1]]
    fold.sync(other)
    assert as_tuple(fold.view()) == oracle(other)
    # an idle log
    assert not fold.sync(events[:0]) and fold.view() is None
    assert open_turn_view(events) is not None and as_tuple(open_turn_view(events)) == oracle(events)


def test_run_tool_finds_a_call_of_an_earlier_step_not_in_the_open_step() -> None:
    driver = _reviewed_driver()
    loop = asyncio.new_event_loop()
    driver.start_turn()
    driver.begin_step()
    first = ToolCall.of("echo", {"x": 1}, id="first")
    driver.record_reply("x", [first])
    loop.run_until_complete(driver.run_tool(first))
    driver.end_step()
    driver.begin_step()
    driver.record_reply("y", [ToolCall.of("echo", {"x": 2}, id="second")])
    with pytest.raises(DriverStateError, match="not in this step's reply"):
        loop.run_until_complete(driver.run_tool(first))
    loop.close()
