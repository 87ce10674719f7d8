"""Fold (docs/contracts.md) and fork/spawn inheritance (B113)."""

from __future__ import annotations

from plan_helpers import Harness

from fsm_stage.constants import PLAN_MODE_EVENT, TURN_START
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.plan_mode import fold_plan_mode
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.session import Session


def _log(*actives: bool) -> MemoryLog:
    log = MemoryLog(SessionHeader("s"))
    log.append(TURN_START, {"turn": 1})
    for a in actives:
        log.append(PLAN_MODE_EVENT, {"active": a})
        log.append("tool/call", {"name": "x"})
    return log


def test_empty_log_folds_inactive_B6() -> None:
    """B6: fold([]) is False."""
    assert fold_plan_mode([]) is False


def test_last_plan_mode_wins_B7() -> None:
    """B7: true, false, true → true; other event types are ignored."""
    assert fold_plan_mode(_log(True, False, True).events) is True
    assert fold_plan_mode(_log(True, False).events) is False


def test_prefix_fold_B8() -> None:
    """B8: fold(log, end) considers events[0:end] only."""
    log = MemoryLog(SessionHeader("s"))
    log.append(PLAN_MODE_EVENT, {"active": True})
    log.append(PLAN_MODE_EVENT, {"active": False})
    assert fold_plan_mode(log.events, 1) is True
    assert fold_plan_mode(log.events, 0) is False
    assert fold_plan_mode(log.events) is False


def test_fork_inherits_logged_state_spawn_starts_inactive_B113() -> None:
    """B113: a fork (copied log) inherits the logged state; a new agent starts inactive."""
    h = Harness()
    assert h.plan.set(h.agent, True) == "committed"
    fork = Session(MemoryLog(SessionHeader("fork", parent_session="agent-1"), list(h.log.events)))
    assert h.plan.get(InboxAgent(fork)).to_json() == {"active": True}
    spawned = Session(MemoryLog(SessionHeader("child", origin="subagent", delegation_depth=1)))
    assert h.plan.get(InboxAgent(spawned)).to_json() == {"active": False}
