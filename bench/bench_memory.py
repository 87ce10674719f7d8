"""Row 4: bytes per session on one 100-stage graph, fsm_stage against the bare libraries.

Every side keeps ``sessions`` live session objects whose stage is tracked by a state machine
over the same ring graph (``bench_transitions.ring_edges``), and reports the bytes that
``tracemalloc`` sees allocated for them, divided by the number of sessions. The shared,
per-graph part (the compiled machine, the python-statemachine class) is built before
measuring and excluded; the session object itself is included on every side.

* ``fsm_stage``   a whole live session with no events (``Session`` over an empty ``MemoryLog``
                  with its own header and id, stage read through a ``StageController``, its
                  lock and cursor): the row's number; the detail also gives the bare
                  ``CompiledGraph.new_cursor(initial)`` (DESIGN.md §5: never ``add_model``-ed).
* ``add_model``   one ``transitions.Machine`` with its defaults (``auto_transitions=True``),
                  ``machine.add_model(obj)`` per session (binds ``to_*``/``is_*``/trigger
                  partials onto each object); also with ``auto_transitions=False``.
* ``psm``         one python-statemachine instance per session (measured on fewer instances:
                  ~1 MB each, 10,000 would need ~10 GB; the per-instance cost is flat).

Usage: ``python bench/bench_memory.py [--quick | --smoke]`` prints the numbers; ``run(quick, smoke)``
returns them.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench_transitions import STAGES, ring_edges, ring_graph_config, stage_names, statemachine_class
from transitions import Machine

SESSIONS = 10_000
TARGET_BYTES = 1024


def bytes_per(make_one: Callable[[], object], count: int) -> float:
    """Bytes ``tracemalloc`` sees allocated and still live for ``count`` calls of ``make_one``, per call."""
    keep: list[object] = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count):
            keep.append(make_one())
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # the list holding the sessions is bookkeeping, not per-session state
    list_bytes = keep.__sizeof__()
    del keep
    gc.collect()  # add_model's model <-> partial cycles: never leave them to a later measurement
    return (after - before - list_bytes) / count


class _Model:
    """A plain session object for ``add_model`` (needs a ``__dict__`` for the bound methods)."""


def _transitions_machine(auto_transitions: bool, n: int) -> Machine:
    return Machine(
        model=None,
        states=stage_names(n),
        transitions=[{"trigger": f"goto_{dst}", "source": src, "dest": dst, "conditions": ["ok"]}
                     for src, dst in ring_edges(n)],
        initial="s0",
        auto_transitions=auto_transitions,
    )


def add_model_bytes(count: int, *, auto_transitions: bool = True, n: int = STAGES) -> float:
    """Bytes per session for ``count`` models ``add_model``-ed onto one shared Machine."""
    machine = _transitions_machine(auto_transitions, n)

    def one() -> object:
        m = _Model()
        machine.add_model(m)
        return m

    return bytes_per(one, count)


def statemachine_bytes(count: int, n: int = STAGES) -> float:
    """Bytes per python-statemachine instance of one ring class."""
    cls = statemachine_class(n)
    cls()  # first-use allocations (class-level caches) are not per session
    return bytes_per(cls, count)


def cursor_bytes(count: int, n: int = STAGES) -> float:
    """Bytes per fsm_stage cursor on one compiled graph (``fsm_stage.graph``)."""
    from fsm_stage.graph import compile_graph

    cg = compile_graph(ring_graph_config(n))
    initial = cg.initial
    cg.new_cursor(initial)
    return bytes_per(lambda: cg.new_cursor(initial), count)


def live_session_bytes(count: int, n: int = STAGES) -> float:
    """A whole live session with no events: ``Session`` over an empty ``MemoryLog`` with its own
    header (a distinct session id each, as in production), whose stage has been read through a
    ``StageController`` (stage projection cursor and per-session lock created), plus its graph
    cursor. The row is decided on this number, not on the bare cursor."""
    from fsm_stage.log.events import MemoryLog, SessionHeader
    from fsm_stage.runtime.session import Session
    from fsm_stage.stage_switch import StageController

    controller = StageController(ring_graph_config(n))
    ids = iter(range(10**9))
    cursors: list[object] = []  # its growth (a pointer per session) is counted: conservative

    def one() -> object:
        session = Session(MemoryLog(SessionHeader(id=f"session-{next(ids):08d}", created_at=0, cwd="/tmp")))
        controller.current(session)
        controller.session_lock(session)
        # the cursor goes into a list of the bench's, not into a per-session tuple that would
        # count the bench's bookkeeping (56 B) as session state
        cursors.append(controller.graph.new_cursor(controller.current(session)))
        return session

    keep = one()  # first-use allocations
    result = bytes_per(one, count)
    del keep
    return result


def _missing(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Row 4 as a dict of bytes per session; ``missing`` names fsm_stage parts not importable."""
    n = 10 if smoke else STAGES
    sessions = 50 if smoke else 1_000 if quick else SESSIONS
    psm_sessions = 3 if smoke else 10 if quick else 100
    # add_model's per-model cost is flat from 1,000 models on (transitions-notes §2c): the
    # auto-off variant and quick runs use fewer models to keep the run short
    default_sessions = sessions if not quick else 500
    noauto_sessions = min(sessions, 500 if quick else 2_000)
    out: dict[str, Any] = {"row": 4, "title": "Memory", "stages": n, "sessions": sessions,
                           "psm_sessions": psm_sessions,
                           "noauto_sessions": noauto_sessions,
                           "default_sessions": default_sessions, "missing": {}}
    out["add_model_default_b"] = add_model_bytes(default_sessions, auto_transitions=True, n=n)
    out["add_model_noauto_b"] = add_model_bytes(noauto_sessions, auto_transitions=False, n=n)
    out["psm_b"] = statemachine_bytes(psm_sessions, n=n)
    try:
        out["cursor_b"] = cursor_bytes(sessions, n=n)
    except (ImportError, AttributeError, TypeError) as exc:
        out["missing"]["cursor"] = _missing(exc)
    try:
        out["live_session_b"] = live_session_bytes(sessions, n=n)
    except (ImportError, AttributeError, TypeError) as exc:
        out["missing"]["live_session"] = _missing(exc)
    return out


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv)
    for key, value in result.items():
        print(f"{key}: {value}")
