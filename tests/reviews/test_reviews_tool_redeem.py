"""Tool reviews are redeemed like stage and plan reviews: once (a conditional append; the loser
of a race sees the winner's redemption and does not run the tool), only from the stage and plan
mode they were asked in, only for the reviewed arguments; a ``plan`` key in the arguments is
just an argument (docs/reviews.md, "Redemption")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tool_rig import ToolRig, runs

from fsm_stage.errors import ReviewPayloadChangedError, ReviewPending
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import SuspendingReviewChannel, answer_review
from fsm_stage.runtime.tools import ToolCall


def _suspended(tmp_path: Path, sid: str = "tool", **extra: object) -> tuple[ToolRig, ToolCall, str]:
    """A session in ``verify`` whose ``apply_patch`` call waits for its review."""
    rig = ToolRig(MemoryLog(SessionHeader(id=sid, cwd=str(tmp_path))), SuspendingReviewChannel(),
                  tmp_path / "runs")
    rig.to_verify()
    call = rig.call(**extra)  # type: ignore[arg-type]
    with pytest.raises(ReviewPending) as pending:
        import asyncio

        asyncio.run(rig.runtime.call_tool(rig.agent, call))
    return rig, call, pending.value.review_id


def _redeemed(rig: ToolRig) -> list[object]:
    return [e.data for e in rig.session.events if e.type == "fsm/review/redeemed"]


def test_a_second_resume_of_a_redeemed_call_does_not_run_the_tool_again(tmp_path: Path) -> None:
    rig, call, rid = _suspended(tmp_path)
    answer_review(rig.session, rid, "approve")
    first, second = rig.resume(call), rig.resume(call)
    assert not first.is_error and second.is_error
    assert "used already" in second.text
    assert runs(tmp_path / "runs") == 1
    assert _redeemed(rig) == [{"id": rid, "applied": True, "reason": None}]


def test_eight_threads_resuming_one_approved_call_run_it_once(tmp_path: Path) -> None:
    rig, call, rid = _suspended(tmp_path)
    answer_review(rig.session, rid, "approve")
    barrier = threading.Barrier(8)
    verdicts: list[bool] = []

    def resume() -> None:
        other = ToolRig(rig.session.log, SuspendingReviewChannel(), tmp_path / "runs")
        barrier.wait()
        verdicts.append(other.resume(call).is_error)

    threads = [threading.Thread(target=resume) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(verdicts) == [False] + [True] * 7
    assert runs(tmp_path / "runs") == 1 and len(_redeemed(rig)) == 1


def test_an_approval_after_the_stage_moved_is_redeemed_stage_changed(tmp_path: Path) -> None:
    rig, call, rid = _suspended(tmp_path)
    import asyncio

    asyncio.run(rig.runtime.run_command(rig.agent, "/stage explore"))  # queued in the open turn
    rig.runtime.pre_step(rig.agent, [])  # the next step applies it
    assert rig.stage.current(rig.session) == "explore"
    answer_review(rig.session, rid, "approve")
    result = rig.resume(call)
    assert result.is_error and "stage changed" in result.text
    assert runs(tmp_path / "runs") == 0
    assert _redeemed(rig) == [{"id": rid, "applied": False, "reason": "stage-changed"}]


def test_an_approval_given_outside_plan_mode_is_not_used_in_plan_mode(tmp_path: Path) -> None:
    rig, call, rid = _suspended(tmp_path)
    rig.session.append("plan/mode", {"active": True})
    answer_review(rig.session, rid, "approve")
    result = rig.resume(call)
    assert result.is_error and runs(tmp_path / "runs") == 0
    assert _redeemed(rig) == [{"id": rid, "applied": False, "reason": "stage-changed"}]


def test_a_resume_with_other_arguments_closes_the_approval_payload_changed(tmp_path: Path) -> None:
    rig, call, rid = _suspended(tmp_path)
    answer_review(rig.session, rid, "approve")
    result = rig.resume(rig.call(patch="rm -rf /"))
    assert result.is_error and "changed since it was reviewed" in result.text
    assert runs(tmp_path / "runs") == 0
    assert _redeemed(rig) == [{"id": rid, "applied": False, "reason": "payload-changed"}]
    assert rig.resume(call).is_error and runs(tmp_path / "runs") == 0  # closed: not usable later


def test_a_tool_review_whose_arguments_hold_a_plan_key_can_be_approved(tmp_path: Path) -> None:
    rig, call, rid = _suspended(tmp_path, plan="# not a plan review")
    answer = answer_review(rig.session, rid, "approve")
    assert answer.outcome == "approve"
    assert not rig.resume(call).is_error and runs(tmp_path / "runs") == 1


def test_a_tool_review_whose_logged_call_changed_says_so(tmp_path: Path) -> None:
    rig, _call, rid = _suspended(tmp_path, plan="x")
    rig.log_call(rig.call(patch="other", plan="x"))  # the same call id logged again, other arguments
    with pytest.raises(ReviewPayloadChangedError, match="tool call's arguments changed"):
        answer_review(rig.session, rid, "approve")


def test_fsm_stage_review_approves_a_tool_review_whose_arguments_hold_a_plan_key(tmp_path: Path) -> None:
    import asyncio

    from click.testing import CliRunner

    from fsm_stage.cli import main
    from fsm_stage.log.jsonl import JsonlLog

    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=SessionHeader(id="cli", cwd=str(tmp_path)))
    rig = ToolRig(log, SuspendingReviewChannel(), tmp_path / "runs")
    rig.to_verify()
    call = rig.call(plan="# a plan argument of a tool")
    with pytest.raises(ReviewPending) as pending:
        asyncio.run(rig.runtime.call_tool(rig.agent, call))
    rig.session.log.close()  # type: ignore[attr-defined]
    out = CliRunner().invoke(main, ["review", str(path), "--approve", pending.value.review_id])
    assert out.exit_code == 0, out.output
    with JsonlLog(path) as log:
        again = ToolRig(log, SuspendingReviewChannel(), tmp_path / "runs")
        assert not again.resume(call).is_error and runs(tmp_path / "runs") == 1


@pytest.mark.parametrize("feedback", ["no \x1b[2K way", "y" * 300_000])
def test_a_refused_channel_feedback_on_a_tool_review_denies_the_call(tmp_path: Path, feedback: str) -> None:
    """A tool review's channel feedback is checked as every reviewer's (control characters,
    escape sequences, more than ``MAX_FEEDBACK_CHARS``): the review is dismissed, the call is
    denied with a one-line error result, the tool never runs and nothing raises."""
    import asyncio

    from fsm_stage.reviews import ScriptedReviewChannel

    channel = ScriptedReviewChannel(keep_label="Deny").keep(feedback, label="Deny")
    rig = ToolRig(MemoryLog(SessionHeader(id="t", cwd=str(tmp_path))), channel, tmp_path / "runs")
    rig.to_verify()
    result = asyncio.run(rig.runtime.call_tool(rig.agent, rig.call()))
    assert result.is_error and "the review was dismissed" in result.text and "\n" not in result.text.strip()
    assert "\x1b" not in result.text and "yyyy" not in result.text
    assert runs(tmp_path / "runs") == 0
    (answer,) = [e.data for e in rig.session.events if e.type == "fsm/review/answer"]
    assert answer["outcome"] == "dismiss" and answer.get("feedback") is None
