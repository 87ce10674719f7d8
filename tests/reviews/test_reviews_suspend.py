"""Suspend and resume (issue 11 item 2), answers and their errors, shape choice (item 4) and
cancellation (item 5, controller side)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rig import Rig, run

from fsm_stage.constants import APPROVE_KEEP_CONVERSATION_LABEL
from fsm_stage.errors import (
    ReviewAlreadyAnsweredError,
    ReviewError,
    ReviewNotFoundError,
    ReviewPayloadChangedError,
    ReviewPending,
)
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import ScriptedReviewChannel, SuspendingReviewChannel, answer_review, open_reviews

ROOT = Path(__file__).resolve().parents[2]
RIG = Path(__file__).resolve().parent / "rig.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _suspend_goto(tmp_path: Path, handoff: str | None = "# Handoff\nwhat was done") -> tuple[Rig, str]:
    rig = Rig(MemoryLog(SessionHeader(id="s-1", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(rig.goto_call("implement", handoff)))
    return rig, pending.value.review_id


def test_a_suspending_channel_logs_the_request_and_leaves_the_call_open(tmp_path: Path) -> None:
    rig, rid = _suspend_goto(tmp_path)
    assert [e.type for e in rig.session.events][-3:] == ["tool/call", "fsm/graph", "fsm/review/request"]
    (record,) = open_reviews(rig.session)
    assert (record.id, record.call_id, record.kind, record.from_, record.target) == (
        rid, "call_goto", "stage", "explore", "implement")
    assert record.options == ("Approve", APPROVE_KEEP_CONVERSATION_LABEL, "Keep current stage")
    assert record.shape == "full"
    assert Path(record.handoff_path or "").read_text() == "# Handoff\nwhat was done"
    assert rig.stage.pending_stage(rig.session) is None
    # a second goto_stage while the review is open asks nobody
    second = run(rig.call(rig.goto_call("verify", call_id="call_2")))
    assert second.is_error and "already open" in second.text


def test_resume_after_an_api_approval_writes_only_the_result_then_the_step_applies(tmp_path: Path) -> None:
    rig, rid = _suspend_goto(tmp_path)
    answer = answer_review(rig.session, rid, "approve")
    assert (answer.outcome, answer.option, answer.shape, answer.by) == ("approve", "Approve", "full", "api")
    n = len(rig.session.events)
    result = run(rig.resume(rig.goto_call("implement")))
    assert not result.is_error and result.value["approved"] is True and result.value["handoffPath"]
    assert [e.type for e in rig.session.events[n:]] == ["tool/result"]
    assert rig.stage.pending_stage(rig.session) == "implement"
    again = run(rig.resume(rig.goto_call("implement")))  # a second resume: the same logged answer
    assert again.text == result.text
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
    red = rig.reviews().redeemed[rid]
    assert red.applied and rig.session.events[red.seq - 1].type == "user/message"  # one batch


def test_resume_with_changed_arguments_is_refused(tmp_path: Path) -> None:
    rig, rid = _suspend_goto(tmp_path)
    answer_review(rig.session, rid, "approve")
    changed = run(rig.resume(rig.goto_call("implement", "# Another handoff")))
    assert changed.is_error and "changed since the review was asked" in changed.text
    assert rig.stage.pending_stage(rig.session) == "implement"  # the approval itself stands


@pytest.mark.parametrize(("outcome", "feedback", "key"), [
    ("keep", "not yet", "errors.keep_stage_feedback"), ("keep", None, "errors.keep_stage"),
    ("dismiss", None, "errors.dismissed")])
def test_keep_and_dismiss_answers_become_the_tool_failure(tmp_path: Path, outcome: str, feedback: str | None,
                                                          key: str) -> None:
    rig, rid = _suspend_goto(tmp_path)
    answer_review(rig.session, rid, outcome, feedback=feedback)
    result = run(rig.resume(rig.goto_call("implement")))
    assert result.is_error and result.text == "Error: " + rig.stage.catalog.text(key, feedback=feedback or "")
    rig.step(2)
    assert rig.stage.current(rig.session) == "explore" and rig.reviews().open == ()


def test_answer_errors_are_typed_one_liners(tmp_path: Path) -> None:
    rig, rid = _suspend_goto(tmp_path)
    with pytest.raises(ReviewNotFoundError):
        answer_review(rig.session, "rv_nope", "approve")
    with pytest.raises(ReviewError, match="not an approve option"):
        answer_review(rig.session, rid, "approve", option="Keep current stage")
    (record,) = open_reviews(rig.session)
    Path(record.handoff_path or "").write_text("# edited behind the reviewer's back")
    with pytest.raises(ReviewPayloadChangedError):
        answer_review(rig.session, rid, "approve")
    answer_review(rig.session, rid, "keep")
    with pytest.raises(ReviewAlreadyAnsweredError):
        answer_review(rig.session, rid, "approve")


def test_the_reviewer_chooses_to_keep_the_conversation(tmp_path: Path) -> None:
    rig, rid = _suspend_goto(tmp_path)
    answer = answer_review(rig.session, rid, "approve", option=APPROVE_KEEP_CONVERSATION_LABEL)
    assert answer.shape == "light"
    result = run(rig.resume(rig.goto_call("implement")))
    assert not result.is_error and "handoffPath" not in result.value
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 0  # a light switch
    assert rig.reviews().redeemed[rid].applied


def test_cancelling_an_open_review_logs_a_dismiss_answer(tmp_path: Path) -> None:
    review = ScriptedReviewChannel()
    gate = review.block()
    rig = Rig(MemoryLog(SessionHeader(id="c-1", cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()

    async def cancel() -> None:
        task = asyncio.ensure_future(rig.call(rig.goto_call("implement")))
        await gate.wait_open()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(cancel())
    (answer,) = rig.reviews().answered.values()
    assert (answer.outcome, answer.by) == ("dismiss", "cancel") and rig.reviews().open == ()


def test_plan_exit_suspends_and_resumes(tmp_path: Path) -> None:
    rig = Rig(MemoryLog(SessionHeader(id="p-1", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(rig.exit_call()))
    changed = run(rig.resume(rig.exit_call("# Other plan")))
    assert changed.is_error and "changed" in changed.text
    answer_review(rig.session, pending.value.review_id, "approve")
    result = run(rig.resume(rig.exit_call()))
    assert result.value == {"approved": True}
    assert rig.plan.get(rig.agent).to_json() == {"active": True, "pending": False}
    rig.step(2)
    assert rig.plan.get(rig.agent).to_json() == {"active": False}


def _host(mode: str, log: Path, cwd: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, str(RIG), mode, str(log), str(cwd)], capture_output=True, text=True,
                         env=ENV, timeout=60, check=True)
    report: dict[str, object] = json.loads(out.stdout)
    return report


@pytest.mark.parametrize("via", ["api", "cli"])
def test_a_suspended_review_outlives_its_process_and_is_answered_elsewhere(tmp_path: Path, via: str) -> None:
    log = tmp_path / "s.jsonl"
    suspended = _host("suspend", log, tmp_path)
    listing = subprocess.run([sys.executable, "-m", "fsm_stage", "review", str(log), "--json"],
                             capture_output=True, text=True, env=ENV, check=True)
    (row,) = json.loads(listing.stdout)["open"]
    assert row["id"] == suspended["review_id"] and row["payload"] == "# Handoff\nwhat was done"
    if via == "api":
        with JsonlLog(log, lock_timeout=10) as jl:
            answer_review(jl, row["id"], "approve")
    else:
        subprocess.run([sys.executable, "-m", "fsm_stage", "review", str(log), "--approve", row["id"]],
                       capture_output=True, text=True, env=ENV, check=True)
    resumed = _host("resume", log, tmp_path)
    assert resumed["is_error"] is False and resumed["current"] == "implement"


def test_each_controller_answers_its_reviews_too(tmp_path: Path) -> None:
    rig, rid = _suspend_goto(tmp_path)
    answer = rig.stage.answer_review(rig.session, rid, "approve", option=APPROVE_KEEP_CONVERSATION_LABEL)
    assert (answer.shape, answer.by) == ("light", "api")
    plan = Rig(MemoryLog(SessionHeader(id="p-2", cwd=str(tmp_path))), SuspendingReviewChannel())
    plan.enter_plan()
    plan.open_turn()
    with pytest.raises(ReviewPending) as pending:
        run(plan.call(plan.exit_call()))
    kept = plan.plan.answer_review(plan.session, pending.value.review_id, "keep", feedback="add tests")
    assert (kept.outcome, kept.feedback) == ("keep", "add tests")
    assert "add tests" in run(plan.resume(plan.exit_call())).text
