"""Rows 3 and 6: what one stage transition costs, fsm_stage against the bare libraries.

All sides walk the same generated graph: ``n`` stages ``s0 … s{n-1}``, each with ``fanout``
edges to the next ``fanout`` stages of a ring, trigger ``goto:<target>`` (fsm_stage's trigger
name), one condition per edge. Every iteration moves one session one stage forward and makes
the move durable with one in-memory log append, so the baselines pay for exactly one guard and
one append:

* ``raw``      one shared ``transitions.Machine`` (``auto_transitions=False``, ``send_event=True``),
               an unattached cursor fired via ``machine.events[t].trigger(cursor)``, then one
               ``MemoryLog.append`` (DESIGN.md §5; transitions-notes §2b).
* ``psm``      python-statemachine: one instance, ``sm.send("goto_sN")`` with ``cond``, then one append.
* ``compiled`` fsm_stage's ``CompiledGraph.fire`` with the durable append as its ``commit``
               (guards ``eligible`` + ``approved``; the machine layer alone).
* ``reviewed`` the whole reviewed model transition through ``StageController`` attached to a
               ``Runtime``: the ``goto_stage`` tool call, the review exchange answered
               ``Approve`` by a ``ScriptedReviewChannel``, and the boundary flush at the next
               accepted pre-step, on an in-memory log (``make_reviewed``: full shape by
               default; also light, and with the tool call/result logged).

Row 6 runs the durable sides in a temporary folder: ``raw_durable`` (the raw trigger, then one
fsynced JSON line: ``make_raw_durable``), the reviewed transition on a ``JsonlLog`` (every append
fsynced) with a ``LocalHandoffStore``, and LangGraph's ``SqliteSaver.put`` beside them
(``make_sqlite_saver``), interleaved with row 3's sides.

Times are medians over ``repeat`` runs of ``n`` iterations (setup excluded), per iteration.
Ratios, not absolute times, are the point: the machine is shared and noisy.

Usage: ``python bench/bench_transitions.py [--quick | --smoke]`` prints the numbers; ``run(quick, smoke)``
returns them.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transitions import Machine

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig
from fsm_stage.log.events import MemoryLog, SessionHeader

STAGES = 100
FANOUT = 5
STAGE_EVENT = "fsm/stage"  # the baselines' stand-in for fsm_stage's durable stage record

Loop = Callable[[], None]


# --- shared helpers (bench_memory imports these) ------------------------------------------


def stage_names(n: int) -> list[str]:
    """``["s0", …, "s{n-1}"]``."""
    return [f"s{i}" for i in range(n)]


def ring_edges(n: int, fanout: int = FANOUT) -> list[tuple[str, str]]:
    """``(source, target)`` pairs: every stage goes to the next ``fanout`` stages of the ring."""
    names = stage_names(n)
    return [(names[i], names[(i + k) % n]) for i in range(n) for k in range(1, fanout + 1)]


def ring_graph_config(n: int = STAGES, fanout: int = FANOUT, *, min_handoff_tokens: float | None = None,
                      guards: tuple[str, ...] = ()) -> GraphConfig:
    """The ring as an fsm_stage ``GraphConfig`` (``n`` stages, ``n * fanout`` edges)."""
    names = stage_names(n)
    stages = tuple(
        StageConfig(
            name=names[i],
            instruction=f"Work on part {i} of the task.",
            targets=tuple(EdgeConfig(names[(i + k) % n], guards) for k in range(1, fanout + 1)),
        )
        for i in range(n)
    )
    return GraphConfig(name=f"ring-{n}", stages=stages, section="Current stage: << stage_current >>.",
                       min_handoff_tokens=min_handoff_tokens)


def header(session_id: str = "bench") -> SessionHeader:
    """A minimal session header for in-memory logs."""
    return SessionHeader(id=session_id, created_at=0, cwd="/tmp")


class Cursor:
    """The smallest transitions model: one slot holding the state (never ``add_model``-ed)."""

    __slots__ = ("state",)

    def __init__(self, state: str) -> None:
        self.state = state


def _accept(event_data: Any) -> bool:
    return True


def raw_machine(n: int = STAGES, fanout: int = FANOUT) -> Machine:
    """One shared ``transitions.Machine`` over the ring, built the way DESIGN.md §5 says."""
    return Machine(
        model=None,
        states=stage_names(n),
        transitions=[{"trigger": f"goto:{dst}", "source": src, "dest": dst, "conditions": [_accept]}
                     for src, dst in ring_edges(n, fanout)],
        initial="s0",
        auto_transitions=False,
        send_event=True,
        queued=False,
    )


def statemachine_class(n: int = STAGES, fanout: int = FANOUT) -> type:
    """A python-statemachine ``StateMachine`` subclass for the ring (events ``goto_sN``, one ``cond``)."""
    from statemachine import State, StateMachine

    names = stage_names(n)
    states = [State(name, initial=(i == 0)) for i, name in enumerate(names)]
    attrs: dict[str, Any] = dict(zip(names, states, strict=True))
    by_target: dict[int, Any] = {}
    for i in range(n):
        for k in range(1, fanout + 1):
            j = (i + k) % n
            t = states[i].to(states[j], cond="ok")
            by_target[j] = t if j not in by_target else by_target[j] | t
    for j, tl in by_target.items():
        attrs[f"goto_{names[j]}"] = tl
    attrs["ok"] = lambda self: True
    return type("RingMachine", (StateMachine,), attrs)


def machine_build_s(n: int, repeat: int) -> float:
    """Median seconds to construct ``raw_machine(n)`` (the bare-library floor of a compile)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        raw_machine(n)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(make: Callable[[int], Loop], n: int, repeat: int) -> list[float]:
    """Seconds per iteration for each of ``repeat`` runs of ``make(n)()`` (setup not timed).

    The garbage collector is paused while timing, as ``timeit`` does, on every side alike.
    """
    out: list[float] = []
    for _ in range(repeat):
        loop = make(n)
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            t0 = time.perf_counter()
            loop()
            dt = time.perf_counter() - t0
        finally:
            if was_enabled:
                gc.enable()
        out.append(dt / n)
    return out


def fmt_us(seconds: float) -> str:
    """``12.3 µs``."""
    return f"{seconds * 1e6:.1f} µs"


# --- the sides -------------------------------------------------------------------------------


def make_raw(n_stages: int = STAGES, *, append: bool = True) -> Callable[[int], Loop]:
    """Raw transitions trigger with one condition + one ``MemoryLog.append`` per iteration
    (``append=False``: the trigger alone)."""
    machine = raw_machine(n_stages)
    names = stage_names(n_stages)

    def make(n: int) -> Loop:
        cursor = Cursor(names[0])
        log = MemoryLog(header())
        events = machine.events
        triggers = [events[f"goto:{names[(k + 1) % n_stages]}"] for k in range(n)]
        log_append = log.append

        def loop() -> None:
            for ev in triggers:
                ev.trigger(cursor)
                log_append(STAGE_EVENT, {"stage": cursor.state}, ignorable=True)

        def trigger_only() -> None:
            for ev in triggers:
                ev.trigger(cursor)

        return loop if append else trigger_only

    return make


def make_statemachine(n_stages: int = STAGES) -> Callable[[int], Loop]:
    """python-statemachine ``send`` (one ``cond``) + one ``MemoryLog.append`` per iteration."""
    cls = statemachine_class(n_stages)
    names = stage_names(n_stages)

    def make(n: int) -> Loop:
        sm = cls()
        log = MemoryLog(header())
        events = [f"goto_{names[(k + 1) % n_stages]}" for k in range(n)]
        append = log.append

        def loop() -> None:
            for e in events:
                sm.send(e)
                append(STAGE_EVENT, {"stage": sm.current_state_value}, ignorable=True)

        return loop

    return make


def make_compiled(n_stages: int = STAGES) -> Callable[[int], Loop]:
    """fsm_stage ``CompiledGraph.fire`` with guards passing and the append as durable ``commit``."""
    from fsm_stage.graph import compile_graph

    cg = compile_graph(ring_graph_config(n_stages))
    names = stage_names(n_stages)

    def eligible(guards: tuple[str, ...]) -> bool:
        return True

    def make(n: int) -> Loop:
        cursor = cg.new_cursor(names[0])
        log = MemoryLog(header())
        targets = [names[(k + 1) % n_stages] for k in range(n)]
        append = log.append
        fire = cg.fire

        def loop() -> None:
            for t in targets:
                fire(cursor, f"goto:{t}", eligible=eligible, approval=t,
                     commit=lambda t=t: append(STAGE_EVENT, {"stage": t}, ignorable=True))

        return loop

    return make


def _missing(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Row 3 as a dict of seconds per transition (``<side>_s``, medians) and paired ratios.

    The sides are measured interleaved (one run of each side per round, ``repeat`` rounds), so
    load changes on a shared machine hit every side alike; ``<side>_ratio`` is the median over
    rounds of ``side / raw`` within the same round. ``smoke`` uses tiny sizes (harness check
    only). Missing fsm_stage parts are reported under ``missing`` instead of raising.
    """
    n_stages = 10 if smoke else STAGES
    n, repeat = (30, 2) if smoke else (2_000, 5) if quick else (20_000, 7)
    n_slow = max(10, n // 10)  # python-statemachine and the reviewed path are 10-20x slower
    out: dict[str, Any] = {"row": 3, "title": "Transitions", "stages": n_stages, "n": n, "n_slow": n_slow,
                           "repeat": repeat, "missing": {}}
    sides: dict[str, tuple[Callable[[int], Loop], int]] = {
        "raw": (make_raw(n_stages), n),
        "trigger": (make_raw(n_stages, append=False), n),
        "psm": (make_statemachine(n_stages), n_slow),
    }
    optional: dict[str, tuple[Callable[[], Callable[[int], Loop]], int]] = {
        "compiled": (lambda: make_compiled(n_stages), n),
        "reviewed": (lambda: make_reviewed(n_stages), n_slow),
        "reviewed_light": (lambda: make_reviewed(n_stages, full=False), n_slow),
        "reviewed_logged": (lambda: make_reviewed(n_stages, log_tool=True), n_slow),
    }
    for key, (build, iterations) in optional.items():
        try:
            make = build()
            measure(make, min(iterations, 10), 1)  # warm-up; surfaces API mismatches early
            sides[key] = (make, iterations)
        except (ImportError, AttributeError, TypeError, RuntimeError) as exc:
            out["missing"][key] = _missing(exc)
    with tempfile.TemporaryDirectory(prefix="fsm-bench-durable-") as tmp:
        folder = Path(tmp)
        n_durable = 5 if smoke else 40 if quick else 150
        out["n_durable"] = n_durable
        durable: dict[str, tuple[Callable[[int], Loop], int]] = {
            "raw_durable": (make_raw_durable(folder, n_stages), n_durable)}
        sqlite = make_sqlite_saver(folder)
        if isinstance(sqlite, str):
            out["missing"]["sqlite"] = sqlite
        else:
            durable["sqlite"] = (sqlite, n_durable)
        try:
            reviewed_durable = make_reviewed(n_stages, durable=folder)
            measure(reviewed_durable, 3, 1)
            durable["reviewed_durable"] = (reviewed_durable, n_durable)
        except (ImportError, AttributeError, TypeError, RuntimeError) as exc:
            out["missing"]["reviewed_durable"] = _missing(exc)
        times: dict[str, list[float]] = {key: [] for key in [*sides, *durable]}
        for _ in range(repeat):
            for key, (make, iterations) in [*sides.items(), *durable.items()]:
                times[key].extend(measure(make, iterations, 1))
    for key, ts in times.items():
        out[f"{key}_s"] = statistics.median(ts)
        base = "raw_durable" if key in ("reviewed_durable", "sqlite") else "raw"
        if key not in ("raw", "raw_durable"):
            out[f"{key}_ratio"] = statistics.median(t / r for t, r in zip(ts, times[base], strict=True))
    if "reviewed_durable_s" in out and "sqlite_s" in out:
        out["reviewed_durable_vs_sqlite"] = statistics.median(
            t / r for t, r in zip(times["reviewed_durable"], times["sqlite"], strict=True))
    return out


class _ConstantMeter:
    """A ``TokenMeter`` pricing every surface at 0 tokens (forces light transitions, O(1))."""

    def surface_tokens(self, session: Any) -> int:
        return 0


HANDOFF = "## Done\n- part {k} finished\n## Next\n- continue with part {next}\n"


def handoff_text(k: int) -> str:
    """A distinct handoff document per call (a constant one would let caches hide work)."""
    return HANDOFF.format(k=k, next=k + 1)


def make_raw_durable(folder: Path, n_stages: int = STAGES) -> Callable[[int], Loop]:
    """The raw durable step: one ``transitions`` trigger + one JSON line appended and fsynced."""
    machine = raw_machine(n_stages)
    names = stage_names(n_stages)
    counter = [0]

    def make(n: int) -> Loop:
        cursor = Cursor(names[0])
        events = machine.events
        triggers = [events[f"goto:{names[(k + 1) % n_stages]}"] for k in range(n)]
        counter[0] += 1
        path = folder / f"raw-{counter[0]}.jsonl"

        def loop() -> None:
            dumps, fsync = json.dumps, os.fsync
            with open(path, "ab") as fh:
                fd = fh.fileno()
                for seq, ev in enumerate(triggers):
                    ev.trigger(cursor)
                    fh.write(dumps({"type": STAGE_EVENT, "seq": seq, "time": 0,
                                    "data": {"stage": cursor.state}, "ignorable": True}).encode() + b"\n")
                    fh.flush()
                    fsync(fd)

        return loop

    return make


def make_sqlite_saver(folder: Path) -> Callable[[int], Loop] | str:
    """LangGraph's ``SqliteSaver.put`` of one checkpoint per step (its durable step), default
    pragmas, a file database; the checkpoint carries the stage and a handoff-sized payload."""
    try:
        import sqlite3

        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as err:
        return f"langgraph-checkpoint-sqlite not installed ({err})"
    counter = [0]

    def make(n: int) -> Loop:
        counter[0] += 1
        conn = sqlite3.connect(folder / f"lg-{counter[0]}.sqlite", check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        names = stage_names(STAGES)

        def loop() -> None:
            config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
            checkpoint = empty_checkpoint()
            for i in range(n):
                checkpoint = create_checkpoint(checkpoint, None, i)
                checkpoint["channel_values"] = {"stage": names[(i + 1) % STAGES], "handoff": handoff_text(i)}
                checkpoint["channel_versions"] = {"stage": i + 1, "handoff": i + 1}
                config = saver.put(config, checkpoint, {"source": "loop", "step": i, "parents": {}},
                                   {"stage": i + 1, "handoff": i + 1})
            conn.close()

        return loop

    return make


def make_reviewed(n_stages: int = STAGES, *, full: bool = True, log_tool: bool = False,
                  durable: Path | None = None) -> Callable[[int], Loop]:
    """One reviewed model transition per iteration through ``StageController`` on a ``Runtime``.

    Each iteration: ``runtime.call_tool(goto_stage {stage: next, handoff})`` → the scripted
    review channel answers ``Approve`` → the transition is pending; then ``runtime.pre_step``
    (accepted boundary) flushes it: the record is appended inside the compiled machine's
    ``before`` callback. Everything is in memory (``MemoryLog``, ``MemoryHandoffStore``).

    ``full``: the graph has no ``min_handoff_tokens``, so every model transition is full (the
    default configuration): the handoff document is written (in memory) and the notice
    replaces the surface. ``full=False``: light transitions (threshold set, a constant token
    meter), the stage prompt is appended. ``log_tool``: also log ``tool/call`` + ``tool/result``
    (the agent loop's cost for any tool call; off by default, the raw side calls no tool).
    ``durable``: a folder; the session log is a ``JsonlLog`` there (every append fsynced) and
    handoffs go through ``LocalHandoffStore`` into the session's workspace folder.

    Every call carries its own handoff document (``handoff_text``).
    """
    import asyncio

    from fsm_stage.handoff import LocalHandoffStore, MemoryHandoffStore
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import Answer, ScriptedReviewChannel
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session
    from fsm_stage.runtime.tools import ToolCall
    from fsm_stage.stage_switch import StageController

    config = ring_graph_config(n_stages, min_handoff_tokens=None if full else 1e12)
    names = stage_names(n_stages)

    counter = [0]

    def make(n: int) -> Loop:
        review = ScriptedReviewChannel()
        store = MemoryHandoffStore() if durable is None else LocalHandoffStore()
        controller = StageController(config, handoffs=store,
                                     token_meter=None if full else _ConstantMeter())
        approve = controller.catalog.text("review.approve_label")
        review.default = lambda questions: [Answer(questions[0].id, (approve,))]
        runtime = Runtime(review=review, commands=False)
        runtime.attach(controller)
        counter[0] += 1
        if durable is None:
            session = Session(MemoryLog(SessionHeader(id="bench", cwd="/workspace")))
        else:
            workspace = durable / f"ws-{counter[0]}"
            workspace.mkdir(parents=True)
            session = Session(JsonlLog(durable / f"session-{counter[0]}.jsonl",
                                       header=SessionHeader(id=f"bench-{counter[0]}", cwd=str(workspace))))
        agent = InboxAgent(session)
        session.append("turn/start", {"turn": 1})
        calls = [ToolCall.of("goto_stage", {"stage": names[(k + 1) % n_stages], "handoff": handoff_text(k)},
                             id=f"call_{k}") for k in range(n)]
        expected = names[n % n_stages]
        loop = asyncio.new_event_loop()
        call_tool, pre_step = runtime.call_tool, runtime.pre_step

        async def body() -> None:
            for call in calls:
                result = await call_tool(agent, call, log=log_tool)
                if result.is_error:
                    raise RuntimeError(f"goto_stage failed in the benchmark: {result.text}")
                pre_step(agent, [], aborted=False)

        def run_loop() -> None:
            try:
                loop.run_until_complete(body())
            finally:
                loop.close()
                if durable is not None:
                    session.log.close()  # type: ignore[attr-defined]
            current = controller.current(session)
            if current != expected:
                raise RuntimeError(f"benchmark ended in stage {current!r}, expected {expected!r}")

        return run_loop

    return make


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv)
    for key, value in result.items():
        print(f"{key}: {value}")
