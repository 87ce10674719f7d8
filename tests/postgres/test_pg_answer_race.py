"""8 processes race to answer one review through conditional appends: exactly one answer lands.

This is the store half of "8 processes racing to answer one review: exactly one redemption":
each worker folds the log, refuses when the review is answered, else appends its answer with
``expect_last_seq`` (a lost race refreshes and re-checks). The runtime's ``answer_review``
follows the same protocol on any store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fsm_stage.log import open_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.postgres import split_location

REPO = Path(__file__).resolve().parents[2]

WORKER = """
import sys
from fsm_stage.errors import AppendConflictError
from fsm_stage.log import open_log
url, worker = sys.argv[1], sys.argv[2]
with open_log(url) as log:
    print("ready", flush=True)
    sys.stdin.readline()
    conflicts = 0
    while True:
        if any(e.type == "fsm/review/answer" and e.data["id"] == "rv_1" for e in log.events):
            print("refused", conflicts)
            break
        try:
            log.append("fsm/review/answer", {"id": "rv_1", "outcome": "approve", "by": worker},
                       expect_last_seq=log.last_seq)
        except AppendConflictError:
            conflicts += 1  # the log caught up: fold again
            continue
        print("won", conflicts)
        break
"""


def test_eight_processes_answering_one_review_give_exactly_one_answer(pg_url: Callable[..., str]) -> None:
    url = pg_url("race")
    session = split_location(url)[1]
    assert session is not None
    with open_log(url, create=SessionHeader(session)) as log:
        log.append("fsm/review/request", {"id": "rv_1", "kind": "stage", "target": "implement"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, f"w{w}"], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for w in range(8)]
    for p in procs:  # all connected and folded before any answers
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    verdicts = sorted(out.split()[0] for out, _ in outs)
    assert verdicts == ["refused"] * 7 + ["won"]
    with open_log(url) as log:
        answers = [e for e in log.events if e.type == "fsm/review/answer"]
    assert len(answers) == 1 and [e.seq for e in log.events] == [0, 1]
    winner = next(f"w{w}" for w, (out, _) in enumerate(outs) if out.startswith("won"))
    assert answers[0].data["by"] == winner
