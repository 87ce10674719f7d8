"""``get`` / ``set`` (docs/contracts.md, B9–B21)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from plan_helpers import CAT, Harness, notice_text

from fsm_stage.constants import PLAN_MODE_EVENT
from fsm_stage.errors import LogWriteError


def test_get_reads_the_log_every_call_B9() -> None:
    """B9: fresh agent → {active: false} with no pending key; an append by anyone is seen."""
    h = Harness()
    assert h.get == {"active": False}
    h.log.append(PLAN_MODE_EVENT, {"active": True})
    assert h.get == {"active": True}
    h.log.append(PLAN_MODE_EVENT, {"active": False})
    assert h.get == {"active": False}


def test_noop_when_target_equals_pending_else_fold_B10() -> None:
    """B10: set(x) with x == pending target (or the fold when none) is a noop: nothing
    changes, nothing logged or narrated."""
    h = Harness()
    assert h.plan.set(h.agent, False) == "noop"
    h.open_turn()
    assert h.plan.set(h.agent, True) == "queued"
    n = len(h.log)
    assert h.plan.set(h.agent, True) == "noop"
    assert len(h.log) == n and h.get == {"active": False, "pending": True} and h.agent.inbox == ()


def test_open_turn_exit_is_queued_B11() -> None:
    """B11: logged active, open turn, set(false) → queued; get shows pending false; no log."""
    h = Harness(events=[("plan/mode", {"active": True})])
    h.open_turn()
    n = len(h.log)
    assert h.plan.set(h.agent, False) == "queued"
    assert h.get == {"active": True, "pending": False}
    assert len(h.log) == n and h.agent.inbox == ()
    # replacing: set(true) now equals the fold → cancelled, record replaced (kept)
    assert h.plan.set(h.agent, True) == "cancelled"
    assert h.get == {"active": True, "pending": True}


def test_open_turn_inactive_sequence_B12() -> None:
    """B12: open turn, inactive, no record: set(false) noop; set(true) queued; again noop."""
    h = Harness()
    h.open_turn()
    assert h.plan.set(h.agent, False) == "noop"
    assert h.get == {"active": False}
    assert h.plan.set(h.agent, True) == "queued"
    assert h.plan.set(h.agent, True) == "noop"
    assert h.get == {"active": False, "pending": True}


def test_cancel_replaces_record_B13() -> None:
    """B13: open turn, pending entry; set(false) → cancelled, record replaced (pending false)."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    assert h.plan.set(h.agent, False) == "cancelled"
    assert h.get == {"active": False, "pending": False}
    assert h.plan_events() == []


def test_idle_commit_appends_clears_and_narrates_B14() -> None:
    """B14: idle set(x != fold) appends plan/mode{x} now, clears the record → committed."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.plan.set(h.agent, False)  # record {false} (cancelled) left behind
    h.close_turn()
    assert h.plan.set(h.agent, True) == "committed"
    assert h.plan_events() == [True]
    assert h.get == {"active": True}


def test_idle_commits_reverse_immediately_B15() -> None:
    """B15: idle set(true) then set(false) both commit; a later boundary adds nothing."""
    h = Harness()
    assert h.plan.set(h.agent, True) == "committed"
    assert h.get == {"active": True}
    assert h.plan.set(h.agent, False) == "committed"
    assert h.get == {"active": False}
    h.open_turn()
    h.boundary()
    assert h.plan_events() == [True, False]


def test_idle_reversal_of_leftover_record_cancels_without_logging_B16() -> None:
    """B16: open turn set(true) queued; turn closes; set(false) → cancelled, nothing logged."""
    h = Harness()
    h.open_turn()
    assert h.plan.set(h.agent, True) == "queued"
    h.close_turn()
    assert h.plan.set(h.agent, False) == "cancelled"
    assert h.plan_events() == [] and h.get == {"active": False}


def test_idle_commit_narrates_through_inject_B17() -> None:
    """B17: after a header told the model otherwise, an idle commit injects one notice (not a
    steer: the agent is not woken); entering and leaving use their own wording."""
    h = Harness()
    h.header()
    assert h.plan.set(h.agent, True) == "committed"
    assert [notice_text(m) for m in h.injected()] == [CAT.text("notice.to_plan")]
    assert not h.agent.wants_turn
    src = h.injected()[0]["source"]
    summary = CAT.text("notice.to_plan")
    assert src == {"kind": "plugin", "plugin": "plan-mode", "form": "notice", "summary": summary}

    h2 = Harness(events=[("plan/mode", {"active": True})])
    h2.header()
    assert h2.plan.set(h2.agent, False) == "committed"
    assert [notice_text(m) for m in h2.injected()] == [CAT.text("notice.to_default")]


def test_no_notice_before_first_header_B18() -> None:
    """B18: an idle commit before any request/header produces no notice."""
    h = Harness()
    assert h.plan.set(h.agent, True) == "committed"
    assert h.injected() == []


def test_no_notice_when_header_already_told_target_B19() -> None:
    """B19: plan/mode{true}, header, plan/mode{false}, idle set(true) → committed, silent."""
    h = Harness(events=[("plan/mode", {"active": True})])
    h.header()
    h.log.append(PLAN_MODE_EVENT, {"active": False})
    assert h.plan.set(h.agent, True) == "committed"
    assert h.get == {"active": True} and h.injected() == []


def test_idle_commit_append_failure_propagates_B20() -> None:
    """B20 (and Q9): an idle-commit append error propagates; record unchanged, nothing narrated."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.plan.set(h.agent, False)  # leftover record {false}
    h.close_turn()
    h.header()
    h.log.fail_next = OSError("disk full")
    with pytest.raises(LogWriteError):
        h.plan.set(h.agent, True)
    assert h.get == {"active": False, "pending": False}
    assert h.plan_events() == [] and h.injected() == []


def test_leftover_record_waits_for_next_turns_first_boundary_B21() -> None:
    """B21: a record left after turn end is applied at the next turn's first accepted
    pre-step; meanwhile an idle set with the same target is a noop and the effective state
    already shapes the assembly."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.close_turn()
    assert h.plan.set(h.agent, True) == "noop"
    assert h.plan_events() == []
    assert h.runtime.assemble(h.agent).section("plan:policy") == h.plan.config.section
    h.open_turn(2)
    h.boundary()
    assert h.plan_events() == [True] and h.get == {"active": True}


def test_set_rejects_non_bool() -> None:
    """set() takes a real bool (a truthy string must not select plan mode)."""
    h = Harness()
    with pytest.raises(TypeError):
        h.plan.set(h.agent, cast(Any, "yes"))


def test_pending_selection_survives_rewrapping_the_log() -> None:
    """A host that wraps the same log in a new Session/agent object keeps the selection (the
    store is keyed by session id), and the flush still lands once."""
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.session import Session

    h = Harness()
    h.open_turn()
    assert h.plan.set(h.agent, True) == "queued"
    again = InboxAgent(Session(h.log))
    assert h.plan.get(again).to_json() == {"active": False, "pending": True}
    h.runtime.pre_step(again, [])
    assert h.plan_events() == [True] and h.get == {"active": True}
