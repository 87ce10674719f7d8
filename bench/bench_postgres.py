"""PostgreSQL store: a durable step and multi-worker throughput.

On one throwaway cluster (``tests/pg_testing.py``, ``TempCluster``, fsync on, Unix socket):

* **durable step**: ``PostgresLog.append`` of one ~1 KB event, then a second handle's
  ``refresh()`` reads it back — vs LangGraph's ``PostgresSaver.put`` of a checkpoint with the
  same payload, then ``get_tuple`` of it (the "durable step" of a LangGraph graph);
* **throughput**: 1, 4 and 8 worker processes appending to *one* session through
  ``open_log(url)`` (every lost race refreshes and retries): events/s for all workers together;
  and 1, 2, 4 and 8 workers each appending to a session of its own (row 14: the 2-worker
  speed-up).

``run(quick=False, smoke=False) -> dict`` (medians in seconds); ``python bench/bench_postgres.py``
prints it as JSON. Needs the server binaries and the ``postgres`` OS user (else ``run`` raises
``RuntimeError`` with the reason).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "tests"):  # the package, and pg_testing (a test helper outside the wheel)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from pg_testing import TempCluster, unavailable_reason  # noqa: E402

from fsm_stage.log.events import SessionHeader  # noqa: E402

PAYLOAD = {"text": "x" * 1000, "stage": "implement"}

WORKER = """
import sys, time
from fsm_stage.log import open_log
url, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open_log(url) as log:
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    for i in range(count):
        log.append("fsm/bench", {"worker": worker, "i": i})
print("done")
"""


def _durable_step(cluster: TempCluster, steps: int) -> list[float]:
    from fsm_stage.log import open_log

    url = cluster.url("bench-step")
    writer = open_log(url, create=SessionHeader("bench-step"))
    reader = open_log(url)
    times = []
    try:
        for i in range(steps):
            t0 = time.perf_counter()
            writer.append("fsm/step", {**PAYLOAD, "i": i})
            n = reader.refresh()
            times.append(time.perf_counter() - t0)
            assert n == 1 and reader.events[-1].data["i"] == i
    finally:
        writer.close()
        reader.close()
    return times


def _langgraph_step(cluster: TempCluster, steps: int) -> list[float] | str:
    try:
        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as err:
        return f"langgraph-checkpoint-postgres not installed ({err})"
    times = []
    with PostgresSaver.from_conn_string(cluster.dsn) as saver:
        saver.setup()
        config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        for i in range(steps):
            checkpoint = create_checkpoint(checkpoint, None, i)
            checkpoint["channel_values"] = {"messages": {**PAYLOAD, "i": i}}
            checkpoint["channel_versions"] = {"messages": i + 1}
            t0 = time.perf_counter()
            config = saver.put(config, checkpoint, {"source": "loop", "step": i, "parents": {}},
                               {"messages": i + 1})
            got = saver.get_tuple(config)
            times.append(time.perf_counter() - t0)
            assert got is not None and got.checkpoint["channel_values"]["messages"]["i"] == i
    return times


def _throughput(cluster: TempCluster, workers: int, per_worker: int, *,
                distinct: bool = False) -> dict[str, Any]:
    """Events/s of ``workers`` processes appending to one session (or each to its own:
    ``distinct``)."""
    from fsm_stage.log import open_log

    kind = "distinct" if distinct else "one"
    tag = uuid.uuid4().hex[:8]
    sessions = [f"bench-tp-{kind}-{workers}-{w}-{tag}" if distinct else f"bench-tp-{workers}-{tag}"
                for w in range(workers)]
    for session in sorted(set(sessions)):
        open_log(cluster.url(session), create=SessionHeader(session)).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, cluster.url(sessions[w]), str(w),
                               str(per_worker)], env=env, text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE) for w in range(workers)]
    for p in procs:  # every worker connected before the clock starts
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0 or out.strip() != "done":
            raise RuntimeError(f"a bench worker failed ({p.returncode})")
    elapsed = time.perf_counter() - t0
    total = 0
    for session in sorted(set(sessions)):
        with open_log(cluster.url(session)) as log:
            total += len(log)
    assert total == workers * per_worker
    return {"workers": workers, "sessions": kind, "events": total, "seconds": elapsed,
            "events_per_s": total / elapsed}


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Measure (see the module docs); ``quick``/``smoke`` shrink the sizes."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    steps = 20 if smoke else 200 if quick else 1000
    per_worker = 10 if smoke else 100 if quick else 250
    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    with TempCluster.start(fsync=True) as cluster:
        with connect(cluster.dsn) as conn:
            migrate(conn)
        ours = _durable_step(cluster, steps)
        theirs = _langgraph_step(cluster, steps)
        tp = [_throughput(cluster, w, per_worker) for w in (1, 4, 8)]
        distinct = [_throughput(cluster, w, per_worker, distinct=True) for w in (1, 2, 4, 8)]
    out: dict[str, Any] = {
        "steps": steps,
        "fsm_step_median_s": statistics.median(ours),
        "throughput": tp,
        "distinct": distinct,
        "distinct_scaling_2": distinct[1]["events_per_s"] / distinct[0]["events_per_s"],
    }
    if isinstance(theirs, str):
        out["langgraph_error"] = theirs
    else:
        out["langgraph_step_median_s"] = statistics.median(theirs)
        out["ratio_vs_langgraph"] = out["fsm_step_median_s"] / out["langgraph_step_median_s"]
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv), indent=2))
