"""Run fsm_stage's benchmarks side by side and write ``bench/results.md``.

Usage::

    python bench/run.py            # full run (a few minutes on 2 cores); writes bench/results.md
    python bench/run.py --quick    # smaller sizes, about a minute; writes bench/results-quick.md
    python bench/run.py --smoke --output /tmp/r.md   # tiny sizes: checks the harness only

Twenty rows, each comparing fsm_stage with a baseline measured in the same run (interleaved where
it can be), reported as a ratio against a target (absolute times vary on shared machines; ratios
are the point). The targets:

1. reads        incremental projection read after one append vs the legacy 0.1.x full refold,
                on a real-mix log (the 0.2.0 seed's incremental unit in the details; ``bench_log``)
2. cold fold    folding a real-mix JSONL log vs a bare ``json.loads`` loop (``bench_log``)
3. transitions  reviewed transition vs raw ``transitions`` trigger + append (``bench_transitions``)
4. memory       bytes per whole live session vs ``add_model`` / python-statemachine (``bench_memory``)
5. compile      load + validate + compile of a 1,000-stage / 5,000-edge graph vs a bare Machine,
                interleaved (``bench_compile``)
6. durable      reviewed transition on a fsynced ``JsonlLog`` + file handoffs vs a raw durable
                step and LangGraph's ``SqliteSaver`` (``bench_transitions``)
7. state        ``fsm-stage state`` as a process on 1M real-mix events vs a bare loop process
8. simulate     ``simulate`` at 4n vs n turns: time and memory ratios
9. start-up     ``fsm-stage --help`` vs ``python -c pass`` (7-9: ``bench_cli``)
10. PostgreSQL  durable step vs LangGraph's ``PostgresSaver`` (``bench_postgres``; skipped in
                ``--smoke``)
11. review fold ``fsm-stage state`` on 8,000 vs 1,000 reviewed transitions (``bench_reviews``)
12. session length  a reviewed transition after 10,000 vs after 100 earlier ones (``bench_reviews``)
13. observe     ``Session.append`` with the observability hook vs a no-op hook, logging quiet and
                no tracer provider (``bench_observe``)
14. long turn   a step's cost after 2,000 vs 100 calls in one turn (``bench_turns``)
15. mid-turn    bytes per live session with an open turn; RSS of 10,000 (``bench_turns``)
16. import      the host import vs ``python -c pass`` (``bench_turns``)
17. PG workers  distinct-session appends, 2 workers vs 1 (``bench_postgres``)
18. PG statements  SQL statements of one reviewed step on ``PostgresLog`` besides the appends
                (``bench_postgres``)
19. inbox queue on PostgreSQL  the review inbox's queue page over 1,000 open reviews in 1,000
                sessions on PostgreSQL, cold and warm, vs the same over JSONL logs (``bench_inbox``;
                skipped in ``--smoke``)
20. PG open     ``open_log`` of a 10,000-event PostgreSQL session vs one of 100 (``bench_postgres``)

The real-mix log (``realmix``) is built at bench time from ``$FSM_STAGE_SHARED/data/dsh-sessions``
into a temporary folder and never committed.

A part that is missing or fails is shown as such in its row (the run still exits 0 so the other
rows are reported); ``--strict`` makes any missing row an exit status of 1. ``rows.py`` turns
each part's result into its rows; this file runs the parts and writes the results.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as ``python bench/run.py`` or imported from the tests
    sys.path.insert(0, str(HERE))

from rows import (  # noqa: E402  (bench/ is on the path only from here)
    MISSING,
    Row,
    details,
    row_durable,
    row_inbox_pg,
    row_memory,
    row_observe,
    row_pg_open,
    row_pg_reviewed,
    row_pg_scaling,
    row_pg_statements,
    row_postgres,
    row_review_fold,
    row_session_length,
    row_simulate,
    row_startup,
    row_state,
    row_transitions,
    rows_compile,
    rows_log,
    rows_turns,
    table,
)

# --- machine ---------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str:
    """Short HEAD commit, flagged when the library's files differ from it."""
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=10,
                             check=False)
        return out.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD") or "unknown"
        dirty = git("status", "--porcelain", "--", "../fsm_stage", "../templates", "../pyproject.toml")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} + uncommitted changes to fsm_stage" if dirty else head


def _load() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def machine_info() -> dict[str, str]:
    """CPU model, cores, load, Python, library versions, commit and UTC date for ``results.md``."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    load = _load()
    return {
        "CPU": _cpu_model(),
        "cores": f"{affinity} usable ({os.cpu_count()} online)",
        "load average (1/5/15 min, at start)": load,
        "Python": f"{platform.python_implementation()} {platform.python_version()} ({sys.platform})",
        "transitions": _version("transitions"),
        "python-statemachine": _version("python-statemachine"),
        "ruamel.yaml (C parser)": f"{_version('ruamel.yaml')} (clibz {_version('ruamel.yaml.clibz')}, "
                                  f"clib {_version('ruamel.yaml.clib')})",
        "fsm_stage commit": _git_commit(),
        "date (UTC)": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M"),
    }


# --- calling the bench modules -------------------------------------------------------------


def _has_ring_only(mod: Any) -> bool:
    return all(hasattr(mod, name) for name in ("_measure", "generate_yaml", "STAGES"))


def _compile_ring_only(mod: Any) -> dict[str, Any]:
    """``--quick`` for ``bench_compile``: the 1,000-stage / 5,000-edge ring only.

    ``bench_compile.run`` also builds an all-to-all 1,000-stage graph (999,000 edges, seconds
    per compile), which alone would exceed the quick budget; its ``run`` has no switch for it
    yet, so the quick run calls the module's ring measurement directly.
    """
    result: dict[str, Any] = mod._measure(mod.generate_yaml(mod.STAGES), 3, fire=False)
    result["all_to_all"] = "skipped in --quick"
    return result


MODULES = ("bench_log", "bench_transitions", "bench_memory", "bench_compile", "bench_cli", "bench_postgres",
           "bench_reviews", "bench_observe", "bench_turns", "bench_inbox")
#: Modules that start a PostgreSQL cluster: skipped in ``--smoke`` (a cluster takes seconds to start).
POSTGRES_MODULES = ("bench_postgres", "bench_inbox")


def call_bench(module: str, quick: bool, smoke: bool) -> tuple[dict[str, Any] | None, str | None, float]:
    """Import ``module`` and call its ``run``; returns ``(result, error, seconds)``.

    ``run(quick)`` is the published signature; ``smoke=True`` is passed only when ``run``
    accepts it. In smoke mode a module without ``smoke`` is skipped (its quick sizes are too
    big for a harness check).
    """
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(module)
        fn: Callable[..., Any] = mod.run
        params = inspect.signature(fn).parameters
        kwargs: dict[str, Any] = {}
        if smoke:
            if "smoke" not in params:
                return None, f"skipped in --smoke ({module}.run has no smoke sizes)", 0.0
            kwargs["smoke"] = True
        if quick and module == "bench_compile" and "all_to_all" in params:
            kwargs["all_to_all"] = False
        if quick and module == "bench_compile" and "all_to_all" not in params and _has_ring_only(mod):
            result = _compile_ring_only(mod)
        elif "quick" in params:
            kwargs["quick"] = quick or smoke
            result = fn(**kwargs)
        else:
            result = fn(quick or smoke, **kwargs)
    except ModuleNotFoundError as exc:
        return None, f"not landed ({exc.name} not found)", time.perf_counter() - t0
    except Exception as exc:
        if type(exc).__name__ == "NoRecordings":  # realmix: no recorded sessions to measure on
            return None, f"skipped: {exc}", time.perf_counter() - t0
        tb = traceback.format_exc(limit=-3)
        return None, f"failed: {type(exc).__name__}: {exc}".splitlines()[0][:200] + "\n" + tb, \
            time.perf_counter() - t0
    if not isinstance(result, dict):
        return None, f"{module}.run returned {type(result).__name__}, expected dict", time.perf_counter() - t0
    return result, None, time.perf_counter() - t0


def call_isolated(module: str, quick: bool, smoke: bool) -> tuple[dict[str, Any] | None, str | None, float]:
    """``call_bench`` in a fresh interpreter (``run.py --child``), so one bench's garbage, caches
    and heap growth (e.g. 10,000 ``add_model``-ed sessions, a 1M-event log) never land in
    another bench's timed region. The result travels back as JSON (dict keys become strings)."""
    import tempfile

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fsm-bench-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", module, "--child-output", str(out)]
        if quick:
            cmd.append("--quick")
        if smoke:
            cmd.append("--smoke")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return None, f"failed: {module} exited {proc.returncode}: " + " | ".join(tail), \
                time.perf_counter() - t0
        payload = json.loads(out.read_text(encoding="utf-8"))
    return payload["result"], payload["error"], time.perf_counter() - t0


def render_results(rows: list[Row], info: dict[str, str], mode: str, raw: dict[str, Any],
                   seconds: float) -> str:
    """The whole ``results.md``."""
    machine = "\n".join(f"| {k} | {v} |" for k, v in info.items())
    return (
        "# fsm_stage benchmark results\n\n"
        f"Generated by `python bench/run.py{'' if mode == 'full' else ' --' + mode}` "
        f"({mode} run, {seconds:.0f} s). Times are medians of repeated runs on a shared, noisy "
        "machine: compare the ratios, not the absolute times."
        + ("" if mode == "full" else f" A {mode} run measures smaller sizes than the targets name "
           "(no 1M-event log, fewer sessions, shorter runs): its statuses compare those sizes "
           "with the targets, and only a full run decides a row.")
        + "\n\n"
        "| machine | |\n|---|---|\n" + machine + "\n\n"
        "## Results\n\n" + table(rows) + "\n\n"
        "## Details\n\n" + details(rows) + "\n"
        "## Raw numbers\n\n```json\n" + json.dumps(raw, indent=1, sort_keys=True, default=str) + "\n```\n"
    )


def profile(row: int, top: int = 30) -> str:
    """cProfile of fsm_stage's side of ``row`` (2: cold fold, 3: reviewed transition, 5: load +
    compile), sorted by cumulative time; the text of ``pstats`` (top ``top`` entries)."""
    import cProfile
    import io
    import pstats
    import tempfile

    prof = cProfile.Profile()
    if row == 3:
        import bench_transitions

        make = bench_transitions.make_reviewed()
        make(20)()  # warm caches (catalog, compiled graph)
        loop = make(1_000)
        prof.runcall(loop)
    elif row == 5:
        import bench_compile

        from fsm_stage.config import load_config_text
        from fsm_stage.graph import clear_cache, compile_graph

        text = bench_compile.generate_yaml()

        def load_and_compile() -> object:
            clear_cache()
            graph = load_config_text(text, "generated.yaml").graph
            assert graph is not None
            return compile_graph(graph)

        load_and_compile()
        prof.runcall(load_and_compile)
    elif row == 2:
        import bench_log

        from fsm_stage.log.checkpoints import cold_fold
        from fsm_stage.log.projections import PlanView, StageProjection

        with tempfile.TemporaryDirectory(prefix="fsm-bench-profile-") as tmp:
            path = Path(tmp) / "log.jsonl"
            bench_log.make_log(path, 100_000)
            prof.runcall(cold_fold, path, [StageProjection(), PlanView()])
    else:
        raise SystemExit(f"--profile supports rows 2, 3 and 5, not {row}")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def baseline_machine_s(quick: bool, smoke: bool) -> float | None:
    """Row 5's baseline: median construction time of a bare 1,000-stage / 5,000-edge Machine."""
    try:
        import bench_transitions
    except ImportError:
        return None
    return bench_transitions.machine_build_s(50 if smoke else 1_000, 1 if smoke else 3 if quick else 7)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run every bench, print the table, write the results file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    size.add_argument("--smoke", action="store_true", help="tiny sizes: harness check, numbers meaningless")
    ap.add_argument("--output", type=Path, default=None,
                    help="results file (default: bench/results.md for a full run, the committed "
                         "record; bench/results-quick.md or bench/results-smoke.md, not committed, "
                         "for --quick or --smoke)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a row is missing")
    ap.add_argument("--profile", type=int, metavar="ROW",
                    help="print a cProfile of fsm_stage's side of row 2, 3 or 5 instead of benchmarking")
    ap.add_argument("--in-process", action="store_true",
                    help="run every bench in this interpreter (default: one fresh interpreter each)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        res, err, _ = call_bench(args.child, quick=args.quick, smoke=args.smoke)
        if args.child_output is None:
            raise SystemExit("--child needs --child-output")
        args.child_output.write_text(json.dumps({"result": res, "error": err}, default=str), encoding="utf-8")
        return 0
    if args.profile is not None:
        print(profile(args.profile))
        return 0
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.output is None:  # a smaller run never replaces the full run's record
        args.output = HERE / ("results.md" if mode == "full" else f"results-{mode}.md")

    info = machine_info()
    t0 = time.perf_counter()
    raw: dict[str, Any] = {}
    results: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
    for module in MODULES:
        print(f"running {module} ({mode}) …", file=sys.stderr, flush=True)
        call = call_bench if args.in_process else call_isolated
        if module in POSTGRES_MODULES and args.smoke:
            res, err, secs = None, "skipped in --smoke (a PostgreSQL cluster takes seconds to start)", 0.0
        else:
            res, err, secs = call(module, quick=args.quick, smoke=args.smoke)
        results[module] = (res, err)
        raw[module] = res if res is not None else {"error": err}
        print(f"  {module}: {secs:.1f} s" + (f" — {err.splitlines()[0]}" if err else ""), file=sys.stderr)
    rows = [
        *rows_log(*results["bench_log"]),
        row_transitions(*results["bench_transitions"]),
        row_memory(*results["bench_memory"]),
        *rows_compile(*results["bench_compile"], machine_s=None),
        row_durable(*results["bench_transitions"]),
        row_state(*results["bench_cli"]),
        row_simulate(*results["bench_cli"]),
        row_startup(*results["bench_cli"]),
        row_postgres(*results["bench_postgres"]),
        row_review_fold(*results["bench_reviews"]),
        row_session_length(*results["bench_reviews"]),
        row_observe(*results["bench_observe"]),
        *rows_turns(*results["bench_turns"]),
        row_pg_scaling(*results["bench_postgres"]),
        row_pg_statements(*results["bench_postgres"]),
        row_inbox_pg(*results["bench_inbox"]),
        row_pg_open(*results["bench_postgres"]),
        row_pg_reviewed(*results["bench_postgres"]),
    ]
    seconds = time.perf_counter() - t0
    info["load average (1/5/15 min, at end)"] = _load()
    print(table(rows))
    print()
    print(details(rows))
    if not args.no_write:
        args.output.write_text(render_results(rows, info, mode, raw, seconds), encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    for r in rows:  # every target with its status, also when stdout goes to a file
        print(f"target {r.number} {r.name}: {r.target} → {r.status}", file=sys.stderr)
    if mode != "full":
        print(f"({mode} sizes: only a full run decides a row)", file=sys.stderr)
    if args.strict and any(r.status == MISSING for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
