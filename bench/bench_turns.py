"""Rows 14-16: a long turn, a live session mid-turn, and the host import.

* **long turn** (row 14): one step after another inside ONE turn, each step one tool call run
  through ``StagedSession.run_tool`` (begin_step → record_reply → run_tool → end_step) on an
  in-memory log; the cost of the steps after ``late`` calls already in the turn vs after
  ``early`` calls, timed alternately on two sessions brought to those points. Independent of
  the turn's length is a ratio near 1 (the open turn used to be re-folded per call: quadratic).
  Each session grows by one call per timed step (the points are ``early``…``early + sample - 1``
  and ``late``…``late + sample - 1`` calls). The steps take the history's own messages
  (``begin_step(copy_messages=False)``, read-only); the same steps with the default deep
  copies, whose cost grows with the history, are timed beside them.
* **mid-turn session** (row 15): bytes per live session once a turn is open (``start_turn`` +
  ``begin_step`` logged its ``request/header``) with a realistic header: a ~2 KB system text and
  8 tool specs shared by every session (the same runtime), distinct session ids, ``MemoryLog``.
  ``tracemalloc`` live bytes over ``sessions`` sessions, per session; the RSS of a fresh process
  holding 10,000 of them (full run) is given beside it.
* **host import** (row 16): wall time of a fresh ``python -c "from fsm_stage import
  load_config, open_log, open_session"`` (what a host composing a session through
  ``open_session`` imports) vs ``python -c pass``; the older host import (``Runtime``,
  ``StageController``, ``StagedSession``, ``load_config``, ``open_log``) is timed beside it.

``run(quick=False, smoke=False) -> dict``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

HOST_IMPORT = "from fsm_stage import load_config, open_log, open_session"
CLASSES_IMPORT = "from fsm_stage import Runtime, StageController, StagedSession, load_config, open_log"
SYSTEM_TEXT = ("You are a careful software engineer working in stages. " * 40)[:2000]


def _tools() -> list[Any]:
    from fsm_stage.runtime.tools import ToolOutput, ToolSpec

    class Tool:
        def __init__(self, i: int) -> None:
            props = {f"arg{k}": {"type": "string", "description": f"Argument {k} of tool {i}, explained."}
                     for k in range(6)}
            self.spec = ToolSpec(f"tool_{i}", f"Tool number {i}: does one thing well. " * 3,
                                 {"type": "object", "properties": props, "required": ["arg0"]})

        async def execute(self, args: Any, agent: Any, signal: Any = None) -> Any:
            return ToolOutput(None, "ok")

    return [Tool(i) for i in range(8)]


def _runtime() -> Any:
    from fsm_stage.runtime.assembly import SystemSection
    from fsm_stage.runtime.runtime import Runtime

    rt = Runtime()
    for tool in _tools():
        rt.add_tool(tool)
    rt.add_section(SystemSection("intro", 10, lambda a: SYSTEM_TEXT))
    return rt


def _driver(rt: Any, sid: str) -> Any:
    from fsm_stage.driver import StagedSession
    from fsm_stage.log.events import MemoryLog, SessionHeader
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.session import Session

    return StagedSession(rt, InboxAgent(Session(MemoryLog(SessionHeader(sid)))),
                         config={"provider": "p", "model": "m"})


def long_turn(early: int, late: int, sample: int, *, copy_messages: bool = False) -> dict[str, Any]:
    """Seconds per step (one ``run_tool`` each) after ``early`` and after ``late`` calls in one
    turn: two sessions of one runtime, each brought to its point untimed, then ``sample`` steps
    of each timed one by one, alternating (a burst of the machine lands on both sides, not on
    one); the medians, the means beside them. ``copy_messages`` is ``begin_step``'s: False (the
    row) hands the history's own messages, read-only, as ``Loop(copy_messages=False)`` and the
    simulator do; True (the default for hosts) adds a deep copy of the history to every step."""
    from fsm_stage.runtime.tools import ToolCall

    rt = _runtime()
    loop = asyncio.new_event_loop()
    drivers = {early: _driver(rt, "long-turn-early"), late: _driver(rt, "long-turn-late")}
    done = dict.fromkeys(drivers, 0)

    def step(point: int) -> float:
        driver, k = drivers[point], done[point]
        t0 = time.perf_counter()
        driver.begin_step(copy_messages=copy_messages)
        call = ToolCall.of("tool_0", {"arg0": str(k)}, id=f"c{k}")
        driver.record_reply("", [call])
        loop.run_until_complete(driver.run_tool(call))
        driver.end_step()
        done[point] = k + 1
        return time.perf_counter() - t0

    for point, driver in drivers.items():
        driver.start_turn()
        while done[point] < point:
            step(point)
    steps: dict[int, list[float]] = {early: [], late: []}
    for _ in range(sample):
        for point in (early, late):
            steps[point].append(step(point))
    loop.close()
    early_s, late_s = statistics.median(steps[early]), statistics.median(steps[late])
    return {"early_calls": early, "late_calls": late, "sample": sample, "early_s": early_s,
            "late_s": late_s, "ratio": late_s / early_s, "early_mean_s": statistics.mean(steps[early]),
            "late_mean_s": statistics.mean(steps[late])}


def midturn_bytes(sessions: int) -> dict[str, Any]:
    """tracemalloc bytes per live session mid-turn (see the module docs)."""
    import tracemalloc

    rt = _runtime()
    warm = _driver(rt, "warm")
    warm.start_turn()
    warm.begin_step(copy_messages=False)
    keep: list[Any] = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(sessions):
            d = _driver(rt, f"session-{i:06d}")
            d.start_turn()
            d.begin_step(copy_messages=False)
            keep.append(d)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    per = (after - before - keep.__sizeof__()) / sessions
    idle = _driver(rt, "idle")
    return {"sessions": sessions, "midturn_b": per, "header_events": sum(
        1 for e in keep[0].session.events if e.type == "request/header"), "idle_example": repr(idle)[:0]}


RSS_CHILD = """
import sys, resource
sys.path.insert(0, sys.argv[2])
import bench_turns
rt = bench_turns._runtime()
keep = []
for i in range(int(sys.argv[1])):
    d = bench_turns._driver(rt, f"session-{i:06d}")
    d.start_turn()
    d.begin_step(copy_messages=False)
    keep.append(d)
try:  # this process's own peak: ru_maxrss keeps the peak of the process that started it (Linux)
    with open("/proc/self/status") as fh:
        print(next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:")))
except (OSError, StopIteration):
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def midturn_rss(sessions: int) -> dict[str, Any]:
    """Peak RSS of a fresh process holding ``sessions`` mid-turn sessions vs one holding none
    (``VmHWM`` of each child: ``ru_maxrss`` would report the bench process's own peak when that
    is larger, since Linux carries it over into the processes it starts)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    here = str(Path(__file__).resolve().parent)
    out = {}
    for n in (0, sessions):
        proc = subprocess.run([sys.executable, "-c", RSS_CHILD, str(n), here], env=env, capture_output=True,
                              text=True, check=True)
        out[n] = int(proc.stdout.strip().splitlines()[-1])
    return {"sessions": sessions, "rss_b": out[sessions], "empty_rss_b": out[0],
            "added_b": out[sessions] - out[0]}


def host_import(repeat: int) -> dict[str, Any]:
    """Wall time of the host import in fresh processes vs ``python -c pass`` (interleaved medians)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    ours: list[float] = []
    bare: list[float] = []
    classes: list[float] = []
    for _ in range(repeat):
        for code, into in ((HOST_IMPORT, ours), ("pass", bare), (CLASSES_IMPORT, classes)):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            into.append(time.perf_counter() - t0)
    return {"import_s": statistics.median(ours), "pass_s": statistics.median(bare), "repeat": repeat,
            "ratio": statistics.median(ours) / statistics.median(bare),
            "classes_import_s": statistics.median(classes)}


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Rows 14-16 (see the module docs); ``quick``/``smoke`` shrink the sizes."""
    early, late, sample = (20, 100, 10) if smoke else (100, 500, 50) if quick else (100, 2000, 100)
    out: dict[str, Any] = {
        "long_turn": long_turn(early, late, sample),
        "long_turn_copies": long_turn(early, late, max(10, sample // 4), copy_messages=True),
        "midturn": midturn_bytes(50 if smoke else 500 if quick else 2000),
        "host_import": host_import(2 if smoke else 7 if quick else 15),
    }
    if not smoke:
        out["midturn_rss"] = midturn_rss(2000 if quick else 10_000)
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv), indent=2))
