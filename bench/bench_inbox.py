"""Bench: the review inbox's queue page over 1,000 open reviews across 1,000 JSONL sessions.

``python bench/bench_inbox.py [--sessions N]`` writes N session logs (copies of one suspended
goto_stage review under new session ids) to a temp folder, then times ``GET /`` through
Starlette's TestClient: the first (cold: every log read and folded) and the median of the next
five (warm: logs unchanged, folds cached). Target: under 1 s warm. Prints one Markdown row.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "inbox"), str(ROOT / "tests" / "reviews")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    n = parser.parse_args().sessions
    from inbox_fixtures import TOKENS, stage_session, write_reviewers
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        logs = base / "logs"
        logs.mkdir()
        stage_session(logs, "seed")
        header, *rest = (logs / "seed.jsonl").read_text().splitlines(keepends=True)
        for i in range(1, n):
            head = json.loads(header)
            head["id"] = f"s{i:05d}"
            (logs / f"s{i:05d}.jsonl").write_text(json.dumps(head) + "\n" + "".join(rest))
        reviewers = write_reviewers(base / "r.yaml")
        client = TestClient(create_app(logs, reviewers_file=reviewers, secret_key="k" * 40))
        page = client.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        client.post("/login", data={"csrf": csrf, "name": "alice", "token": TOKENS["alice"]})
        t0 = time.perf_counter()
        first = client.get("/")
        cold = time.perf_counter() - t0
        assert first.text.count('class="review-row"') == n
        warm = []
        for _ in range(5):
            t0 = time.perf_counter()
            client.get("/")
            warm.append(time.perf_counter() - t0)
    print(f"| inbox queue page, {n} open reviews in {n} JSONL sessions | < 1 s warm | "
          f"cold {cold * 1000:.0f} ms, warm median {statistics.median(warm) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
