"""Answers given through the inbox wake the fleet (issue 25 follow-up): ``fleet_waker`` finds
the fleet of a store (its embedded SQLite DBOS database, or ``FSM_STAGE_FLEET_DBOS``), and an
answer through ``fsm-stage inbox approve-all`` (or the web inbox's ``on_answer``) starts the
session's run workflow and sends the wake-up on the review's topic with the review id as
idempotency key, as ``fsm-stage answer`` does — so a worker waiting with a long ``--poll``
resumes at once instead of at its next poll."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "inbox"))

if importlib.util.find_spec("dbos") is None:
    if os.environ.get("CI") not in (None, "", "0"):
        pytest.fail("dbos is missing in CI (pip install 'fsm_stage[test]')", pytrace=False)
    pytest.skip("the fleet needs DBOS: pip install 'fsm_stage[fleet]'", allow_module_level=True)

from fleet_procs import stop  # noqa: E402
from inbox_fixtures import stage_session  # noqa: E402

from fsm_stage.cli import main  # noqa: E402
from fsm_stage.fleet import Store  # noqa: E402
from fsm_stage.fleet.wake import ENV, fleet_waker  # noqa: E402
from fsm_stage.inbox.queue import approve_all  # noqa: E402
from fsm_stage.log.dsh import read_log  # noqa: E402
from fsm_stage.log.events import SessionHeader  # noqa: E402


def _dbos_rows(folder: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``(workflows [(id, status, queue)], notifications [(destination, topic, message id)])``."""
    with contextlib.closing(sqlite3.connect(folder / ".fleet" / "dbos.sqlite")) as db:
        flows = db.execute("SELECT workflow_uuid, status, queue_name FROM workflow_status "
                           "ORDER BY workflow_uuid").fetchall()
        notes = db.execute("SELECT destination_uuid, topic, message_uuid FROM notifications "
                           "ORDER BY destination_uuid").fetchall()
    return flows, notes


def _fleet_database(folder: Path) -> None:
    """The embedded fleet's DBOS database, as a worker or ``fsm-stage send`` leaves it."""
    from fsm_stage.fleet.workflows import FleetClient

    with FleetClient(Store(folder)) as client:
        assert client.client is not None


def test_no_fleet_no_waker_and_the_env_can_turn_it_off(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    stage_session(tmp_path, "s1")
    assert fleet_waker(tmp_path) is None
    assert not (tmp_path / ".fleet").exists()  # looking never creates a database
    _fleet_database(tmp_path)
    waker = fleet_waker(tmp_path)
    assert waker is not None and waker.dbos_url.endswith("dbos.sqlite")
    monkeypatch.setenv(ENV, "off")
    assert fleet_waker(tmp_path) is None
    monkeypatch.delenv(ENV)
    other = tmp_path / "other"
    other.mkdir()
    assert fleet_waker(other) is None
    # a process that runs the fleet's workflows on that store (configure) wakes through its database
    from fsm_stage.config import load_config
    from fsm_stage.fleet import workflows

    graph = load_config(HERE / "fleet-graph.yaml")
    app = workflows.FleetApp(Store(other), graph, lambda: None)  # type: ignore[arg-type,return-value]
    monkeypatch.setattr(workflows, "_APP", app)
    here = fleet_waker(other)
    assert here is not None and here.dbos_url == app.store.dbos_url
    monkeypatch.setenv(ENV, "sqlite:///elsewhere.sqlite")
    named = fleet_waker(tmp_path)
    assert named is not None and named.dbos_url == "sqlite:///elsewhere.sqlite"


def test_an_inbox_answer_starts_and_wakes_the_session_once(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    rids = {sid: stage_session(tmp_path, sid) for sid in ("s1", "s2")}
    _fleet_database(tmp_path)
    waker = fleet_waker(tmp_path)
    assert waker is not None
    try:
        done = {d.session_id: d for d in approve_all(tmp_path, on_answer=waker)}
    finally:
        waker.close()
    assert all(d.result == "answered" and d.wake is None for d in done.values()), done
    flows, notes = _dbos_rows(tmp_path)
    assert ("fsm-stage:s1:0", "ENQUEUED", "fsm-stage-fleet") in flows
    assert ("fsm-stage:s1:0", f"fsm:review:{rids['s1']}", f"{rids['s1']}::fsm-stage:s1:0") in notes
    # the same wake-up again (a retried answer path): the idempotency key keeps one message
    again = fleet_waker(tmp_path)
    assert again is not None
    assert again("s1", rids["s1"]) is None
    again.close()
    assert len([n for n in _dbos_rows(tmp_path)[1] if n[0] == "fsm-stage:s1:0"]) == 1


def test_a_waker_connects_ahead_once_and_says_why_it_cannot(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``Waker.connect()`` (what ``inbox serve`` runs at start, so the first wake-up does not
    wait for DBOS to load) makes the client once; an unreachable database is one line, not a raise."""
    from fsm_stage.fleet.wake import Waker

    monkeypatch.delenv(ENV, raising=False)
    rid = stage_session(tmp_path, "s1")
    _fleet_database(tmp_path)
    waker = fleet_waker(tmp_path)
    assert waker is not None
    try:
        assert waker.connect() is None
        client = waker._client
        assert waker.connect() is None and waker._client is client
        assert waker("s1", rid) is None
    finally:
        waker.close()
    broken = Waker(Store(tmp_path), "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    assert broken.connect() is None  # the client is made; the database is first used by a wake-up
    why = broken("s1", rid)
    assert why is not None and "\n" not in why


def test_a_failed_wake_up_never_undoes_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    rid = stage_session(tmp_path, "s1")

    def broken(session_id: str, review_id: str) -> str | None:
        raise RuntimeError("the DBOS database is gone")

    (done,) = approve_all(tmp_path, on_answer=broken)
    assert done.result == "answered" and done.review_id == rid
    assert done.wake is not None and "gone" in done.wake and "next poll" in done.message
    (answer,) = [e.data for e in read_log(tmp_path / "s1.jsonl").events if e.type == "fsm/review/answer"]
    assert answer["id"] == rid and answer["outcome"] == "approve"


def _worker(folder: Path, tmp: Path) -> subprocess.Popen[bytes]:
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "FLEET_EFFECTS": str(tmp / "effects.jsonl"), "FLEET_CRASH": "0"}
    env.pop(ENV, None)
    err = open(tmp / "worker.err", "wb")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        [sys.executable, "-m", "fsm_stage", "worker", "--graph", str(HERE / "fleet-graph.yaml"),
         "--store", str(folder), "--model", "fleet_model:model", "--tools", "fleet_model:tools",
         "--poll", "3600", "--slots", "2"], env=env, stdout=subprocess.DEVNULL, stderr=err)


def _wait_state(folder: Path, sid: str, state: str, *, not_review: str | None = None,
                budget: float = 120.0) -> Any:
    from fsm_stage.fleet.listing import list_sessions

    end = time.monotonic() + budget
    while time.monotonic() < end:
        for info in list_sessions(folder):
            if info.id == sid and info.state == state \
                    and (not_review is None or info.review_id != not_review):
                return info
        time.sleep(0.2)
    raise AssertionError(f"{sid} never reached {state} within {budget} s: {list_sessions(folder)}")


def test_a_worker_waiting_an_hour_resumes_on_an_inbox_approval(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``--poll 3600`` only the wake-up can resume the session within the test's budget:
    the first approval through ``inbox approve-all``, the second through ``fsm-stage review``."""
    from fsm_stage.fleet.workflows import FleetClient

    monkeypatch.delenv(ENV, raising=False)
    folder = tmp_path / "sessions"
    proc = _worker(folder, tmp_path)
    try:
        with FleetClient(Store(folder)) as client:
            client.send_input("w1", "message", "task: 7", input_id="in-w1",
                              create=SessionHeader("w1", cwd=str(tmp_path)))
        first = _wait_state(folder, "w1", "waiting-review")
        out = CliRunner().invoke(main, ["inbox", "approve-all", str(folder), "--yes", "--json"])
        assert out.exit_code == 0, out.output
        (result,) = json.loads(out.output)["results"]
        assert result["id"] == first.review_id and result["wake"] is None
        second = _wait_state(folder, "w1", "waiting-review", not_review=first.review_id)
        # the same through `fsm-stage review LOG --approve ID` on the session's own log
        out = CliRunner().invoke(main, ["review", str(folder / "w1.jsonl"), "--approve", second.review_id])
        assert out.exit_code == 0 and "waking the fleet session failed" not in out.output, out.output
        _wait_state(folder, "w1", "complete")
        assert second.review_id != first.review_id
    finally:
        stop(proc)


def test_send_new_records_the_requester_and_working_folder(tmp_path: Path) -> None:
    """``fsm-stage send --new --requester NAME --cwd DIR`` writes them in the new session's
    header, so a review's ``not_requester`` can be satisfied (without a requester it never
    can); both are usage errors without ``--new``, and a requester must be a reviewer name."""
    from fsm_stage.log.jsonl import JsonlLog

    folder, work = tmp_path / "sessions", tmp_path / "work"
    folder.mkdir()
    work.mkdir()
    out = CliRunner().invoke(main, ["send", str(folder), "r1", "task: 1", "--new", "--requester", "bob",
                                    "--cwd", str(work)])
    assert out.exit_code == 0, out.output
    with JsonlLog(folder / "r1.jsonl") as log:
        assert log.header.cwd == str(work) and dict(log.header.extra)["requester"] == "bob"
    for args in (["--requester", "bob"], ["--cwd", str(work)]):
        refused = CliRunner().invoke(main, ["send", str(folder), "r1", "more", *args])
        assert refused.exit_code == 2 and "go with --new" in refused.output
    # on a session that exists, asked-for values that differ are refused, nothing logged; equal ones pass
    before = (folder / "r1.jsonl").read_bytes()
    for args in (["--requester", "alice"], ["--cwd", str(tmp_path)]):
        clash = CliRunner().invoke(main, ["send", str(folder), "r1", "again", "--new", *args])
        assert clash.exit_code == 1 and "exists already" in clash.output, clash.output
        assert (folder / "r1.jsonl").read_bytes() == before
    spelled = str(folder / ".." / "work")  # the same folder, spelled otherwise
    same = CliRunner().invoke(main, ["send", str(folder), "r1", "again", "--new", "--requester", "bob",
                                     "--cwd", spelled])
    assert same.exit_code == 0, same.output
    bad = CliRunner().invoke(main, ["send", str(folder), "r2", "x", "--new", "--requester", "bob smith"])
    assert bad.exit_code == 2 and "is not a reviewer name" in bad.output
    assert not (folder / "r2.jsonl").exists()
