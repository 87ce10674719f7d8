"""Stage approvals are redeemed only for what was reviewed, from where it was asked
(docs/reviews.md, "Redemption"): the stage moved, the edge left the accepted graph or the handoff
document changed → ``redeemed applied: false`` with the reason and one line to the model; never
applied as a jump; a changed graph never leaves the session unable to step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from rig import Rig, graph, run

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import SuspendingReviewChannel, answer_review
from fsm_stage.runtime.prefix import PrefixView
from fsm_stage.runtime.tools import ToolCall


def _asked(tmp_path: Path, log: Any = None) -> tuple[Rig, ToolCall, str]:
    """explore: goto_stage implement (full, with a handoff document) waits for its review."""
    rig = Rig(log if log is not None else MemoryLog(SessionHeader(id="s", cwd=str(tmp_path))),
              SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    call = rig.goto_call("implement")
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(call))
    return rig, call, pending.value.review_id


def _redeemed(rig: Rig) -> list[tuple[bool, str | None]]:
    return [(e.data["applied"], e.data["reason"]) for e in rig.session.events
            if e.type == "fsm/review/redeemed"]


def _told(rig: Rig) -> list[str]:
    return [str(m) for m in rig.session.messages() if "was not applied" in str(m)]


@pytest.mark.parametrize("resume", [False, True], ids=["step-only", "resumed-call"])
def test_an_approval_after_the_user_moved_the_stage_is_closed_stage_changed(
    tmp_path: Path, resume: bool
) -> None:
    rig, call, rid = _asked(tmp_path)
    run(rig.runtime.run_command(rig.agent, "/stage verify"))  # queued in the open turn
    rig.step(2)
    assert rig.stage.current(rig.session) == "verify"
    answer_review(rig.session, rid, "approve")
    if resume:
        result = run(rig.resume(call))
        assert result.is_error and "changed" in result.text
    rig.step(3)
    assert rig.stage.current(rig.session) == "verify"
    assert _redeemed(rig) == [(False, "stage-changed")]
    if not resume:  # the step closed it: the model is told in one line
        assert len(_told(rig)) == 1 and "verify" in _told(rig)[0]


@pytest.mark.parametrize("change", ["edited", "deleted", "symlink-out"])
def test_a_handoff_document_changed_after_the_approval_is_closed_payload_changed(
    tmp_path: Path, change: str
) -> None:
    rig, _call, rid = _asked(tmp_path)
    answer_review(rig.session, rid, "approve")
    record = rig.reviews().records[rid]
    assert record.handoff_path is not None
    doc = Path(record.handoff_path)
    if change == "edited":
        doc.write_text("# Handoff\nsomething nobody reviewed")
    elif change == "deleted":
        doc.unlink()
    else:
        outside = tmp_path.parent / f"outside-{os.getpid()}.md"
        outside.write_text(doc.read_text())  # the same bytes, but outside the workspace
        doc.unlink()
        doc.symlink_to(outside)
    rig.step(2)
    assert rig.stage.current(rig.session) == "explore"
    assert _redeemed(rig) == [(False, "payload-changed")]
    assert len(_told(rig)) == 1 and "handoff document changed" in _told(rig)[0]
    assert rig.stage_records() == 0  # the next stage was never told to read it


def test_an_unchanged_document_is_applied(tmp_path: Path) -> None:
    rig, _call, rid = _asked(tmp_path)
    answer_review(rig.session, rid, "approve")
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement" and _redeemed(rig) == [(True, None)]


def _without(edges: dict[str, tuple[EdgeConfig, ...]] | None = None, drop: str | None = None) -> GraphConfig:
    base = graph()
    stages = tuple(StageConfig(s.name, s.instruction, (edges or {}).get(s.name, s.targets))
                   for s in base.stages if s.name != drop)
    return GraphConfig(name=base.name, stages=stages, section=base.section, initial=base.initial,
                       handoff_dir=base.handoff_dir)


@pytest.mark.parametrize("change", ["stage-removed", "edge-removed"])
def test_accepting_a_changed_graph_closes_a_stale_approval_and_keeps_stepping(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "s.jsonl"
    rig, _call, rid = _asked(tmp_path, JsonlLog(path, header=SessionHeader(id="s", cwd=str(tmp_path))))
    answer_review(rig.session, rid, "approve")
    rig.close()
    new = (_without(drop="implement") if change == "stage-removed"
           else _without({"explore": (EdgeConfig("verify"),)}))
    with JsonlLog(path) as log:
        later = Rig(log, SuspendingReviewChannel(), accept_graph_change=True, graph_config=new)
        later.step(2)
        later.step(3)  # the session can always step again
        assert later.stage.current(later.session) == "explore"
        assert _redeemed(later) == [(False, "edge-removed")]
        assert len(_told(later)) == 1 and "no longer has this transition" in _told(later)[0]
        assert later.stage.pending_stage(later.session) is None


def test_a_user_switch_over_a_pending_approval_is_model_visible(tmp_path: Path) -> None:
    rig, call, rid = _asked(tmp_path)
    answer_review(rig.session, rid, "approve")
    assert not run(rig.resume(call)).is_error  # "…is approved and takes effect from the next step"
    rig.session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert run(rig.runtime.run_command(rig.agent, "/stage verify")) is not None  # idle: applied now
    last = rig.runtime.build_request(rig.agent).messages[-1]
    assert "The user switched this session to stage verify" in str(last)
    assert _redeemed(rig) == [(False, "superseded")]


# --- plan reviews --------------------------------------------------------------------------


def _plan_asked(tmp_path: Path) -> tuple[Rig, ToolCall, str]:
    rig = Rig(MemoryLog(SessionHeader(id="p", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    call = rig.exit_call()
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(call))
    return rig, call, pending.value.review_id


def test_an_approved_exit_whose_logged_plan_changed_is_closed_payload_changed(tmp_path: Path) -> None:
    rig, _call, rid = _plan_asked(tmp_path)
    answer_review(rig.session, rid, "approve")
    other = rig.exit_call("# Plan\n2. something nobody reviewed")  # the same call id logged again
    rig.session.append("tool/call", {"callId": other.id, "name": other.name, "arguments": other.arguments})
    rig.step(2)
    assert rig.plan.logged(rig.session) is True
    assert _redeemed(rig) == [(False, "payload-changed")]
    assert sum("The approved plan was not applied" in str(m) for m in rig.session.messages()) == 1


def test_an_approved_exit_after_plan_mode_ended_elsewhere_is_closed_stage_changed(tmp_path: Path) -> None:
    rig, _call, rid = _plan_asked(tmp_path)
    answer_review(rig.session, rid, "approve")
    rig.session.append("plan/mode", {"active": False})  # another writer left plan mode
    rig.step(2)
    assert _redeemed(rig) == [(False, "stage-changed")]
    assert [e.data["active"] for e in rig.session.events if e.type == "plan/mode"] == [True, False]


def test_session_messages_are_copies_that_cannot_change_the_log(tmp_path: Path) -> None:
    from fsm_stage.reviews import fork_log

    path = tmp_path / "s.jsonl"
    rig, _call, _rid = _asked(tmp_path, JsonlLog(path, header=SessionHeader(id="s", cwd=str(tmp_path))))
    rig.session.append_message({"id": "u1", "role": "user", "content": [{"type": "text", "text": "hello"}]})
    before = [dict(e.data) if isinstance(e.data, dict) else e.data for e in rig.session.events]
    for m in rig.session.messages():
        m["content"][0]["text"] = "EDITED"
        m["role"] = "system"
    assert "EDITED" not in str(rig.session.messages())
    assert "EDITED" not in str(rig.runtime.build_request(rig.agent).messages)
    assert [e.data for e in rig.session.events] == before
    child = fork_log(rig.session, rig.session.last_seq, tmp_path / "child.jsonl")
    child.log.close()  # type: ignore[attr-defined]
    assert "EDITED" not in (tmp_path / "child.jsonl").read_text()


def test_shared_messages_is_one_read_only_sequence_until_the_surface_grows(tmp_path: Path) -> None:
    """``shared_messages`` hands the same immutable sequence while nothing was appended (a
    request built from it takes it as is, no copy per request), a new one holding the older
    dicts plus the new message after an append (a view of the same list: no copy of the
    history), and ``messages()`` still deep-copies."""
    rig, _call, _rid = _asked(tmp_path)
    session = rig.session
    first = session.shared_messages()
    assert isinstance(first, PrefixView) and session.shared_messages() is first
    assert first == tuple(first) and not hasattr(first, "append")
    assert rig.runtime.build_request(rig.agent, copy=False).messages is first
    assert isinstance(rig.runtime.build_request(rig.agent).messages, tuple)  # deep copies
    session.append_message({"id": "u9", "role": "user", "content": [{"type": "text", "text": "more"}]})
    grown = session.shared_messages()
    assert grown is not first and len(grown) == len(first) + 1 and first.shares_items(grown)
    assert len(first) == len(grown) - 1 and first != grown  # the older view does not grow
    assert all(a is b for a, b in zip(first, grown, strict=False))
    assert grown[-1]["content"][0]["text"] == "more"
    copies = session.messages()
    assert copies == list(grown) and all(a is not b for a, b in zip(copies, grown, strict=True))
    # ``extends`` vouches in O(1) for a tuple grown from the one before, nothing else
    assert session.extends(grown, first) and session.extends(grown, grown)
    assert not session.extends(first, grown)
    assert not session.extends(grown, tuple(list(first)))  # equal, not the same
    assert not session.extends(list(grown), first)
    session.append_message({"id": "u10", "role": "user", "content": [{"type": "text", "text": "again"}]})
    third = session.shared_messages()
    assert session.extends(third, grown) and not session.extends(third, first)  # only the one before
    assert not session.extends(grown, first)  # grown is no longer the current tuple


def test_staged_session_user_switch_over_an_approval_supersedes_it_visibly(tmp_path: Path) -> None:
    """Through the step driver (``StagedSession``): suspend, approve, resume (approved), then
    ``/stage verify`` (queued in the turn) — the next step applies the user's switch, closes the
    approval ``superseded`` and the model's next request says so, instead of still promising the
    approved transition."""
    from fsm_stage.driver import StagedSession
    from fsm_stage.runtime.messages import user_message

    rig = Rig(MemoryLog(SessionHeader(id="d", cwd=str(tmp_path))), SuspendingReviewChannel())
    driver = StagedSession(rig.runtime, rig.agent)
    rig.agent.steer(user_message("move on"))
    driver.start_turn()
    assert driver.begin_step() is not None
    call = rig.goto_call("implement")
    driver.record_reply("", [call])
    with pytest.raises(ReviewPending) as pending:
        run(driver.run_tool(call))
    answer_review(rig.session, pending.value.review_id, "approve")
    (result,) = run(driver.resume())
    assert not result.is_error
    run(rig.runtime.run_command(rig.agent, "/stage verify"))
    assert driver.end_step() is True
    request = driver.begin_step()
    assert request is not None
    assert rig.stage.current(rig.session) == "verify"
    assert _redeemed(rig) == [(False, "superseded")]
    assert "The user switched this session to stage verify" in str(request.messages[-1])
