"""Rows 10, 17, 18, 20 and 21: the PostgreSQL store's durable step, workers, statements, open and
reviewed step.

On one throwaway cluster (``tests/pg_testing.py``, ``TempCluster``, fsync on, Unix socket):

* **durable step** (row 10): ``PostgresLog.append`` of one ~1 KB event, then a second handle's
  ``refresh()`` reads it back — vs LangGraph's ``PostgresSaver.put`` of a checkpoint with the
  same payload, then ``get_tuple`` of it (the "durable step" of a LangGraph graph);
* **throughput**: 1, 4 and 8 worker processes appending to *one* session through
  ``open_log(url)`` (every lost race refreshes and retries): events/s for all workers together;
  and 1, 2, 4 and 8 workers each appending to a session of its own (row 17: the 2-worker
  speed-up; 2,000 events per worker in the full run). The clock runs from the moment every
  worker is connected until the last one has appended (interpreter exits are not timed). The
  1- and 2-worker runs come in ``ROUNDS`` rounds with the driver's floor (``BARE_WORKER``: the
  same one-row ``INSERT`` per event through plain psycopg), in an alternating order; each side's
  scaling is the median of its per-round ratios (4 and 8 workers: one run each).

* **statements per reviewed step** (row 18): the SQL statements ``PostgresLog`` sends for one
  reviewed transition (``goto_stage`` → scripted Approve → the boundary's ``pre_step`` flush,
  the shape of row 3) counted by wrapping the log's connection, split into the appends (the
  ``INSERT`` batches) and the rest (refreshes, row locks); medians over ``steps`` transitions.

* **reviewed step vs LangGraph** (row 21): one reviewed transition as in row 18 (the call
  logged, as the agent loop does) vs LangGraph's ``PostgresSaver.put`` + ``get_tuple`` of a
  checkpoint holding a 20-message conversation, one step of each in turn (medians).

* **open** (row 20): ``open_log`` of an existing session of 10,000 events vs one of 100
  (interleaved, medians): a checkpointed open reads only the rows after the newest checkpoint;
  also the Python memory a 10,000-event log holds once open (``tracemalloc``).

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
for _path in (REPO, REPO / "tests", REPO / "bench"):  # the package, pg_testing (a test helper), the benches
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
    print("done", flush=True)
"""

BARE_WORKER = """
import json, sys, time
import psycopg
dsn, session, worker, count = sys.argv[1], sys.argv[4], int(sys.argv[2]), int(sys.argv[3])
with psycopg.connect(dsn, autocommit=True) as conn:
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    for i in range(count):
        event = {"type": "fsm/bench", "seq": i, "time": int(time.time() * 1000),
                 "data": {"worker": worker, "i": i}, "ignorable": True}
        line = json.dumps(event, separators=(",", ":")) + "\\n"
        conn.execute("INSERT INTO fsm_events (session, seq, n, line) VALUES (%s, %s, 1, %s)",
                     (session, i, line))
    print("done", flush=True)
"""
"""The driver's floor for row 17: the same one-row autocommit ``INSERT`` per event through
psycopg, no fsm_stage (no writer checks, no listener lock, no checkpoint)."""

ROUNDS = 5
MESSAGES = 20
"""Row 21: the conversation length of LangGraph's checkpoint."""
"""Row 17's rounds (3 in ``--quick``, 1 in ``--smoke``): each runs ours and the driver's floor
with 1 and 2 workers, in an order that alternates from round to round (which side first, and 1
or 2 workers first); the scaling is the median of the rounds' own 2-to-1 ratios."""


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
            config, got, seconds = _put_get(saver, config, checkpoint, {**PAYLOAD, "i": i}, i)
            times.append(seconds)
            assert got is not None and got.checkpoint["channel_values"]["messages"]["i"] == i
    return times


def _put_get(saver: Any, config: Any, checkpoint: Any, messages: Any, i: int) -> tuple[Any, Any, float]:
    """One LangGraph durable step: ``put`` of ``checkpoint`` holding ``messages``, then
    ``get_tuple`` of it; ``(new config, what was read back, seconds)``."""
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": i + 1}
    t0 = time.perf_counter()
    config = saver.put(config, checkpoint, {"source": "loop", "step": i, "parents": {}}, {"messages": i + 1})
    got = saver.get_tuple(config)
    return config, got, time.perf_counter() - t0


class _Counting:
    """A psycopg connection that counts the statements sent through ``execute`` by kind."""

    def __init__(self, conn: Any, counts: dict[str, int]) -> None:
        self._conn, self._counts = conn, counts

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = str(query).lstrip().upper()
        kind = "insert" if text.startswith(("WITH INS AS (INSERT", "INSERT")) else "other"
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return self._conn.execute(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _ReviewedSession:
    """A session on ``PostgresLog`` running reviewed transitions one at a time, each through
    ``runtime.call_tool`` (logged, as the agent loop does) and the boundary's ``pre_step``."""

    def __init__(self, cluster: TempCluster, counts: dict[str, int]) -> None:
        import asyncio
        from unittest import mock

        import bench_transitions as bt

        import fsm_stage.log.postgres as pg
        from fsm_stage.handoff import MemoryHandoffStore
        from fsm_stage.log import open_log
        from fsm_stage.reviews import Answer, ScriptedReviewChannel
        from fsm_stage.runtime.agent import InboxAgent
        from fsm_stage.runtime.runtime import Runtime
        from fsm_stage.runtime.session import Session
        from fsm_stage.stage_switch import StageController

        real_connect = pg.connect

        def counting_connect(conninfo: str, **kw: Any) -> Any:
            return _Counting(real_connect(conninfo, **kw), counts)

        sid = f"bench-review-{uuid.uuid4().hex[:8]}"
        self.names = bt.stage_names(bt.STAGES)
        review = ScriptedReviewChannel()
        self.controller = StageController(bt.ring_graph_config(bt.STAGES), handoffs=MemoryHandoffStore())
        approve = self.controller.catalog.text("review.approve_label")
        review.default = lambda questions: [Answer(questions[0].id, (approve,))]
        self.runtime = Runtime(review=review, commands=False)
        self.runtime.attach(self.controller)
        with mock.patch.object(pg, "connect", counting_connect):
            self.log = open_log(cluster.url(sid), create=SessionHeader(sid, cwd="/workspace"))
        self.session = Session(self.log)
        self.agent = InboxAgent(self.session)
        self.session.append("turn/start", {"turn": 1})
        self.loop = asyncio.new_event_loop()
        self.done = 0

    def step(self) -> float:
        """One reviewed transition; its wall time in seconds."""
        import bench_transitions as bt

        from fsm_stage.runtime.tools import ToolCall

        k = self.done
        call = ToolCall.of("goto_stage", {"stage": self.names[(k + 1) % bt.STAGES],
                                          "handoff": bt.handoff_text(k)}, id=f"call_{k}")
        t0 = time.perf_counter()
        result = self.loop.run_until_complete(self.runtime.call_tool(self.agent, call))
        self.runtime.pre_step(self.agent, [], aborted=False)
        elapsed = time.perf_counter() - t0
        if result.is_error:
            raise RuntimeError(f"goto_stage failed in the benchmark: {result.text}")
        self.done += 1
        return elapsed

    def close(self) -> None:
        """Close the loop and the log; raise when a transition did not apply."""
        self.loop.close()
        self.log.close()
        if self.controller.current(self.session) != self.names[self.done % len(self.names)]:
            raise RuntimeError("the reviewed transitions did not all apply")


def statements_per_reviewed_step(cluster: TempCluster, steps: int) -> dict[str, Any]:
    """SQL statements of one reviewed transition on ``PostgresLog`` (see the module docs)."""
    counts: dict[str, int] = {}
    per_step: list[dict[str, int]] = []
    reviewed = _ReviewedSession(cluster, counts)
    try:
        for _ in range(steps):
            counts.clear()
            reviewed.step()
            per_step.append(dict(counts))
    finally:
        reviewed.close()
    inserts = statistics.median(c.get("insert", 0) for c in per_step)
    other = statistics.median(c.get("other", 0) for c in per_step)
    return {"steps": steps, "appends": inserts, "other": other, "total": inserts + other,
            "first_step": per_step[0]}


def conversation(n: int) -> list[dict[str, str]]:
    """``n`` chat messages of a short conversation (~200 characters each, roles alternating)."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "w" * 190}
            for i in range(n)]


def reviewed_vs_langgraph(cluster: TempCluster, steps: int, messages: int = MESSAGES) -> dict[str, Any]:
    """Row 21: one reviewed transition on ``PostgresLog`` (logged call, as the agent loop does)
    vs LangGraph's ``PostgresSaver.put`` + ``get_tuple`` of a checkpoint holding a ``messages``-long
    conversation, one step of each in turn (medians, seconds)."""
    try:
        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as err:
        return {"error": f"langgraph-checkpoint-postgres not installed ({err})"}
    ours: list[float] = []
    theirs: list[float] = []
    chat = conversation(messages)
    reviewed = _ReviewedSession(cluster, {})
    try:
        with PostgresSaver.from_conn_string(cluster.dsn) as saver:
            saver.setup()
            config: Any = {"configurable": {"thread_id": f"chat-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}
            checkpoint = empty_checkpoint()
            for i in range(steps):
                ours.append(reviewed.step())
                checkpoint = create_checkpoint(checkpoint, None, i)
                latest = {"role": "user", "content": f"step {i}"}
                config, got, seconds = _put_get(saver, config, checkpoint, [*chat[1:], latest], i)
                theirs.append(seconds)
                assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == messages
    finally:
        reviewed.close()
    ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
    return {"steps": steps, "messages": messages, "ours_s": ours_s, "langgraph_s": theirs_s,
            "ratio": ours_s / theirs_s}


def open_cost(cluster: TempCluster, sizes: tuple[int, int], repeat: int) -> dict[str, Any]:
    """``open_log`` of a session of ``sizes[1]`` events vs one of ``sizes[0]`` (both written
    by appends of 100-event batches of ~100-byte messages; medians of interleaved opens)."""
    import tracemalloc

    from fsm_stage.log import open_log
    from fsm_stage.log.events import NewEvent

    urls = []
    for n in sizes:
        sid = f"bench-open-{n}-{uuid.uuid4().hex[:8]}"
        urls.append(cluster.url(sid))
        with open_log(urls[-1], create=SessionHeader(sid, cwd="/workspace")) as log:
            for start in range(0, n, 100):
                text = "x" * 80
                log.append_many([NewEvent("user/message", {"role": "user", "content": f"message {i} {text}"},
                                          "append") for i in range(start, min(n, start + 100))])
    times: list[list[float]] = [[], []]
    for _ in range(repeat):
        for k, url in enumerate(urls):
            t0 = time.perf_counter()
            log = open_log(url)
            times[k].append(time.perf_counter() - t0)
            log.close()
    tracemalloc.start()
    log = open_log(urls[1])
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    note, in_memory = log.checkpoint_note, log.events.held
    log.close()
    small, big = statistics.median(times[0]), statistics.median(times[1])
    return {"sizes": list(sizes), "small_s": small, "big_s": big, "ratio": big / small,
            "big_bytes_held": held, "big_events_held": in_memory, "big_note": note, "repeat": repeat}


def _throughput(cluster: TempCluster, workers: int, per_worker: int, *,
                distinct: bool = False, bare: bool = False) -> dict[str, Any]:
    """Events/s of ``workers`` processes appending to one session (or each to its own:
    ``distinct``) through ``open_log`` (or, ``bare``, plain psycopg ``INSERT``s: ``BARE_WORKER``)."""
    from fsm_stage.log import open_log

    kind = ("bare" if bare else "distinct") if distinct else "one"
    tag = uuid.uuid4().hex[:8]
    sessions = [f"bench-tp-{kind}-{workers}-{w}-{tag}" if distinct else f"bench-tp-{workers}-{tag}"
                for w in range(workers)]
    for session in sorted(set(sessions)):
        open_log(cluster.url(session), create=SessionHeader(session)).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", BARE_WORKER if bare else WORKER,
                               cluster.dsn if bare else cluster.url(sessions[w]), str(w), str(per_worker),
                               sessions[w]], env=env, text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE) for w in range(workers)]
    for p in procs:  # every worker connected before the clock starts
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:  # the clock stops when the last worker has appended (not at its exit)
        assert p.stdout is not None
        if p.stdout.readline().strip() != "done":
            raise RuntimeError(f"a bench worker failed ({p.wait(900)})")
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.communicate(timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"a bench worker failed ({p.returncode})")
    total = 0
    for session in sorted(set(sessions)):
        with open_log(cluster.url(session)) as log:
            total += len(log)
    assert total == workers * per_worker
    return {"workers": workers, "sessions": kind, "events": total, "seconds": elapsed,
            "events_per_s": total / elapsed}


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median events/s among ``runs`` (the upper median of an even count)."""
    return sorted(runs, key=lambda x: x["events_per_s"])[len(runs) // 2]


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Measure (see the module docs); ``quick``/``smoke`` shrink the sizes."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    steps = 20 if smoke else 200 if quick else 1000
    per_worker = 10 if smoke else 100 if quick else 250
    per_worker_distinct = 10 if smoke else 1_000 if quick else 2_000  # long enough to time the scaling
    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    with TempCluster.start(fsync=True) as cluster:
        with connect(cluster.dsn) as conn:
            migrate(conn)
        statements = statements_per_reviewed_step(cluster, 5 if smoke else 20)
        versus = reviewed_vs_langgraph(cluster, 10 if smoke else 100 if quick else 400)
        opening = open_cost(cluster, (100, 1_000 if smoke else 10_000), 5 if smoke else 21)
        ours = _durable_step(cluster, steps)
        theirs = _langgraph_step(cluster, steps)
        tp = [_throughput(cluster, w, per_worker) for w in (1, 4, 8)]
        rounds: dict[tuple[bool, int], list[dict[str, Any]]] = {}
        for r in range(1 if smoke else 3 if quick else ROUNDS):
            for bare in ((False, True) if r % 2 == 0 else (True, False)):  # which side first alternates
                for w in ((1, 2) if r // 2 % 2 == 0 else (2, 1)):  # and 1 or 2 workers first
                    rounds.setdefault((bare, w), []).append(
                        _throughput(cluster, w, per_worker_distinct, distinct=True, bare=bare))
        distinct = [_median_run(rounds[False, 1]), _median_run(rounds[False, 2])]
        distinct += [_throughput(cluster, w, per_worker_distinct, distinct=True) for w in (4, 8)]
        floor = [_median_run(rounds[True, 1]), _median_run(rounds[True, 2])]
        ratios = {bare: [two["events_per_s"] / one["events_per_s"]
                         for one, two in zip(rounds[bare, 1], rounds[bare, 2], strict=True)]
                  for bare in (False, True)}
    out: dict[str, Any] = {
        "steps": steps,
        "fsm_step_median_s": statistics.median(ours),
        "throughput": tp,
        "distinct": distinct,
        "distinct_scaling_2": statistics.median(ratios[False]),
        "distinct_rounds": {f"{'bare' if bare else 'ours'}-{w}": [x["events_per_s"] for x in runs]
                            for (bare, w), runs in sorted(rounds.items())},
        "round_ratios": {"ours": ratios[False], "bare": ratios[True]},
        "bare_driver": floor,
        "bare_scaling_2": statistics.median(ratios[True]),
        "statements": statements,
        "open": opening,
        "reviewed_vs_langgraph": versus,
    }
    if isinstance(theirs, str):
        out["langgraph_error"] = theirs
    else:
        out["langgraph_step_median_s"] = statistics.median(theirs)
        out["ratio_vs_langgraph"] = out["fsm_step_median_s"] / out["langgraph_step_median_s"]
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv), indent=2))
