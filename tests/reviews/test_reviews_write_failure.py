"""A failed log write during a review never wedges the session: the answer that could not be
logged is logged as a ``dismiss`` (``by: "write-failure"``, the error as feedback) by the next
call of that kind once the log is writable again, and that call is asked normally instead of
being refused "a … review is already open" for ever (docs/reviews.md, "Write failures")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from rig import Rig, run

from fsm_stage.errors import LogWriteError
from fsm_stage.log.events import Event, NewEvent, SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel


class FlakyLog(MemoryLog):
    """Refuses the next ``failures`` batches that hold a review answer."""

    failures = 0

    def append_many(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        if self.failures and any(s.type == "fsm/review/answer" for s in specs):
            self.failures -= 1
            raise LogWriteError("disk full (injected)")
        return super().append_many(specs, expect_last_seq=expect_last_seq)


def _approving() -> ScriptedReviewChannel:
    return ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])


@pytest.mark.parametrize("kind", ["stage", "plan"])
def test_the_next_call_after_a_failed_answer_write_is_asked_not_refused(tmp_path: Path, kind: str) -> None:
    log = FlakyLog(SessionHeader(id=f"w-{kind}", cwd=str(tmp_path)))
    review = _approving()
    rig = Rig(log, review)
    if kind == "plan":
        rig.enter_plan()
    rig.open_turn()
    rig.step()

    def call(n: int) -> object:
        c = rig.exit_call(call_id=f"c{n}") if kind == "plan" else rig.goto_call("implement", call_id=f"c{n}")
        return run(rig.call(c))  # type: ignore[arg-type]

    log.failures = 1
    first = call(1)
    assert first.is_error and "disk full" in first.text  # type: ignore[attr-defined]
    assert [r.kind for r in rig.reviews().open] == [kind]  # the request was logged, the answer not
    second = call(2)
    assert not second.is_error, second.text  # type: ignore[attr-defined]
    assert len(review.requests) == 2
    answers = [e.data for e in rig.session.events if e.type == "fsm/review/answer"]
    assert [(a["outcome"], a["by"]) for a in answers] == [("dismiss", "write-failure"),
                                                          ("approve", "channel")]
    assert "disk full" in answers[0]["feedback"]
    assert rig.reviews().open == ()


def test_while_the_log_stays_unwritable_the_review_is_kept_for_the_next_call(tmp_path: Path) -> None:
    log = FlakyLog(SessionHeader(id="w2", cwd=str(tmp_path)))
    rig = Rig(log, _approving())
    rig.open_turn()
    rig.step()
    log.failures = 2  # the answer and the first recovery attempt fail
    assert run(rig.call(rig.goto_call("implement", call_id="c1"))).is_error
    assert run(rig.call(rig.goto_call("implement", call_id="c2"))).is_error  # still not writable
    third = run(rig.call(rig.goto_call("implement", call_id="c3")))
    assert not third.is_error and rig.reviews().open == ()
