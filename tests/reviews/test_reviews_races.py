"""Single use and races (issue 11 item 3): one open review per session and kind; of racing
answers exactly one is logged (threads on one session, processes on one JsonlLog)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rig import Rig, run

from fsm_stage.errors import ReviewAlreadyAnsweredError
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel, SuspendingReviewChannel, answer_review
from fsm_stage.runtime.tools import ToolResult

ROOT = Path(__file__).resolve().parents[2]


def _approving() -> ScriptedReviewChannel:
    return ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))])


def test_100_concurrent_goto_stage_calls_ask_once_approve_once_refuse_99(tmp_path: Path) -> None:
    review = _approving()
    rig = Rig(MemoryLog(SessionHeader(id="s-100", cwd=str(tmp_path))), review)
    rig.open_turn()
    rig.step()

    async def all_at_once() -> list[ToolResult]:
        calls = [rig.call(rig.goto_call("implement", call_id=f"call_{i}")) for i in range(100)]
        return list(await asyncio.gather(*calls))

    results = run(all_at_once())
    approved = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert len(review.requests) == 1 and len(approved) == 1 and len(refused) == 99
    assert all("already" in r.text for r in refused)
    assert rig.types() == ["fsm/graph", "fsm/review/request", "fsm/review/answer"]
    rig.step(2)
    rig.step(3)
    assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
    assert rig.types()[-1] == "fsm/review/redeemed"


def test_100_concurrent_exit_plan_mode_calls_ask_once_approve_once_refuse_99(tmp_path: Path) -> None:
    review = _approving()
    rig = Rig(MemoryLog(SessionHeader(id="p-100", cwd=str(tmp_path))), review)
    rig.enter_plan()
    rig.open_turn()
    rig.step()

    async def all_at_once() -> list[ToolResult]:
        return list(await asyncio.gather(*[rig.call(rig.exit_call(call_id=f"c{i}")) for i in range(100)]))

    results = run(all_at_once())
    assert len(review.requests) == 1
    assert sorted(r.is_error for r in results) == [False] + [True] * 99
    rig.step(2)
    rig.step(3)
    plan_events = [e.data["active"] for e in rig.session.events if e.type == "plan/mode"]
    assert plan_events == [True, False]


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Wait for a CLI process; its exit code, standard output and standard error."""
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def _suspended(log: MemoryLog | JsonlLog, kind: str) -> tuple[Rig, str]:
    rig = Rig(log, SuspendingReviewChannel())
    return rig, rig.suspend(kind)


@pytest.mark.parametrize("kind", ["stage", "plan"])
def test_two_threads_answering_one_review_exactly_one_wins(tmp_path: Path, kind: str) -> None:
    rig, rid = _suspended(MemoryLog(SessionHeader(id=f"t-{kind}", cwd=str(tmp_path))), kind)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def answer(outcome: str) -> None:
        barrier.wait()
        try:
            answer_review(rig.session, rid, outcome, feedback="no" if outcome == "keep" else None)
            outcomes.append("won")
        except ReviewAlreadyAnsweredError:
            outcomes.append("lost")

    threads = [threading.Thread(target=answer, args=(o,)) for o in ("approve", "keep")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(outcomes) == ["lost", "won"]
    assert rig.types().count("fsm/review/answer") == 1


@pytest.mark.parametrize("kind", ["stage", "plan"])
def test_eight_processes_approving_one_review_via_the_cli_exactly_one_wins(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=SessionHeader(id=f"x-{kind}", cwd=str(tmp_path)))
    _, rid = _suspended(log, kind)
    log.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "fsm_stage", "review", str(path), "--approve", rid, "--json"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(8)]
    results = [_finish(p) for p in procs]
    winners = [json.loads(out) for code, out, _ in results if code == 0]
    losers = [err for code, _, err in results if code == 1]
    assert len(winners) == 1 and len(losers) == 7, results
    assert winners[0]["answer"]["outcome"] == "approve" and winners[0]["answer"]["by"] == "cli"
    assert all("answered already" in err and err.count("\n") == 1 for err in losers)
    with JsonlLog(path) as reopened:
        assert sum(e.type == "fsm/review/answer" for e in reopened.events) == 1
