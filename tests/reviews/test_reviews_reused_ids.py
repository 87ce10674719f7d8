"""A call id used again later (providers and adapters may number calls per turn) is a new call:
it is asked afresh, never answered from an old, already used or declined review."""

from __future__ import annotations

from pathlib import Path

from rig import Rig, run

from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel
from fsm_stage.runtime.tools import ToolResult


def _approving() -> ScriptedReviewChannel:
    return ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])


def _first_goto(tmp_path: Path, sid: str, review: ScriptedReviewChannel) -> tuple[Rig, ToolResult]:
    """A rig over a fresh in-memory session with a turn and a step open, and the result of its
    first ``goto_stage`` to implement (call ``call_0``)."""
    rig = Rig(MemoryLog(SessionHeader(id=sid, cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()
    return rig, run(rig.call(rig.goto_call("implement", call_id="call_0")))


def test_a_reused_call_id_after_an_applied_switch_asks_again(tmp_path: Path) -> None:
    review = _approving()
    rig = Rig(MemoryLog(SessionHeader(id="r", cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.goto_call("implement", call_id="call_0"))).is_error
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement"
    assert not run(rig.call(rig.goto_call("explore", call_id="call_1"))).is_error
    rig.step(3)
    assert rig.stage.current(rig.session) == "explore"
    again = run(rig.call(rig.goto_call("implement", call_id="call_0")))
    assert not again.is_error, again.text
    assert len(review.requests) == 3  # the reused id was asked, not answered from the first review
    rig.step(4)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 3


def test_a_reused_call_id_after_a_kept_review_asks_again(tmp_path: Path) -> None:
    review = ScriptedReviewChannel().keep("not yet").approve()
    rig, kept = _first_goto(tmp_path, "k", review)
    assert kept.is_error and "not yet" in kept.text
    approved = run(rig.call(rig.goto_call("implement", call_id="call_0")))
    assert not approved.is_error, approved.text
    assert len(review.requests) == 2


def test_a_reused_call_id_after_a_plan_exit_asks_again(tmp_path: Path) -> None:
    review = _approving()
    rig = Rig(MemoryLog(SessionHeader(id="p", cwd=str(tmp_path))), review)
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.exit_call(call_id="call_0"))).is_error
    rig.step(2)
    assert rig.plan.get(rig.agent).to_json() == {"active": False}
    rig.plan.set(rig.agent, True)
    rig.step(3)
    assert rig.plan.get(rig.agent).active
    assert not run(rig.call(rig.exit_call(call_id="call_0"))).is_error
    assert len(review.requests) == 2
    rig.step(4)
    assert rig.plan.get(rig.agent).to_json() == {"active": False}


def test_a_forged_handoff_path_is_never_read_outside_the_session(tmp_path: Path) -> None:
    import json
    import os

    from click.testing import CliRunner

    from fsm_stage.cli import main
    from fsm_stage.errors import ReviewPayloadChangedError
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel, answer_review

    cwd = tmp_path / "work"
    cwd.mkdir()
    fifo = cwd / "pipe.md"
    os.mkfifo(fifo)
    secret = tmp_path / "secret.md"
    secret.write_text("TOP SECRET", encoding="utf-8")
    path = tmp_path / "f.jsonl"
    rig = Rig(JsonlLog(path, header=SessionHeader(id="f", cwd=str(cwd))), SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    for i, target in enumerate((str(secret), str(fifo), "/dev/zero")):
        rig.session.append("fsm/review/request", {
            "id": f"rv_forged{i}", "callId": f"c{i}", "kind": "stage", "from": "explore",
            "target": "implement",
            "options": ["Approve", "Keep"], "shape": "full", "handoffPath": target,
            "payloadSha256": "0" * 64, "turn": 1, "step": 1})
    rig.close()
    listing = CliRunner().invoke(main, ["review", str(path), "--json"])
    assert listing.exit_code == 0 and "TOP SECRET" not in listing.output
    rows = json.loads(listing.output)["open"]
    assert len(rows) == 3 and all("unreadable" in str(r["payload"]) for r in rows), rows
    with JsonlLog(path) as log:
        for i in range(3):
            try:
                answer_review(log, f"rv_forged{i}", "approve")
            except ReviewPayloadChangedError:
                continue
            raise AssertionError("a forged document was approved")



def test_channel_feedback_with_escape_sequences_is_refused_and_the_review_dismissed(tmp_path: Path) -> None:
    """A channel's feedback is checked as ``answer_review`` checks a reviewer's: control
    characters or escape sequences are a channel failure (the review is dismissed, the model
    gets a one-line error, no feedback reaches it) and the next call is asked afresh."""
    rig, refused = _first_goto(tmp_path, "c", ScriptedReviewChannel().keep("not \x1b[2Kyet").approve())
    assert refused.is_error and "control characters or escape sequences" in refused.text
    assert "\x1b" not in refused.text and "yet" not in refused.text
    (answer,) = rig.reviews().answered.values()
    assert answer.outcome == "dismiss" and answer.feedback is None and not rig.reviews().open
    approved = run(rig.call(rig.goto_call("implement", call_id="call_1")))
    assert not approved.is_error, approved.text
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement"


def test_channel_feedback_too_long_is_refused_and_the_review_dismissed(tmp_path: Path) -> None:
    """Feedback longer than ``MAX_FEEDBACK_CHARS`` is refused before anything renders it: the
    review is dismissed (never left open, so the next goto_stage is asked), one-line error."""
    from fsm_stage.reviews._edits import MAX_FEEDBACK_CHARS

    rig, refused = _first_goto(tmp_path, "l", ScriptedReviewChannel().keep("y" * 300_000).approve())
    assert refused.is_error and f"more than the {MAX_FEEDBACK_CHARS:,}" in refused.text
    assert "yyyy" not in refused.text and not rig.reviews().open
    approved = run(rig.call(rig.goto_call("implement", call_id="call_1")))
    assert not approved.is_error, approved.text
