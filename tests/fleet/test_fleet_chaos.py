"""The fleet under chaos: several ``fsm-stage worker`` processes drive several dozen sessions
while workers are SIGKILLed (and restarted, as a supervisor would), crashes are injected
between appends, inside model calls and after a host tool's effect, and (PostgreSQL) the
server restarts once. Every session must end as the uninterrupted run does: complete, its one
user input consumed once, each approved transition entered once, one result per dispatched
call, every task's effect done. The embedded default (JSONL folder + SQLite DBOS) runs the same
scenario smaller, without a server."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fsm_stage.log.events import SessionHeader

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GRAPH = HERE / "fleet-graph.yaml"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

if importlib.util.find_spec("dbos") is None:
    if os.environ.get("CI") not in (None, "", "0"):
        pytest.fail("dbos is missing in CI (pip install 'fsm_stage[test]')", pytrace=False)
    pytest.skip("the fleet needs DBOS: pip install 'fsm_stage[fleet]'", allow_module_level=True)


class Fleet:
    """Worker processes on one store, restarted when they die."""

    def __init__(self, store: str, tmp: Path, workers: int, crash: float) -> None:
        self.store, self.tmp, self.crash = store, tmp, crash
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0
        for _ in range(workers):
            self.spawn()

    def spawn(self) -> None:
        path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path,
               "FLEET_EFFECTS": str(self.tmp / "effects.jsonl"), "FLEET_CRASH": str(self.crash)}
        self.started += 1
        err = open(self.tmp / f"worker-{self.started}.err", "wb")  # noqa: SIM115 - the child owns it
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "fsm_stage", "worker", "--graph", str(GRAPH), "--store", self.store,
             "--model", "fleet_model:model", "--tools", "fleet_model:tools", "--dead-after", "2",
             "--poll", "2", "--slots", "4",
             "--max-interrupted", "12"], env=env, stdout=subprocess.DEVNULL, stderr=err))

    def supervise(self) -> int:
        """Replace dead workers; returns how many died since the last call."""
        dead = [p for p in self.procs if p.poll() is not None]
        for p in dead:
            self.procs.remove(p)
            self.spawn()
        return len(dead)

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL one live worker and reap it, so two kills in one round hit two workers (a
        second choice among the unreaped would count one death for two kills)."""
        live = [p for p in self.procs if p.poll() is None]
        if not live:
            self.supervise()
            live = list(self.procs)
        victim = rng.choice(live)
        with contextlib.suppress(ProcessLookupError):
            victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=20)

    def stop(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def _summary(log: Any) -> dict[str, Any]:
    from test_fleet_drive import _summary as summary

    return summary(log)


def _scenario(store: str, tmp: Path, *, sessions: int, workers: int, kills: int, crash: float,
              restart: Any = None, budget: float = 150.0) -> None:
    from fsm_stage.errors import FsmStageError
    from fsm_stage.fleet import Store
    from fsm_stage.fleet.listing import list_sessions
    from fsm_stage.fleet.workflows import FleetClient

    rng = random.Random(25)
    fleet = Fleet(store, tmp, workers, crash)
    ids = [f"chaos-{i:02d}" for i in range(sessions)]
    deaths = 0
    try:
        with FleetClient(Store(store)) as client:
            for sid in ids:
                client.send_input(sid, "message", f"task: {sid}", input_id=f"in-{sid}",
                                  create=SessionHeader(sid, cwd=str(tmp)))
            start = time.monotonic()
            kill_at = sorted(rng.uniform(2.0, 14.0) for _ in range(kills))
            restart_at = 6.0 if restart is not None else None
            done: set[str] = set()
            while time.monotonic() - start < budget:
                now = time.monotonic() - start
                while kill_at and now >= kill_at[0]:
                    kill_at.pop(0)
                    fleet.kill_one(rng)
                if restart_at is not None and now >= restart_at:
                    restart_at = None
                    restart()
                deaths += fleet.supervise()
                try:
                    infos = list_sessions(store)
                    for info in infos:
                        if info.state == "waiting-review" and info.review_id:
                            with contextlib.suppress(FsmStageError):
                                client.answer(info.id, info.review_id, "approve")
                    done = {i.id for i in infos if i.state == "complete"}
                except FsmStageError:
                    pass  # the server restarting: the next round retries
                if done >= set(ids) and not kill_at and restart_at is None:
                    break
                time.sleep(0.3)
            missing = sorted(set(ids) - done)
            if missing:
                states = {i.id: (i.state, i.events) for i in list_sessions(store) if i.id in missing}
                prefixes = [f"fsm-stage:{m}:" for m in missing]
                workflows = [(w.workflow_id, w.status, w.executor_id) for w in client.client.list_workflows(
                    workflow_id_prefix=prefixes, load_input=False, load_output=False)]
                raise AssertionError(f"not complete after {budget}s: {states} {workflows} " + _tails(tmp))
    finally:
        fleet.stop()
    _check_logs(Store(store), ids, tmp)
    assert deaths >= kills  # the chaos really happened


def _tails(tmp: Path) -> str:
    return " | ".join(p.read_text(errors="replace")[-600:] for p in sorted(tmp.glob("worker-*.err")))


def _check_logs(store: Any, ids: list[str], tmp: Path) -> None:
    for sid in ids:
        log = store.open(sid)
        try:
            summary = _summary(log)
        finally:
            log.close()
        assert summary["state"] == "complete", sid
        assert summary["users"] == [f"in-{sid}"], sid  # no input lost, none taken twice
        assert summary["entered"] == ["plan", "build", "done"], sid  # each approval applied once
        # two approvals used, once each; reviews the chaos left unused closed unapplied (e.g. a
        # call closed by crash repair, then asked again), which changes nothing
        assert summary["redeemed"] == 2, (sid, summary["closed"])
    effects = [json.loads(line) for line in (tmp / "effects.jsonl").read_text().splitlines()]
    keys = [e["key"] for e in effects]
    assert len(keys) == len(set(keys)), "one tool call ran twice under the same idempotency key"
    assert {e["task"] for e in effects} == set(ids)


def test_chaos_on_the_embedded_default(tmp_path: Path) -> None:
    _scenario(str(tmp_path / "sessions"), tmp_path, sessions=8, workers=2, kills=2, crash=0.01)


def test_chaos_on_postgresql(tmp_path: Path) -> None:
    from pg_fixture import require_server
    from pg_testing import TempCluster, unavailable_reason

    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    require_server(unavailable_reason())
    cluster = TempCluster.start()
    try:
        with connect(cluster.dsn) as conn:
            migrate(conn)

        def restart() -> None:
            cluster._run(str(cluster.bindir / "pg_ctl"), "-D", str(cluster.data), "-l",
                         str(cluster.folder / "server.log"), "-m", "fast", "-w", "restart")

        _scenario(cluster.dsn, tmp_path, sessions=30, workers=3, kills=3, crash=0.003, restart=restart,
                  budget=float(os.environ.get("FLEET_CHAOS_BUDGET", "150")))
    finally:
        cluster.stop()
