"""Rows 11 and 12: the review fold stays linear and a reviewed transition's cost does not grow
with the session.

11. ``fsm-stage state --json`` (in process) on a JSONL log holding 8n reviewed transitions vs one
    holding n (1,000 / 8,000 in the full run): a linear fold gives ~8x, the old dictionary copy
    per review event gave ~64x. Target ≤ 10x.
12. One reviewed transition (``goto_stage`` → scripted ``Approve`` → boundary flush, full shape,
    in-memory log and handoff store) measured over a window of transitions after 100 vs after
    10,000 earlier ones in the same session. Target: the ratio within ±20% (0.8–1.2).

Usage: ``python bench/bench_reviews.py [--quick]``; ``run(quick, smoke)`` returns the numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def _review_log(path: Path, n: int) -> None:
    """A JSONL log of ``n`` reviewed transitions: per transition a turn, the review request, its
    approval, the stage notice and its redemption (the events a real session writes)."""
    from fsm_stage.log.events import NewEvent, SessionHeader
    from fsm_stage.log.jsonl import JsonlLog

    names = ("explore", "implement", "verify")
    with JsonlLog(path, header=SessionHeader(id="bench-reviews", cwd=str(path.parent))) as log:
        for k in range(n):
            rid, target = f"rv_{k:08d}", names[(k + 1) % 3]
            log.append_many([
                NewEvent("turn/start", {"turn": k + 1}),
                NewEvent("fsm/review/request", {
                    "id": rid, "callId": f"call_{k}", "kind": "stage", "from": names[k % 3], "target": target,
                    "options": ["Approve", "Keep current stage"], "shape": "light", "handoffPath": None,
                    "payloadSha256": f"{k:064x}", "turn": k + 1, "step": 1}, ignorable=True),
                NewEvent("fsm/review/answer", {"id": rid, "outcome": "approve", "option": "Approve",
                                               "shape": "light", "feedback": None, "by": "channel"},
                         ignorable=True),
                NewEvent("user/message", {"id": f"m{k}", "role": "user",
                                          "content": [{"type": "text", "text": f"Stage {target}."}],
                                          "source": {"kind": "stage-switch", "form": "notice",
                                                     "summary": f"Current stage: {target}"}}, "append"),
                NewEvent("fsm/review/redeemed", {"id": rid, "applied": True, "reason": None}, ignorable=True),
                NewEvent("turn/end", {"turn": k + 1, "reason": {"kind": "completed"}}),
            ])


def _state_s(path: Path, repeat: int) -> float:
    """Median seconds of ``fsm-stage state --json PATH`` run in this process."""
    from fsm_stage.cli import main

    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(["state", "--json", str(path)], standalone_mode=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def state_scaling(n: int, repeat: int) -> dict[str, Any]:
    """Row 11: ``state`` on 8n vs n reviews."""
    with tempfile.TemporaryDirectory(prefix="fsm-bench-reviews-") as tmp:
        small, big = Path(tmp) / "small.jsonl", Path(tmp) / "big.jsonl"
        _review_log(small, n)
        _review_log(big, 8 * n)
        small_s, big_s = _state_s(small, repeat), _state_s(big, repeat)
    return {"reviews_small": n, "reviews_big": 8 * n, "state_small_s": small_s, "state_big_s": big_s,
            "state_ratio": big_s / small_s}


def _transition_session() -> tuple[Any, Any, Any, list[str]]:
    """A runtime with a stage switch over an in-memory log (full transitions, scripted Approve)."""
    from bench_transitions import ring_graph_config, stage_names

    from fsm_stage.handoff import MemoryHandoffStore
    from fsm_stage.log.events import MemoryLog, SessionHeader
    from fsm_stage.reviews import Answer, ScriptedReviewChannel
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session
    from fsm_stage.stage_switch import StageController

    controller = StageController(ring_graph_config(10), handoffs=MemoryHandoffStore())
    approve = controller.catalog.text("review.approve_label")
    review = ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, (approve,))])
    runtime = Runtime(review=review, commands=False)
    runtime.attach(controller)
    session = Session(MemoryLog(SessionHeader(id="bench-length", cwd="/workspace")))
    session.append("turn/start", {"turn": 1})
    return runtime, controller, InboxAgent(session), stage_names(10)


def _transitions(runtime: Any, controller: Any, agent: Any, names: list[str], start: int,
                 count: int) -> float:
    """Seconds per reviewed transition for ``count`` transitions numbered from ``start``."""
    from bench_transitions import handoff_text

    from fsm_stage.runtime.tools import ToolCall

    async def body() -> None:
        for k in range(start, start + count):
            current = controller.current(agent.session)
            target = names[(names.index(current) + 1) % len(names)]
            call = ToolCall.of("goto_stage", {"stage": target, "handoff": handoff_text(k)}, id=f"call_{k}")
            result = await runtime.call_tool(agent, call, log=False)
            if result.is_error:
                raise RuntimeError(f"goto_stage failed in the benchmark: {result.text}")
            runtime.pre_step(agent, [], aborted=False)

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        asyncio.run(body())
        return (time.perf_counter() - t0) / count
    finally:
        if was:
            gc.enable()


def length_independence(short: int, long: int, window: int, repeat: int) -> dict[str, Any]:
    """Row 12: a window of reviewed transitions after ``short`` vs after ``long`` earlier ones.

    Both sessions are grown first (the growing doubles as the warm-up);
    each round then times one window on each, interleaved, so load changes hit both alike."""
    short_rt = _transition_session()
    long_rt = _transition_session()
    _transitions(*short_rt, 0, short)  # grows each session; its last window is the warm-up
    _transitions(*long_rt, 0, long)
    short_t: list[float] = []
    long_t: list[float] = []
    done_short, done_long = short, long
    for _ in range(repeat):
        short_t.append(_transitions(*short_rt, done_short, window))
        long_t.append(_transitions(*long_rt, done_long, window))
        done_short += window
        done_long += window
    ratios = [b / a for a, b in zip(short_t, long_t, strict=True)]
    return {"short": short, "long": long, "window": window, "short_s": statistics.median(short_t),
            "long_s": statistics.median(long_t), "length_ratio": statistics.median(ratios),
            "events_long": len(long_rt[2].session.events)}


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Rows 11 and 12 (module docstring); ``smoke``: tiny sizes, a harness check only."""
    if smoke:
        n, short, long, window, repeat = 20, 10, 60, 10, 1
    elif quick:
        n, short, long, window, repeat = 250, 100, 2_000, 100, 3
    else:
        n, short, long, window, repeat = 1_000, 100, 10_000, 200, 5
    out: dict[str, Any] = {"rows": [11, 12]}
    out.update(state_scaling(n, repeat))
    out.update(length_independence(short, long, window, repeat))
    return out


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv)
    for key, value in result.items():
        print(f"{key}: {value}")
