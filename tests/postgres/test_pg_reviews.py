"""Durable reviews on PostgreSQL (issue 14 done-when): 8 processes racing to answer one review
(``answer_review`` over ``open_log(url)``, and ``fsm-stage review URL --approve ID``) give
exactly one answer and, after the host's next step, exactly one ``redeemed applied:true``;
8 hosts stepping at once apply it once; a stale worker's flush conflicts, re-folds and applies
the approval exactly once; ``fsm-stage review`` lists and ``fsm-stage fork`` forks into and
out of PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fsm_stage.cli import main
from fsm_stage.log import PostgresLog, open_log
from fsm_stage.log.events import Event, NewEvent, SessionHeader
from fsm_stage.log.postgres import split_location
from fsm_stage.reviews import SuspendingReviewChannel, answer_review, open_reviews

REPO = Path(__file__).resolve().parents[2]
RIG_DIR = REPO / "tests" / "reviews"
if str(RIG_DIR) not in sys.path:
    sys.path.insert(0, str(RIG_DIR))
from rig import Rig  # noqa: E402

ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join([str(REPO), str(RIG_DIR), os.environ.get("PYTHONPATH", "")])}

ANSWER_WORKER = """
import sys
from fsm_stage.errors import ReviewAlreadyAnsweredError
from fsm_stage.log import open_log
from fsm_stage.reviews import answer_review
url, rid = sys.argv[1], sys.argv[2]
with open_log(url) as log:
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        answer = answer_review(log, rid, "approve")
    except ReviewAlreadyAnsweredError as err:
        print("refused", str(err).replace(chr(10), " "))
    else:
        print("won", answer.seq)
"""

STEP_WORKER = """
import sys
from fsm_stage.log import open_log
from fsm_stage.reviews import SuspendingReviewChannel
from rig import Rig
url = sys.argv[1]
with open_log(url) as log:
    rig = Rig(log, SuspendingReviewChannel())
    print("ready", flush=True)
    sys.stdin.readline()
    for m in rig.runtime.pre_step(rig.agent, []):
        rig.session.append_message(m)
    print("stepped", rig.stage.current(rig.session), rig.plan.logged(rig.session))
"""


def _suspended(url: str, cwd: Path, kind: str) -> str:
    """A session at ``url`` whose goto_stage / exit_plan_mode call waits for its review; returns
    the review id (the host process stopped: its log is closed)."""
    session = split_location(url)[1]
    assert session is not None
    with open_log(url, create=SessionHeader(session, cwd=str(cwd))) as log:
        return Rig(log, SuspendingReviewChannel()).suspend(kind)


def _race(argv: Sequence[str], n: int = 8) -> list[tuple[int, str, str]]:
    """Start ``n`` processes, let them all connect ("ready"), then release them at once."""
    procs = [subprocess.Popen(list(argv), env=ENV, text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(n)]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        assert line == "ready", (line, p.stderr.read() if p.stderr else "")
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs, strict=True)]


def _types(url: str) -> list[Event]:
    with open_log(url) as log:
        return list(log.events)


def _redeemed(events: Sequence[Event]) -> list[Any]:
    return [e.data for e in events if e.type == "fsm/review/redeemed"]


def _next_step(url: str) -> Rig:
    """The host's next step (a new process's view: a fresh handle) — returns the rig (log open)."""
    rig = Rig(open_log(url), SuspendingReviewChannel())
    rig.step(2)
    return rig


@pytest.mark.parametrize("kind", ["stage", "plan"])
def test_eight_processes_answering_via_the_api_one_answer_one_redemption(
    pg_url: Callable[..., str], tmp_path: Path, kind: str
) -> None:
    url = pg_url(f"api-{kind}")
    rid = _suspended(url, tmp_path, kind)
    results = _race([sys.executable, "-c", ANSWER_WORKER, url, rid])
    assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
    verdicts = sorted(out.split()[0] for _, out, _ in results)
    assert verdicts == ["refused"] * 7 + ["won"], results
    assert all("answered already" in out for _, out, _ in results if out.startswith("refused"))
    events = _types(url)
    assert [e.type for e in events].count("fsm/review/answer") == 1
    rig = _next_step(url)
    try:
        assert _redeemed(rig.session.events) == [{"id": rid, "applied": True, "reason": None}]
        if kind == "stage":
            assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
        else:
            assert rig.plan.logged(rig.session) is False
        rig.step(3)  # nothing left to apply
        assert len(_redeemed(rig.session.events)) == 1
    finally:
        rig.log.close()  # type: ignore[attr-defined]


def test_eight_processes_answering_via_the_cli_one_answer_one_redemption(
    pg_url: Callable[..., str], tmp_path: Path
) -> None:
    url = pg_url("cli")
    rid = _suspended(url, tmp_path, "stage")
    code = ("import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n"
            "from fsm_stage.cli import main\nmain(sys.argv[1:], prog_name='fsm-stage')")
    results = _race([sys.executable, "-c", code, "review", url, "--approve", rid, "--json"])
    winners = [json.loads(out.split("\n", 1)[0]) for c, out, _ in results if c == 0]
    losers = [err for c, _, err in results if c == 1]
    assert len(winners) == 1 and len(losers) == 7, results
    assert winners[0]["answer"]["outcome"] == "approve" and winners[0]["answer"]["by"] == "cli"
    assert winners[0]["path"] == url
    assert all("answered already" in err and err.count("\n") == 1 for err in losers)
    assert not any("Traceback" in err for err in losers)
    assert [e.type for e in _types(url)].count("fsm/review/answer") == 1
    rig = _next_step(url)
    try:
        assert _redeemed(rig.session.events) == [{"id": rid, "applied": True, "reason": None}]
        assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
    finally:
        rig.log.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["stage", "plan"])
def test_eight_hosts_stepping_at_once_apply_the_approval_once(
    pg_url: Callable[..., str], tmp_path: Path, kind: str
) -> None:
    url = pg_url(f"steps-{kind}")
    rid = _suspended(url, tmp_path, kind)
    with open_log(url) as log:
        answer_review(log, rid, "approve")
    results = _race([sys.executable, "-c", STEP_WORKER, url])
    assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
    expected = "implement" if kind == "stage" else "explore"
    assert all(out.split()[:2] == ["stepped", expected] for _, out, _ in results), results
    events = _types(url)
    assert _redeemed(events) == [{"id": rid, "applied": True, "reason": None}]
    transitions = [e for e in events if (e.type == "plan/mode" and e.data == {"active": False})
                   or (e.type == "user/message" and "Stage switched to" in json.dumps(e.data))]
    assert len(transitions) == 1


class _Hooked:
    """Run ``before()`` once, just before ``log``'s first append of a redemption batch (the
    moment a stale worker has folded the approval and is about to apply it)."""

    def __init__(self, log: PostgresLog, before: Callable[[], None]) -> None:
        self.original = log.append_many
        self.before: Callable[[], None] | None = before
        self.conflicts = 0

    def __call__(self, specs: Sequence[NewEvent], *, expect_last_seq: int | None = None) -> list[Event]:
        if self.before is not None and any(s.type == "fsm/review/redeemed" for s in specs):
            before, self.before = self.before, None
            before()
        try:
            return self.original(specs, expect_last_seq=expect_last_seq)
        except Exception as err:
            self.conflicts += type(err).__name__ == "AppendConflictError"
            raise


@pytest.mark.parametrize("kind", ["stage", "plan"])
@pytest.mark.parametrize("meanwhile", ["a-applies", "a-appends-other"])
def test_a_stale_worker_applies_a_reviewed_transition_exactly_once(
    pg_url: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, meanwhile: str
) -> None:
    """Workers A and B hold the same session. B folds the approval and is about to append the
    boundary flush when A (who answered the review) appends first: A's own flush (B then finds
    it redeemed and writes nothing) or an unrelated event (B re-folds, re-checks, applies)."""
    url = pg_url(f"stale-{kind}")
    rid = _suspended(url, tmp_path, kind)
    log_a, log_b = open_log(url), open_log(url)
    assert isinstance(log_b, PostgresLog)
    try:
        a = Rig(log_a, SuspendingReviewChannel())
        b = Rig(log_b, SuspendingReviewChannel())
        answer_review(a.session, rid, "approve")  # worker A answers; B has not read it yet
        assert len(log_b.events) < len(log_a.events)

        def a_acts() -> None:
            if meanwhile == "a-applies":
                a.runtime.pre_step(a.agent, [])
            else:
                a.session.append("fsm/probe", {"by": "a"}, ignorable=True)

        hook = _Hooked(log_b, a_acts)
        monkeypatch.setattr(log_b, "append_many", hook)
        b.runtime.pre_step(b.agent, [])  # B's boundary flush
        assert hook.before is None and hook.conflicts == 1  # B's conditional append lost once
        a.session.refresh()
        b.session.refresh()
        for rig in (a, b):
            events = rig.session.events
            assert _redeemed(events) == [{"id": rid, "applied": True, "reason": None}]
            if kind == "stage":
                assert rig.stage.current(rig.session) == "implement" and rig.stage_records() == 1
            else:
                assert [e.data["active"] for e in events if e.type == "plan/mode"] == [True, False]
        redeemed = next(e for e in log_a.events if e.type == "fsm/review/redeemed")
        probe = [e.seq for e in log_a.events if e.type == "fsm/probe"]
        if meanwhile == "a-applies":
            assert probe == []
        else:  # B applied it after re-folding past A's event
            assert len(probe) == 1 and probe[0] < redeemed.seq
        assert not open_reviews(log_a)
    finally:
        log_a.close()
        log_b.close()


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_review_lists_and_answers_a_postgres_session(pg_url: Callable[..., str], tmp_path: Path) -> None:
    url = pg_url("list")
    rid = _suspended(url, tmp_path, "stage")
    code, out, err = cli("review", url, "--json")
    assert code == 0, err
    listing = json.loads(out)
    assert listing["path"] == url and [r["id"] for r in listing["open"]] == [rid]
    assert listing["open"][0]["payload"] == "# Handoff\nwhat was done"
    code, out, err = cli("review", url)
    assert code == 0 and rid in out and "explore -> implement" in out
    code, out, err = cli("review", url, "--keep", rid, "--feedback", "not yet")
    assert code == 0 and f"review {rid}: keep" in out, err
    code, _, err = cli("review", url, "--approve", rid)
    assert code == 1 and "answered already" in err and err.count("\n") == 1
    assert cli("review", url)[1] == "no open reviews\n"


def test_review_of_a_missing_postgres_session_is_one_line(pg_url: Callable[..., str]) -> None:
    url = pg_url("missing")
    code, _, err = cli("review", url)
    assert code == 1 and "no such session log" in err and err.count("\n") == 1


def test_fork_into_postgres_and_back_out(pg_url: Callable[..., str], tmp_path: Path) -> None:
    url = pg_url("parent")
    rid = _suspended(url, tmp_path, "stage")
    parent = _types(url)
    at = next(e.seq for e in parent if e.type == "fsm/review/request")
    child_url = pg_url("child")
    code, out, err = cli("fork", url, "--at", str(at), "-o", child_url, "--json")
    assert code == 0, err
    report = json.loads(out)
    child_id = split_location(child_url)[1]
    assert report["id"] == child_id and report["path"] == child_url and report["seed_length"] == at + 1
    with open_log(child_url) as child:
        assert child.header.parent_session == split_location(url)[1]
        assert [e.type for e in child.events[at + 1:]] == ["session/end-seed", "fsm/review/redeemed"]
        assert child.events[-1].data == {"id": rid, "applied": False, "reason": "forked"}
        assert [e.data for e in child.events[: at + 1]] == [e.data for e in parent[: at + 1]]
        assert not open_reviews(child)
    code, _, err = cli("fork", url, "--at", str(at), "-o", child_url)
    assert code == 1 and "exists already" in err and err.count("\n") == 1
    code, _, err = cli("fork", url, "--at", "0", "-o", url)
    assert code == 1 and "is the source log" in err
    # out of PostgreSQL into a file, and a file into PostgreSQL without a session (a new id)
    out_file = tmp_path / "fork.jsonl"
    code, out, err = cli("fork", child_url, "--at", str(at + 1), "-o", str(out_file), "--json")
    assert code == 0, err
    with open_log(out_file) as grandchild:
        assert grandchild.header.parent_session == child_id
        assert not open_reviews(grandchild)
    dsn = split_location(child_url)[0]
    code, out, err = cli("fork", str(out_file), "--at", "0", "-o", dsn, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["path"].endswith(f"session={report['id']}")
    with open_log(report["path"]) as great:
        assert great.header.id == report["id"] and len(great.events) == 2
