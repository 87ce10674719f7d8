"""A SIGKILL at every event boundary of a reviewed transition (issue 11, done-when): the
resumed session neither loses an approval nor applies one twice, and an answered review is
never asked again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rig import Rig, run

from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel

ROOT = Path(__file__).resolve().parents[2]
RIG = Path(__file__).resolve().parent / "rig.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _host(log: Path, cwd: Path, kill_after: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RIG), "full", str(log), str(cwd), str(kill_after)],
                          capture_output=True, text=True, env=ENV, timeout=60)


def _total(tmp_path: Path) -> int:
    done = _host(tmp_path / "whole.jsonl", tmp_path, 10**6)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_sigkill_at_every_event_boundary_neither_loses_nor_doubles_the_approval(tmp_path: Path) -> None:
    total = _total(tmp_path)
    assert total >= 8
    for n in range(1, total + 1):
        cwd = tmp_path / f"k{n}"
        cwd.mkdir()
        log = cwd / "s.jsonl"
        killed = _host(log, cwd, n)
        assert killed.returncode == -signal.SIGKILL, (n, killed.stderr)
        with JsonlLog(log) as reopened:
            review = ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])
            rig = Rig(reopened, review)
            answered_before = bool(rig.reviews().answered)
            types = [(e.type, (e.data or {}).get("callId")) for e in rig.session.events]
            if not rig.session.is_turn_open:
                rig.open_turn()
            if (TOOL_CALL, "call_goto") not in types and rig.stage.current(rig.session) == "explore":
                run(rig.call(rig.goto_call("implement")))  # the model calls again
            elif (TOOL_CALL, "call_goto") in types and not any(t == TOOL_RESULT for t, _ in types):
                run(rig.resume(rig.goto_call("implement")))  # the driver resumes the open call
            rig.step(9)
            state = rig.reviews()
            assert rig.stage.current(rig.session) == "implement", n
            assert rig.stage_records() == 1, n  # applied exactly once overall
            assert sum(r.applied for r in state.redeemed.values()) == 1, n
            assert state.open == () and state.approved == (), n
            if answered_before:
                assert review.requests == [], n  # an answered review is never asked again


def test_the_uninterrupted_run_applies_once_in_atomic_batches(tmp_path: Path) -> None:
    total = _total(tmp_path)
    with JsonlLog(tmp_path / "whole.jsonl") as log:
        rig = Rig(log, None)
        assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
        # tool/call + fsm/graph + the request share one append, and so do the switch + its
        # redemption
        assert total == len(log.events) - 3


def test_a_batch_torn_after_its_notice_is_not_applied_twice(tmp_path: Path) -> None:
    """Power lost inside the one write of notice + redemption: the reopen keeps the notice line
    and cuts the torn redemption; the next step closes the approval instead of switching again."""
    from fsm_stage.log.events import SessionHeader

    path = tmp_path / "t.jsonl"
    review = ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])
    rig = Rig(JsonlLog(path, header=SessionHeader(id="t", cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()
    assert not run(rig.call(rig.goto_call("implement"))).is_error
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
    rig.close()
    data = path.read_bytes()
    at = data.index(b'"fsm/review/redeemed"')
    path.write_bytes(data[:at])  # torn inside the redemption line, the batch's last

    with JsonlLog(path) as log:
        again = Rig(log, review)
        assert again.stage.current(again.session) == "implement"
        again.step(3)
        assert again.stage.current(again.session) == "implement" and again.stage_records() == 1
        (red,) = again.reviews().redeemed.values()
        assert (red.applied, red.reason) == (False, "already-current")
        again.close()
