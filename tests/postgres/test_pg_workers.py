"""Done-when: many worker processes share one session log through ``open_log(url)``."""

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
from fsm_stage.log import open_log
url, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open_log(url) as log:
    for i in range(count):
        log.append("fsm/work", {"worker": worker, "i": i})
print("ok", worker)
"""


def test_eight_workers_append_200_events_each_to_one_session(pg_url: Callable[..., str]) -> None:
    url = pg_url("workers")
    session = split_location(url)[1]
    assert session is not None
    open_log(url, create=SessionHeader(session)).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, url, str(w), "200"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(8)
    ]
    results = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    assert [(code, out.strip()) for code, out, _ in results] == [(0, f"ok {w}") for w in range(8)], [
        err for _, _, err in results
    ]
    with open_log(url) as log:
        events = list(log.events)
    assert len(events) == 1600
    assert [e.seq for e in events] == list(range(1600))
    pairs = {(e.data["worker"], e.data["i"]) for e in events}
    assert pairs == {(w, i) for w in range(8) for i in range(200)}
    for w in range(8):  # each worker's own events stay in its order
        mine = [e.data["i"] for e in events if e.data["worker"] == w]
        assert mine == list(range(200))
