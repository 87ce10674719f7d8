"""Fleet throughput and wake-up latency: sessions/s and steps/s with 1, 2 and 4 ``fsm-stage
worker`` processes, and answer → resume latency.

    python bench/bench_fleet.py [--sessions 16] [--store postgresql://…] [--workers 1,2,4]

Each session runs the tests' deterministic model (``tests/fleet/fleet_model.py``): one task,
two reviewed stage changes (this script approves each as soon as it is listed), one host tool
call, four steps. Latency is read from the logs: an ``fsm/review/answer`` event's time to the
``fsm/fleet/claim`` after it (the resumed drive starting). Without ``--store`` each worker count
uses a fresh JSONL folder (SQLite DBOS); a PostgreSQL store is emptied of the bench's sessions
first. Prints one Markdown row per worker count.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "fleet"
sys.path[:0] = [str(ROOT), str(TESTS)]


def run(store: str, workers: int, sessions: int, tag: str) -> tuple[float, float, list[float]]:
    from fsm_stage.fleet import Store
    from fsm_stage.fleet.listing import list_sessions
    from fsm_stage.fleet.workflows import FleetClient
    from fsm_stage.log.events import SessionHeader

    path = os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    argv = [sys.executable, "-m", "fsm_stage", "worker", "--graph", str(TESTS / "fleet-graph.yaml"),
            "--store", store, "--model", "fleet_model:model", "--tools", "fleet_model:tools", "--slots", "4"]
    procs = [subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL) for _ in range(workers)]
    ids = [f"bench-{tag}-{i:03d}" for i in range(sessions)]
    try:
        time.sleep(2.0)  # workers up
        with FleetClient(Store(store)) as client:
            start = time.monotonic()
            for sid in ids:
                client.send_input(sid, "message", f"task: {sid}", create=SessionHeader(sid, cwd="/tmp"))
            while True:
                infos = [i for i in list_sessions(store) if i.id in set(ids)]
                for info in infos:
                    if info.state == "waiting-review" and info.review_id:
                        with contextlib.suppress(Exception):
                            client.answer(info.id, info.review_id, "approve")
                if sum(i.state == "complete" for i in infos) == len(ids):
                    break
                time.sleep(0.05)
            elapsed = time.monotonic() - start
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)
    steps, latencies = 0, []
    store_obj = Store(store)
    for sid in ids:
        log = store_obj.open(sid)
        events = list(log.events)
        log.close()
        steps += sum(e.type == "step/start" for e in events)
        for i, ev in enumerate(events):
            if ev.type == "fsm/review/answer":
                nxt = next((e for e in events[i + 1:] if e.type == "fsm/fleet/claim"), None)
                if nxt is not None:
                    latencies.append((nxt.time - ev.time) / 1000)
    return len(ids) / elapsed, steps / elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--store", default=None, help="a postgresql:// URL (default: fresh JSONL folders)")
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    print("| store | workers | sessions | sessions/s | steps/s | answer→resume p50 | max |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(w) for w in args.workers.split(",")):
        store = args.store or tempfile.mkdtemp(prefix="fleet-bench-")
        tag = f"{n}-{int(time.time())}"
        per_s, steps_s, lat = run(store, n, args.sessions, tag)
        kind = "postgres" if args.store else "jsonl+sqlite"
        p50 = statistics.median(lat) if lat else float("nan")
        print(f"| {kind} | {n} | {args.sessions} | {per_s:.2f} | {steps_s:.1f} | {p50:.3f} s | "
              f"{max(lat, default=float('nan')):.3f} s |", flush=True)


if __name__ == "__main__":
    main()
