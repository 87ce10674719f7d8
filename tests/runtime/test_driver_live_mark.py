"""The driver's live-turn mark: released when a failure escapes a writing call mid-turn (so crash
repair can close the turn), kept for a caller's misuse, taken again by the next writing call;
``repair()`` catches up with the log before deciding."""

from __future__ import annotations

import asyncio

import pytest
from runtime_helpers import Echo, new_agent

from fsm_stage.driver import StagedSession, is_turn_live
from fsm_stage.errors import DriverStateError, LogWriteError, RecordShapeError
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall


def _driver(session_id: str) -> StagedSession:
    rt = Runtime()
    rt.add_tool(Echo())
    return StagedSession(rt, new_agent(session_id), config={"provider": "p", "model": "m"})


def test_a_failed_write_mid_turn_releases_the_mark_so_repair_closes_the_turn() -> None:
    driver = _driver("mark-1")
    driver.start_turn()
    driver.begin_step()
    assert is_turn_live("mark-1") and driver.repair() == []  # live: not a crash
    driver.session.log.fail_next = LogWriteError("disk gone")  # type: ignore[attr-defined]
    with pytest.raises(LogWriteError):
        driver.record_reply("x", [ToolCall.of("echo", {"x": "a"}, id="a")])
    assert not is_turn_live("mark-1")
    closed = driver.repair()
    assert [e.type for e in closed] == ["step/end", "turn/end"]
    assert closed[-1].data["reason"] == {"kind": "interrupted"}


def test_misuse_keeps_the_mark_and_the_next_write_takes_a_released_one_again() -> None:
    driver = _driver("mark-2")
    driver.start_turn()
    with pytest.raises(DriverStateError):
        driver.record_reply("x")  # no step open: nothing written, the turn still runs
    with pytest.raises(RecordShapeError):
        driver.begin_step() and driver.record_reply(3)  # type: ignore[arg-type]
    assert is_turn_live("mark-2")
    driver.session.log.fail_next = LogWriteError("blip")  # type: ignore[attr-defined]
    with pytest.raises(LogWriteError):
        driver.record_reply("x", [ToolCall.of("echo", {"x": "a"}, id="a")])
    assert not is_turn_live("mark-2")
    driver.record_reply("x", [ToolCall.of("echo", {"x": "a"}, id="a")])  # the host carries on
    assert is_turn_live("mark-2")
    asyncio.run(driver.run_tool(ToolCall.of("echo", {"x": "a"}, id="a")))
    driver.end_step()
    driver.begin_step()
    driver.record_reply("done")
    driver.end_step()
    driver.end_turn()
    assert not is_turn_live("mark-2")


def test_repair_reads_the_log_end_first() -> None:
    driver = _driver("mark-3")
    driver.start_turn()
    driver.end_turn()
    refreshed: list[int] = []
    driver.session.refresh = lambda: refreshed.append(1) or 0  # type: ignore[method-assign]
    assert driver.repair() == [] and refreshed == [1]


def test_marks_follow_their_drivers_and_dead_ones_do_not_pile_up() -> None:
    import gc

    from fsm_stage.driver import _repair

    first, second = _driver("mark-4"), _driver("mark-4")
    first.start_turn()
    _repair.hold_live("mark-4", second)  # a second driver of the same session, as a reopen has
    del first
    gc.collect()
    assert is_turn_live("mark-4")  # the other holder still runs it
    del second
    gc.collect()
    assert not is_turn_live("mark-4")
    for i in range(2_000):  # drivers dropped mid-turn, never released
        _driver(f"dropped-{i}").start_turn()
    gc.collect()
    _driver("mark-5").start_turn()
    assert len(_repair._HOLDERS) < 1_000  # ids whose holders died were swept
