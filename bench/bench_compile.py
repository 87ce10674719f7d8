"""Row 5: load + validate + compile a generated 1,000-stage / 5,000-edge stage graph.

The graph is generated as native YAML text (``s0000`` … ``s0999``, each stage with five
targets: the next five stages on a ring, every fifth edge guarded), then timed in three parts:

* ``load_s``         ``load_config_text`` (YAML parse: ruamel's libyaml extension when it is
                     installed, ``yaml_parser`` says which; cattrs structuring, every
                     validation rule, template checks, reachability warnings);
* ``load_pure_s``    the same with the pure-Python round-trip parser (the loader's fallback,
                     and its only path without the C extension); ring graph only;
* ``compile_s``      ``compile_graph`` with an empty compile cache, for a config object whose
                     fingerprint is known (so: the ``transitions`` machine, with
                     ``auto_transitions=False``, no transition built);
* ``parse_s``        the YAML parse alone (``fast_parse``: libyaml's events and the plain data);
* ``fingerprint_s``  ``fingerprint`` of the config (what a new config object pays once);
* ``cached_s``       ``compile_graph`` again for the same config object (a cache hit, no fingerprint).

A second graph, **all-to-all**, has the same 1,000 stages with ``targets`` omitted on every
stage (each stage may go to every other: 999,000 model edges). It is timed the same way, plus
``fire_s``: one ``goto`` fired along an edge never used before (it builds that transition).
It shows that omitted targets cost O(stages), not O(stages²): the compiled machine builds the
transitions out of such a stage only when a trigger first looks them up.

Prints the medians; no assertions (shared, noisy machines). ``run(quick)`` is what
``bench/run.py`` calls; ``python bench/bench_compile.py [--quick]`` runs it alone.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

STAGES = 1_000
EDGES_PER_STAGE = 5
GUARD_EVERY = 5


def generate_yaml(stages: int = STAGES, edges_per_stage: int | None = EDGES_PER_STAGE) -> str:
    """Native-form YAML text of a ring graph: ``stages`` stages, ``stages * edges_per_stage`` edges.

    ``edges_per_stage=None`` omits ``targets`` on every stage (all-to-all: ``stages * (stages - 1)``
    edges).
    """
    width = len(str(stages - 1))
    names = [f"s{i:0{width}d}" for i in range(stages)]
    lines = [
        "name: generated",
        "section: |",
        "  Current stage << stage_current >>; next: << stage_targets >>.",
        "min_handoff_tokens: 4000",
        "stages:",
    ]
    edge = 0
    for i, name in enumerate(names):
        lines.append(f"  - name: {name}")
        lines.append(f"    instruction: Work on step {i} of the generated graph.")
        if edges_per_stage is None:
            continue
        lines.append("    targets:")
        for k in range(1, edges_per_stage + 1):
            target = names[(i + k) % stages]
            if edge % GUARD_EVERY == 0:
                lines.append(f"      - to: {target}")
                lines.append("        guards: [ready]")
            else:
                lines.append(f"      - {target}")
            edge += 1
    return "\n".join(lines) + "\n"


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _built_transitions(compiled: Any) -> int:
    """Transition objects the compiled machine holds right now (lazily built ones once built)."""
    count = getattr(compiled, "built_transitions", None)
    if count is not None:
        return int(count())
    return sum(len(ts) for ev in compiled.machine.events.values() for ts in ev.transitions.values())


def _measure(text: str, repeat: int, *, fire: bool) -> dict[str, Any]:
    from fsm_stage._yaml import fast_parse
    from fsm_stage.config import load_config_text
    from fsm_stage.graph import clear_cache, compile_graph, fingerprint, goto

    graph = load_config_text(text, "generated.yaml").graph
    assert graph is not None
    edges = sum(len(s.targets) if s.targets is not None else len(graph.stages) - 1 for s in graph.stages)
    load_s = _median_time(lambda: load_config_text(text, "generated.yaml"), repeat)

    def cold() -> object:
        clear_cache()
        return compile_graph(graph)

    compile_s = _median_time(cold, repeat)
    compiled = compile_graph(graph)
    cached_s = _median_time(lambda: compile_graph(graph), repeat)
    parse_s = _median_time(lambda: fast_parse(text, locate=False), repeat)
    fingerprint_s = _median_time(lambda: fingerprint(graph), repeat)
    result = {
        "stages": len(graph.stages),
        "edges": edges,
        "transitions": _built_transitions(compiled),
        "yaml_bytes": len(text.encode()),
        "repeat": repeat,
        "load_s": load_s,
        "compile_s": compile_s,
        "total_s": load_s + compile_s,
        "cached_s": cached_s,
        "parse_s": parse_s,
        "fingerprint_s": fingerprint_s,
    }
    if fire:
        names = graph.stage_names

        sources = iter(names[:-1])

        def fire_once() -> object:  # each time from another stage: an edge not built yet
            cursor = compiled.new_cursor(next(sources))
            return compiled.fire(cursor, goto(names[-1]), approval=names[-1], commit=None)

        result["fire_s"] = _median_time(fire_once, repeat)
    return result


def interleaved(text: str, stages: int, repeat: int) -> dict[str, Any]:
    """Row 5 with its baseline in the same process, alternating: one load + validate +
    compile of ``text`` (cache cleared), then one bare ``transitions.Machine`` construction for
    the same ring (``bench_transitions.raw_machine``), ``repeat`` rounds, each side timed after a
    full ``gc.collect()`` (the garbage of one side would otherwise be collected, and charged,
    inside the other's timing); medians and the median of the same-round ratios."""
    from bench_transitions import raw_machine

    from fsm_stage.config import load_config_text
    from fsm_stage.graph import clear_cache, compile_graph

    def ours() -> object:
        graph = load_config_text(text, "generated.yaml").graph
        assert graph is not None
        return compile_graph(graph)

    def timed(fn: Callable[[], object]) -> float:
        clear_cache()  # a cold compile; the previous graph is freed here, outside the timing
        gc.collect()  # neither side pays for collecting the other's garbage
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
        del result  # freed outside the timing too
        return elapsed

    ours_t, machine_t = [], []
    for _ in range(repeat):
        ours_t.append(timed(ours))
        machine_t.append(timed(lambda: raw_machine(stages)))
    return {"total_s": statistics.median(ours_t), "machine_s": statistics.median(machine_t),
            "ratio": statistics.median(o / m for o, m in zip(ours_t, machine_t, strict=True)),
            "repeat": repeat}


def run(quick: bool = False, smoke: bool = False, all_to_all: bool = True) -> dict[str, Any]:
    """Time load+validate and compile; returns seconds (medians) and the sizes measured.

    Top-level keys describe the 1,000-stage / 5,000-edge ring (``stages``, ``edges``,
    ``transitions``, ``yaml_bytes``, ``repeat``, ``load_s``, ``compile_s``, ``total_s``,
    ``cached_s``, ``parse_s``, ``fingerprint_s``); ``interleaved`` holds load + validate +
    compile timed alternately with a bare ``transitions.Machine`` for the same ring;
    ``all_to_all`` holds the same keys plus ``fire_s`` for the graph with ``targets`` omitted
    everywhere (skipped with ``all_to_all=False``). ``quick`` repeats fewer times (same graph
    sizes); ``smoke`` uses 50-stage graphs (harness check only).
    """
    import fsm_stage._yaml.fast as fast_module
    import fsm_stage.config as config_module

    stages = 50 if smoke else STAGES
    repeat = 1 if smoke else 3 if quick else 7
    text = generate_yaml(stages)
    result = _measure(text, repeat, fire=False)
    fast = fast_module.fast_parse(text, locate=False) is not None
    result["yaml_parser"] = "libyaml" if fast else "pure Python"
    saved, fast_module.USE_C_PARSER = fast_module.USE_C_PARSER, False
    try:
        result["load_pure_s"] = _median_time(
            lambda: config_module.load_config_text(text, "generated.yaml"), min(repeat, 3)
        )
    finally:
        fast_module.USE_C_PARSER = saved
    result["interleaved"] = interleaved(text, stages, 1 if smoke else 5 if quick else 21)
    result["all_to_all"] = (_measure(generate_yaml(stages, None), repeat, fire=True) if all_to_all
                            else "skipped in --quick")
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: print the timings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--smoke", action="store_true", help="50-stage graphs (harness check only)")
    args = ap.parse_args(argv)
    r = run(quick=args.quick, smoke=args.smoke)
    print(
        f"{r['stages']:,} stages / {r['edges']:,} edges ({r['yaml_bytes'] / 1024:,.0f} KB of YAML), "
        f"median of {r['repeat']}:"
    )
    print(f"  load + validate  {r['load_s'] * 1e3:9.1f} ms  ({r['yaml_parser']} YAML parser)")
    print(f"  compile          {r['compile_s'] * 1e3:9.1f} ms  ({r['transitions']:,} transitions)")
    print(f"  total            {r['total_s'] * 1e3:9.1f} ms")
    print(f"  compile (cached) {r['cached_s'] * 1e3:9.1f} ms  (a cache hit on the same config object)")
    print(f"  load, pure parser{r['load_pure_s'] * 1e3:9.1f} ms  (the fallback without the C extension)")
    a = r["all_to_all"]
    print(f"{a['stages']:,} stages, targets omitted (all-to-all: {a['edges']:,} edges), "
          f"median of {a['repeat']}:")
    print(f"  load + validate  {a['load_s'] * 1e3:9.1f} ms")
    print(f"  compile          {a['compile_s'] * 1e3:9.1f} ms  ({a['transitions']:,} transitions built)")
    print(f"  total            {a['total_s'] * 1e3:9.1f} ms")
    print(f"  compile (cached) {a['cached_s'] * 1e3:9.1f} ms  (a cache hit on the same config object)")
    print(f"  first fire       {a['fire_s'] * 1e6:9.1f} µs  (goto along an edge not built yet)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
