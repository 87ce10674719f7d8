"""Bench: the review inbox's queue page over 1,000 open reviews across 1,000 sessions.

``python bench/bench_inbox.py [--sessions N] [--jsonl-only]`` writes N sessions, each a copy of
one suspended goto_stage review under a new session id, to a temp JSONL folder and to a
throwaway PostgreSQL cluster (``tests/pg_testing.py``; ``bench_postgres`` starts one the same
way), then times ``GET /`` through Starlette's TestClient: the first request (cold: every
session read and folded) and the median of the next five (warm: nothing changed). Row 19 of
``bench/run.py`` is the PostgreSQL side (target: under 1 s, cold and warm); the JSONL side is in
its details. ``run(quick=False, smoke=False) -> dict`` (seconds); ``python bench/bench_inbox.py``
prints one Markdown row per store.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "tests", ROOT / "tests" / "inbox", ROOT / "tests" / "reviews"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

WARM = 5


def _seed(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """One session with an open stage review, as ``(header, event lines)``."""
    from inbox_fixtures import stage_session

    stage_session(folder, "seed")
    header, *rest = (folder / "seed.jsonl").read_text().splitlines()
    (folder / "seed.jsonl").unlink()
    return json.loads(header), rest


def _jsonl_sessions(folder: Path, seed: tuple[dict[str, Any], list[str]], n: int) -> None:
    header, lines = seed
    body = "".join(line + "\n" for line in lines)
    for i in range(n):
        (folder / f"s{i:05d}.jsonl").write_text(json.dumps({**header, "id": f"s{i:05d}"}) + "\n" + body)


def _pg_sessions(dsn: str, seed: tuple[dict[str, Any], list[str]], n: int) -> None:
    """``n`` copies of the seed session in ``fsm_sessions`` / ``fsm_events`` (one row per event)."""
    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    header, lines = seed
    with connect(dsn) as conn:
        migrate(conn)
        with conn.transaction(), conn.cursor() as cur:
            ids = [f"s{i:05d}" for i in range(n)]
            cur.executemany("INSERT INTO fsm_sessions (session, header) VALUES (%s, %s)",
                            [(sid, json.dumps({**header, "id": sid}, separators=(",", ":")) + "\n")
                             for sid in ids])
            with cur.copy("COPY fsm_events (session, seq, n, line) FROM STDIN") as copy:
                for sid in ids:
                    for seq, line in enumerate(lines):
                        copy.write_row((sid, seq, 1, line))


def _time_queue(location: str | Path, reviewers: Path, n: int) -> dict[str, float]:
    """``{cold_s, warm_s}`` of ``GET /`` on the inbox at ``location`` (asserts ``n`` rows)."""
    from inbox_fixtures import TOKENS
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    client = TestClient(create_app(location, reviewers_file=reviewers, secret_key="k" * 40))
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]},
                follow_redirects=False)  # the queue is first read below, cold
    t0 = time.perf_counter()
    first = client.get("/")
    cold = time.perf_counter() - t0
    assert first.status_code == 200 and first.text.count('class="review-row"') == n, first.text[:300]
    warm = []
    for _ in range(WARM):
        t0 = time.perf_counter()
        client.get("/")
        warm.append(time.perf_counter() - t0)
    return {"cold_s": cold, "warm_s": statistics.median(warm)}


def run(quick: bool = False, smoke: bool = False, *, postgres: bool = True,
        sessions: int | None = None) -> dict[str, Any]:
    """Measure (module docstring): ``{sessions, jsonl: {cold_s, warm_s}, postgres: {…} | error}``.
    ``quick``/``smoke`` shrink the sizes; ``postgres=False`` skips the cluster."""
    from inbox_fixtures import write_reviewers

    n = sessions or (20 if smoke else 1000)
    out: dict[str, Any] = {"sessions": n}
    with tempfile.TemporaryDirectory(prefix="fsm-bench-inbox-") as tmp:
        base = Path(tmp)
        logs = base / "logs"
        logs.mkdir()
        reviewers = write_reviewers(base / "r.yaml")
        seed = _seed(logs)
        _jsonl_sessions(logs, seed, n)
        out["jsonl"] = _time_queue(logs, reviewers, n)
        if not postgres:
            return out
        from pg_testing import TempCluster, unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            out["postgres_error"] = reason
            return out
        with TempCluster.start() as cluster:
            _pg_sessions(cluster.dsn, seed, n)
            out["postgres"] = _time_queue(cluster.dsn, reviewers, n)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--jsonl-only", action="store_true")
    args = parser.parse_args()
    r = run(sessions=args.sessions, postgres=not args.jsonl_only)
    n = r["sessions"]
    for store in ("jsonl", "postgres"):
        if store in r:
            x = r[store]
            print(f"| inbox queue page, {n} open reviews in {n} {store} sessions | < 1 s | "
                  f"cold {x['cold_s'] * 1000:.0f} ms, warm median {x['warm_s'] * 1000:.0f} ms |")
    if "postgres_error" in r:
        print(f"PostgreSQL: {r['postgres_error']}")


if __name__ == "__main__":
    main()
