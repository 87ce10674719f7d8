"""8 processes resuming one approved tool call on a shared PostgreSQL session run the tool once:
the tool review's redemption is a conditional append; the 7 losers re-fold, find the winner's
``redeemed applied: true`` and refuse (docs/reviews.md, "Redemption")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm_stage.errors import ReviewPending
from fsm_stage.log import open_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.postgres import split_location
from fsm_stage.reviews import SuspendingReviewChannel, answer_review

REPO = Path(__file__).resolve().parents[2]
RIG_DIR = REPO / "tests" / "reviews"
if str(RIG_DIR) not in sys.path:
    sys.path.insert(0, str(RIG_DIR))
from tool_rig import ToolRig, runs  # noqa: E402

ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join([str(REPO), str(RIG_DIR), os.environ.get("PYTHONPATH", "")])}


def test_eight_processes_resuming_one_approved_tool_call_run_it_once(
    pg_url: Callable[..., str], tmp_path: Path
) -> None:
    url = pg_url("tool-race")
    counter = tmp_path / "runs"
    session = split_location(url)[1]
    assert session is not None
    with open_log(url, create=SessionHeader(session, cwd=str(tmp_path))) as log:
        rig = ToolRig(log, SuspendingReviewChannel(), counter)
        rig.to_verify()
        with pytest.raises(ReviewPending) as pending:
            asyncio.run(rig.runtime.call_tool(rig.agent, rig.call()))
        answer_review(log, pending.value.review_id, "approve")
    argv = [sys.executable, str(RIG_DIR / "tool_rig.py"), url, str(counter)]
    pipe = subprocess.PIPE
    procs = [subprocess.Popen(argv, env=ENV, text=True, stdin=pipe, stdout=pipe, stderr=pipe)
             for _ in range(8)]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        assert line == "ready", (line, p.stderr.read() if p.stderr else "")
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    verdicts = sorted(out.split()[0] for out, _ in outs)
    assert verdicts == ["error"] * 7 + ["ran"], outs
    assert runs(counter) == 1
    with open_log(url) as log:
        redeemed = [e.data for e in log.events if e.type == "fsm/review/redeemed"]
    assert redeemed == [{"id": pending.value.review_id, "applied": True, "reason": None}]
