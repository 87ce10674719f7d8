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
rows are reported); ``--strict`` makes any missing row an exit status of 1.
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

import attrs

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # run as ``python bench/run.py`` or imported from the tests
    sys.path.insert(0, str(HERE))

PASS, MISS, MISSING, SKIPPED = "pass", "MISS", "missing", "skipped"


@attrs.define
class Row:
    """One line of the results table."""

    number: int
    name: str
    compares: str
    ours: str = "—"
    baseline: str = "—"
    ratio: str = "—"
    target: str = ""
    status: str = MISSING
    details: list[str] = attrs.field(factory=list)


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


def _us(s: float) -> str:
    return f"{s * 1e6:,.1f} µs" if s < 1e-3 else f"{s * 1e3:,.2f} ms"


def _bytes(b: float) -> str:
    return f"{b:,.0f} B" if b < 10_000 else f"{b / 1024:,.1f} KB"


def _status(ok: bool) -> str:
    return PASS if ok else MISS


# --- rows 3 and 4 (ours) -------------------------------------------------------------------


def row_transitions(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 3 from ``bench_transitions.run``."""
    row = Row(3, "transitions",
              "one reviewed transition (goto_stage → Approve via scripted review → boundary flush; "
              "full shape, a distinct handoff per call, in-memory log and handoff store) vs one raw "
              "`transitions` trigger with one condition + one in-memory append",
              target="≤ 10x raw")
    if r is None:
        row.details.append(f"bench_transitions: {err}")
        return row
    raw = r["raw_s"]

    def vs_raw(key: str) -> str:
        ratio = r.get(f"{key}_ratio", r[f"{key}_s"] / raw)
        return f"{_us(r[f'{key}_s'])} = {ratio:.2f}x raw"

    row.baseline = _us(raw)
    if "reviewed_s" in r:
        ratio = r.get("reviewed_ratio", r["reviewed_s"] / raw)
        row.ours, row.ratio, row.status = _us(r["reviewed_s"]), f"{ratio:.1f}x", _status(ratio <= 10.0)
    else:
        row.ours = "missing"
        row.details.append(f"reviewed transition not measured: {r['missing'].get('reviewed')}")
    labels = {
        "reviewed_light": "reviewed, light shape (threshold set, stage prompt appended, no handoff document)",
        "reviewed_logged": "reviewed, full, plus the agent loop's `tool/call` + `tool/result` appends",
        "compiled": "fsm_stage `CompiledGraph.fire` alone (guards eligible + approved, the append as "
                    "durable `commit` in `before`)",
        "psm": "python-statemachine `send` (one cond) + append on the same graph",
        "trigger": "the raw `transitions` trigger alone, without the `MemoryLog.append`",
    }
    for key, label in labels.items():
        if f"{key}_s" in r:
            row.details.append(f"{label}: {vs_raw(key)}")
        elif key in r["missing"]:
            row.details.append(f"{label}: not measured ({r['missing'][key]})")
    slow = r.get("n_slow", max(10, r["n"] // 10))
    row.details.append(f"graph: {r['stages']}-stage ring, 5 edges per stage; sides interleaved, "
                       f"{r['repeat']} rounds of {r['n']:,} iterations (python-statemachine and reviewed: "
                       f"{slow:,}); times are medians, ratios are medians of same-round ratios")
    return row


def row_memory(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 4 from ``bench_memory.run``."""
    row = Row(4, "memory",
              "bytes per session, sessions on one compiled 100-stage graph: a whole live fsm_stage "
              "session (distinct ids) vs transitions' default `add_model` (and python-statemachine "
              "instances)",
              target="≤ 1 KB/session")
    if r is None:
        row.details.append(f"bench_memory: {err}")
        return row
    base = r["add_model_default_b"]
    row.baseline = _bytes(base)
    if "live_session_b" in r:
        ours = r["live_session_b"]
        row.ours = _bytes(ours) + " whole live session"
        row.ratio = f"{base / ours:,.0f}x smaller" if ours > 0 else "∞"
        row.status = _status(ours <= 1024)
        row.details.append("a whole live fsm_stage session with no events (runtime `Session` over an empty "
                           "`MemoryLog` with its own header and session id, stage read through "
                           "`StageController`, per-session lock, graph cursor): "
                           f"{_bytes(ours)}; the row is decided on this number")
    else:
        row.ours = "missing"
        row.details.append(f"live session not measured: {r['missing'].get('live_session')}")
    if "cursor_b" in r:
        row.details.append(f"the graph cursor alone (`CompiledGraph.new_cursor`): {_bytes(r['cursor_b'])}")
    row.details.append("transitions `add_model` with `auto_transitions=False`: "
                       f"{_bytes(r['add_model_noauto_b'])} (measured on {r['noauto_sessions']:,} models)")
    row.details.append(f"python-statemachine, one instance per session: {_bytes(r['psm_b'])} "
                       f"(measured on {r['psm_sessions']} instances; per-instance cost is flat)")
    row.details.append(f"{r['sessions']:,} fsm_stage sessions, {r.get('default_sessions', r['sessions']):,} "
                       f"default `add_model` models, {r['stages']} stages; tracemalloc, live bytes after "
                       "building them, shared per-graph objects excluded, session object included")
    return row


# --- rows 1, 2 and 5 (other helpers' modules) ----------------------------------------------


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s >= 1e-3 else _us(s)


def _rate(x: float) -> str:
    return f"{x:,.0f} ev/s"


def _not_measured(row: Row, module: str, err: str | None) -> None:
    """Say why ``row`` has no figures: ``skipped`` when the part said so (no recorded sessions,
    a PostgreSQL part in ``--smoke``), else it stays ``missing``."""
    row.details.append(f"{module}: {err}")
    if err is not None and err.startswith("skipped"):
        row.status = SKIPPED


def rows_log(r: dict[str, Any] | None, err: str | None) -> list[Row]:
    """Rows 1 and 2 from ``bench_log.run`` (``{"sizes": {n: {...}}, "largest": n, ...}``)."""
    reads = Row(1, "reads",
                "current stage + plan view after one append on a real-mix log: incremental projection "
                "vs the legacy 0.1.x full refold per read, at 10k / 100k / 1M events",
                target="≥ 1,000x at 1M")
    fold = Row(2, "cold fold", "folding a real-mix JSONL log (recorded DSH sessions, packed rows kept; "
               "stage + plan projections) vs a bare `json.loads` loop over the same file",
               target="≥ 65% of bare parse")
    if r is None:
        _not_measured(reads, "bench_log", err)
        _not_measured(fold, "bench_log", err)
        return [reads, fold]
    sizes = {int(k): v for k, v in r["sizes"].items()}
    n = max(sizes)
    big = sizes[n]
    at = "" if n >= 1_000_000 else f" (at {n:,} events: no 1M size in this run)"
    reads.ours, reads.baseline = _us(big["incremental_read_s"]), _ms(big["refold_read_s"])
    reads.ratio = f"{big['read_speedup']:,.0f}x" + at
    reads.status = _status(big["read_speedup"] >= 1000)
    for k in sorted(sizes):
        x = sizes[k]
        reads.details.append(
            f"{k:,} events ({x['file_mb']:.1f} MB): incremental {_us(x['incremental_read_s'])}, legacy full "
            f"refold {_ms(x['refold_read_s'])} → {x['read_speedup']:,.0f}x; checkpointed cold read of the "
            f"file after one append {_ms(x['checkpoint_cold_read_s'])}")
        if "seed_incremental_read_s" in x:
            reads.details.append(
                f"{k:,} events: the 0.2.0 seed's incremental projection unit (same per-event fold applied "
                f"on commit, read returns the kept state) {_us(x['seed_incremental_read_s'])}: ours is "
                f"{x['vs_seed_incremental']:.2f}x of it (the cursor's catch-up check per read)")
    fold.ours, fold.baseline = _rate(big["cold_fold_events_per_s"]), _rate(big["bare_parse_events_per_s"])
    fold.ratio = f"{big['cold_fold_vs_bare']:.0%}" + at
    fold.status = _status(big["cold_fold_vs_bare"] >= 0.65)
    for k in sorted(sizes):
        x = sizes[k]
        fold.details.append(
            f"{k:,} events ({x.get('events_per_line', 1):.1f} events per line): cold fold "
            f"{_rate(x['cold_fold_events_per_s'])} vs bare parse {_rate(x['bare_parse_events_per_s'])} "
            f"({x['cold_fold_vs_bare']:.0%}); `read_log` (every Event materialised) "
            f"{_rate(x['read_log_events_per_s'])}")
    bench_mix = r.get("bench_mix")
    if isinstance(bench_mix, dict):
        fold.details.append(
            f"the bench's own even mix (no packed rows), {bench_mix['events']:,} events: cold fold "
            f"{bench_mix['cold_fold_vs_bare']:.0%} of bare; reads {bench_mix['read_speedup']:,.0f}x the "
            f"legacy refold; `JsonlLog.append_many` {_rate(bench_mix['write_events_per_s'])}")
    return [reads, fold]


def rows_compile(r: dict[str, Any] | None, err: str | None, machine_s: float | None) -> list[Row]:
    """Row 5 from ``bench_compile.run``; baseline: a bare ``transitions.Machine`` for the same ring."""
    row = Row(5, "compile", "load + validate + compile of a generated 1,000-stage / 5,000-edge graph vs "
              "constructing a bare `transitions.Machine` for the same ring", target="≤ 2.5x bare Machine")
    if r is None:
        row.details.append(f"bench_compile: {err}")
        return [row]
    total = r["total_s"]
    row.ours = _ms(total)
    inter = r.get("interleaved")
    if isinstance(inter, dict):
        row.ours = _ms(inter["total_s"])
        row.baseline = _ms(inter["machine_s"])
        row.ratio = f"{inter['ratio']:,.2f}x"
        row.status = _status(inter["ratio"] <= 2.5)
        row.details.append(f"baseline interleaved with ours in the same process, {inter['repeat']} rounds: "
                           f"load + validate + compile {_ms(inter['total_s'])}, bare `transitions.Machine` "
                           f"{_ms(inter['machine_s'])}, median same-round ratio {inter['ratio']:.2f}x; "
                           "each side timed after a full `gc.collect()`; ours includes the new config "
                           "object's fingerprint")
    elif machine_s is not None:
        row.baseline = _ms(machine_s)
        row.ratio = f"{total / machine_s:,.1f}x"
        row.status = _status(total / machine_s <= 2.5)
    row.details.append(f"{r['stages']:,} stages / {r['edges']:,} edges ({r['yaml_bytes'] / 1024:,.0f} KB "
                       f"YAML), median of {r['repeat']}: load + validate {_ms(r['load_s'])}, compile "
                       f"{_ms(r['compile_s'])} ({r['transitions']:,} transitions built up front), "
                       f"compile again (cache hit) {_ms(r['cached_s'])}")
    if "parse_s" in r:
        row.details.append(f"of load + validate + compile: the YAML parse alone {_ms(r['parse_s'])} "
                           "(libyaml's events and the plain data built from them), the fingerprint of a new "
                           f"config object {_ms(r['fingerprint_s'])} (the compile cache's key)")
    if "yaml_parser" in r:
        pure = f"; the pure-Python fallback parser takes {_ms(r['load_pure_s'])} to load" \
            if "load_pure_s" in r else ""
        row.details.append(f"YAML parser used: {r['yaml_parser']}{pure}")
    a2a = r.get("all_to_all")
    if isinstance(a2a, dict):
        fire = f"; first fire from a fresh cursor {_us(a2a['fire_s'])}" if "fire_s" in a2a else ""
        row.details.append(
            f"all-to-all stress (targets omitted, the seed's default: {a2a['stages']:,} stages / "
            f"{a2a['edges']:,} edges), median of {a2a['repeat']}: load + validate {_ms(a2a['load_s'])}, "
            f"compile {_ms(a2a['compile_s'])} ({a2a['transitions']:,} transitions built up front), "
            f"compile again (cache hit) {_ms(a2a['cached_s'])}{fire}")
    elif a2a is not None:
        row.details.append(f"all-to-all stress graph: {a2a}")
    return [row]


# --- rows 6-10 ------------------------------------------------------------------


def _mb(b: float) -> str:
    return f"{b / 2**20:,.1f} MiB"


def row_durable(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 6 from ``bench_transitions.run``: the reviewed transition on durable storage."""
    row = Row(6, "durable transition",
              "one reviewed transition on a `JsonlLog` (every append fsynced) with a `LocalHandoffStore` "
              "(atomic, fsynced file + folder) vs one raw durable step (trigger + one fsynced JSON line); "
              "LangGraph `SqliteSaver.put` beside it", target="≤ 4x raw durable step")
    if r is None:
        row.details.append(f"bench_transitions: {err}")
        return row
    if "raw_durable_s" not in r:
        row.details.append("raw durable step not measured")
        return row
    row.baseline = _ms(r["raw_durable_s"])
    if "reviewed_durable_s" in r:
        ratio = r["reviewed_durable_ratio"]
        row.ours, row.ratio, row.status = _ms(r["reviewed_durable_s"]), f"{ratio:.1f}x", _status(ratio <= 4.0)
    else:
        row.ours = "missing"
        row.details.append("durable reviewed transition not measured: "
                           f"{r['missing'].get('reviewed_durable')}")
    if "sqlite_s" in r:
        vs = r.get("reviewed_durable_vs_sqlite")
        row.details.append(f"LangGraph `SqliteSaver.put` (default pragmas, file database) per step: "
                           f"{_ms(r['sqlite_s'])} = {r['sqlite_ratio']:.2f}x the raw durable step"
                           + (f"; the reviewed transition is {vs:.2f}x of it" if vs is not None else ""))
    elif "sqlite" in r["missing"]:
        row.details.append(f"LangGraph `SqliteSaver`: not measured ({r['missing']['sqlite']})")
    row.details.append(f"{r.get('n_durable', '?')} transitions per round, {r['repeat']} rounds interleaved "
                       "with row 3's sides; medians, ratios are medians of same-round ratios")
    return row


def row_state(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 7 from ``bench_cli.run``: ``fsm-stage state`` as a whole process."""
    row = Row(7, "state process", "`fsm-stage state --json` as its own process on a real-mix log (1M events "
              "in the full run): CPU and peak RSS vs a process running a bare `json.loads` loop over the "
              "same file", target="≤ 2x bare CPU and ≤ 100 MB peak")
    if r is None or "state" not in r:
        _not_measured(row, "bench_cli", err if r is None else r.get("state_skipped", err))
        return row
    x = r["state"]
    at = "" if x["events"] >= 1_000_000 else f" (at {x['events']:,} events: no 1M log in this run)"
    row.ours = f"{x['state_cpu_s']:.2f} s CPU, {_mb(x['state_rss_b'])} peak"
    row.baseline = f"{x['bare_cpu_s']:.2f} s CPU, {_mb(x['bare_rss_b'])} peak"
    row.ratio = f"{x['cpu_ratio']:.2f}x CPU" + at
    row.status = _status(x["cpu_ratio"] <= 2.0 and x["state_rss_b"] <= 100e6)
    mix = x["mix"]
    row.details.append(f"log: {x['events']:,} events on {x['lines']:,} lines ({x['bytes'] / 1e6:,.1f} MB); "
                       f"one pass over the recordings holds {mix['events']:,} events on "
                       f"{mix['lines']:,} lines, "
                       f"{mix['packed_rows']} packed rows carrying {mix['events_in_packed_rows']:,} events, "
                       f"{mix['chunk_share']:.0%} streamed chunks")
    row.details.append(f"wall time: state {x['state_wall_s']:.2f} s, bare {x['bare_wall_s']:.2f} s; "
                       f"medians of {x['repeat']} interleaved runs; CPU = user + system from `wait4`, "
                       "peak = `VmHWM`")
    return row


def row_simulate(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 8 from ``bench_cli.run``: ``simulate`` scaling (n → 4n, and 4n → 16n in the full run)."""
    row = Row(8, "simulate scaling", "`simulate` of a 4n-turn vs an n-turn scenario (200 → 800 and 800 → "
              "3,200 in the full run; one prompt + one answer per turn, no transition, nothing archived): "
              "time and peak memory ratios",
              target="time ratio ≤ 4.5 at each size; memory linear (ratio ≤ 5)")
    if r is None or "simulate" not in r:
        _not_measured(row, "bench_cli", err)
        return row
    runs = [r["simulate"], *([r["simulate_large"]] if isinstance(r.get("simulate_large"), dict) else [])]
    last = runs[-1]
    row.ours = f"{last['large_s']:.2f} s, {_mb(last['large_peak_b'])} ({last['large_turns']} turns)"
    row.baseline = f"{last['small_s']:.2f} s, {_mb(last['small_peak_b'])} ({last['small_turns']} turns)"
    row.ratio = ", ".join(f"{y['small_turns']}→{y['large_turns']}: {y['time_ratio']:.2f}x time, "
                          f"{y['memory_ratio']:.1f}x memory" for y in runs)
    row.status = _status(all(y["time_ratio"] <= 4.5 and y["memory_ratio"] <= 5.0 for y in runs))
    for y in runs:
        collector = (f"; in the garbage collector: {_ms(y['small_gc_s'])} ({y['small_full_gc']} full "
                     f"collections) / {_ms(y['large_gc_s'])} ({y['large_full_gc']} full)"
                     if "small_gc_s" in y else "")
        row.details.append(f"{y['small_turns']} turns {y['small_s']:.2f} s, {y['large_turns']} turns "
                           f"{y['large_s']:.2f} s: {y['time_ratio']:.2f}x time, {y['memory_ratio']:.2f}x "
                           f"memory (tracemalloc peaks {_mb(y['small_peak_b'])} / {_mb(y['large_peak_b'])}); "
                           f"times are medians of {y['repeat']} interleaved runs{collector}")
    row.details.append("4x the turns: linear is ~4x, quadratic ~16x; memory is the tracemalloc peak of "
                       "one run each")
    return row


def row_startup(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 9 from ``bench_cli.run``: CLI start-up."""
    row = Row(9, "CLI start-up", "`fsm-stage --help` (the console script's code) vs `python -c pass`, "
              "wall time of fresh processes", target="≤ 10x `python -c pass`")
    if r is None or "startup" not in r:
        _not_measured(row, "bench_cli", err)
        return row
    x = r["startup"]
    row.ours, row.baseline = _ms(x["help_s"]), _ms(x["pass_s"])
    row.ratio = f"{x['ratio']:.1f}x"
    row.status = _status(x["ratio"] <= 10.0)
    row.details.append(f"medians of {x['repeat']} interleaved runs; `--help` loads {x['fsm_stage_modules']} "
                       f"fsm_stage modules ({x['modules']} modules in all): the command list comes from "
                       "a static table, no command module is imported")
    return row


def row_postgres(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 10 from ``bench_postgres.run``."""
    row = Row(10, "PostgreSQL store", "durable step on a throwaway PostgreSQL 15 cluster (fsync on): "
              "`PostgresLog.append` of a ~1 KB event + a second handle's `refresh()` vs LangGraph "
              "`PostgresSaver.put` + `get_tuple` of the same payload",
              target="≤ 1x LangGraph `PostgresSaver`")
    if r is None:
        row.details.append(f"bench_postgres: {err.splitlines()[0] if err else err}")
        if err and "smoke" in err:
            row.status = SKIPPED
        return row
    row.ours = _ms(r["fsm_step_median_s"])
    if "langgraph_step_median_s" in r:
        row.baseline = _ms(r["langgraph_step_median_s"])
        row.ratio = f"{r['ratio_vs_langgraph']:.2f}x"
        row.status = _status(r["ratio_vs_langgraph"] <= 1.0)
    else:
        row.details.append(f"LangGraph side not measured: {r.get('langgraph_error')}")
    for tp in r.get("throughput", []):
        row.details.append(f"{tp['workers']} worker process(es) appending to one session: "
                           f"{tp['events_per_s']:,.0f} events/s ({tp['events']:,} events)")
    row.details.append(f"{r['steps']} steps, medians; the issue sets no target for this row: "
                       "ours is \"no slower than LangGraph's own PostgreSQL checkpointer\"")
    return row


def row_review_fold(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 11 from ``bench_reviews.run``."""
    row = Row(11, "review fold", "`fsm-stage state --json` (in process) on a JSONL log of 8n reviewed "
              "transitions vs one of n (1,000 / 8,000 in the full run): linear is ~8x, a copy of every "
              "review per review event ~64x", target="≤ 10x")
    if r is None:
        row.details.append(f"bench_reviews: {err.splitlines()[0] if err else err}")
        return row
    row.ours = _ms(r["state_big_s"])
    row.baseline = _ms(r["state_small_s"])
    row.ratio = f"{r['state_ratio']:.1f}x"
    row.status = _status(r["state_ratio"] <= 10)
    row.details.append(f"{r['reviews_big']:,} vs {r['reviews_small']:,} reviews, medians")
    return row


def row_session_length(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 12 from ``bench_reviews.run``."""
    row = Row(12, "session length", "one reviewed transition (goto_stage → Approve → boundary flush, full "
              "shape, in memory) after 10,000 earlier ones vs after 100 in the same kind of session "
              "(interleaved windows)", target="ratio within 0.8–1.2")
    if r is None:
        row.details.append(f"bench_reviews: {err.splitlines()[0] if err else err}")
        return row
    row.ours = _us(r["long_s"])
    row.baseline = _us(r["short_s"])
    row.ratio = f"{r['length_ratio']:.2f}x"
    row.status = _status(0.8 <= r["length_ratio"] <= 1.2)
    row.details.append(f"after {r['long']:,} vs {r['short']:,} transitions ({r['events_long']:,} events), "
                       f"windows of {r['window']}, medians of the per-round ratios")
    return row


def row_observe(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 13 from ``bench_observe.run``."""
    row = Row(13, "observe", "`Session.append` of a step-shaped event mix with the observability hook "
              "(logging at WARNING, OpenTelemetry not loaded) vs the same append with a no-op hook",
              target="≤ 1.10x no hook")
    if r is None:
        row.details.append(f"bench_observe: {err.splitlines()[0] if err else err}")
        return row
    row.ours, row.baseline = _us(r["on_s"]), _us(r["off_s"])
    row.ratio, row.status = f"{r['ratio']:.2f}x", _status(r["ratio"] <= 1.10)
    if "proxy_ratio" in r:
        row.details.append(f"with `opentelemetry.trace` imported but no tracer provider configured: "
                           f"{_us(r['proxy_on_s'])} vs {_us(r['proxy_off_s'])} = {r['proxy_ratio']:.2f}x")
    else:
        row.details.append(f"OpenTelemetry side: {r.get('proxy')}")
    row.details.append(f"{r['n']:,} appends per side, {r['rounds']} interleaved rounds; medians")
    return row


def rows_turns(r: dict[str, Any] | None, err: str | None) -> list[Row]:
    """Rows 14-16 from ``bench_turns.run``."""
    long = Row(14, "long turn", "cost of one step with one `run_tool` after many calls already in the "
               "same turn (2,000 in the full run) vs after 100 (begin_step(copy_messages=False) → "
               "record_reply → run_tool → end_step, in-memory log)",
               target="≤ 1.2x (independent of the calls in the turn)")
    mid = Row(15, "mid-turn session", "bytes per live session once a turn is open (`start_turn` + "
              "`begin_step` logged its `request/header`: a ~2 KB system text and 8 tool specs), "
              "distinct ids, in-memory log; RSS of a process holding 10,000 of them",
              target="≤ 4 KB/session; 10,000 sessions ≤ 80 MiB RSS")
    imp = Row(16, "host import", "fresh `python -c \"from fsm_stage import load_config, open_log, "
              "open_session\"` vs `python -c pass`, wall time", target="≤ 120 ms")
    if r is None:
        for row in (long, mid, imp):
            row.details.append(f"bench_turns: {err}")
        return [long, mid, imp]
    x = r["long_turn"]
    long.ours = f"{_us(x['late_s'])} per step after {x['late_calls']:,} calls"
    long.baseline = f"{_us(x['early_s'])} after {x['early_calls']:,}"
    long.ratio = f"{x['ratio']:.2f}x"
    long.status = _status(x["ratio"] <= 1.2)
    means = (f" (means {_us(x['late_mean_s'])} and {_us(x['early_mean_s'])})"
             if "late_mean_s" in x else "")
    long.details.append(f"medians of {x['sample']} steps at each point, timed one by one and alternately "
                        f"on two sessions of one runtime{means}; the open turn is folded incrementally "
                        "(`OpenTurnFold`), so a step no longer re-reads the turn")
    c = r.get("long_turn_copies")
    if c is not None:
        long.details.append(
            f"with `begin_step()`'s default deep copies of the history (a host's mutable messages): "
            f"{_us(c['late_s'])} per step after {c['late_calls']:,} calls vs {_us(c['early_s'])} after "
            f"{c['early_calls']:,} ({c['ratio']:.2f}x, medians of {c['sample']}): the copy is O(history) "
            "per step, like the request body a host sends; the row takes the read-only view "
            "(`copy_messages=False`), as `Loop(copy_messages=False)` and the simulator do")
    m = r["midturn"]
    mid.ours = _bytes(m["midturn_b"])
    ok = m["midturn_b"] <= 4096
    rss = r.get("midturn_rss")
    if isinstance(rss, dict):
        mid.baseline = f"{_mb(rss['rss_b'])} RSS with {rss['sessions']:,} sessions"
        mid.ratio = f"{_mb(rss['added_b'])} added over an empty process"
        ok = ok and (rss["sessions"] < 10_000 or rss["rss_b"] <= 80 * 2**20)
        mid.details.append(f"peak RSS (`ru_maxrss`) of a fresh process with {rss['sessions']:,} mid-turn "
                           f"sessions {_mb(rss['rss_b'])}, with none {_mb(rss['empty_rss_b'])}")
    mid.status = _status(ok)
    mid.details.append(f"tracemalloc live bytes over {m['sessions']:,} sessions, per session; the runtime "
                       "(tools, sections) is shared and excluded, everything per session included")
    h = r["host_import"]
    imp.ours, imp.baseline = _ms(h["import_s"]), _ms(h["pass_s"])
    imp.ratio = f"{h['ratio']:.1f}x"
    imp.status = _status(h["import_s"] <= 0.120)
    imp.details.append(f"medians of {h['repeat']} interleaved fresh processes")
    if "classes_import_s" in h:
        imp.details.append("the older host import (`Runtime, StageController, StagedSession, load_config, "
                           f"open_log`; the classes load their modules): {_ms(h['classes_import_s'])}")
    return [long, mid, imp]


def row_pg_scaling(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 17 from ``bench_postgres.run``: distinct-session appends, 1 → 2 workers."""
    row = Row(17, "PostgreSQL workers", "events/s of 2 worker processes each appending to its own session "
              "vs 1 worker (fsync on; 4 and 8 workers as measured)", target="≥ 1.8x from 1 to 2 workers")
    if r is None or "distinct" not in r:
        row.details.append(f"bench_postgres: {err.splitlines()[0] if err else err}")
        if err and "smoke" in err:
            row.status = SKIPPED
        return row
    d = {x["workers"]: x for x in r["distinct"]}
    row.ours, row.baseline = f"{d[2]['events_per_s']:,.0f} ev/s (2)", f"{d[1]['events_per_s']:,.0f} ev/s (1)"
    row.ratio = f"{r['distinct_scaling_2']:.2f}x"
    row.status = _status(r["distinct_scaling_2"] >= 1.8)
    row.details.append("distinct sessions (the median run of each; 4 and 8 workers one run each): "
                       + ", ".join(f"{w} worker(s) {x['events_per_s']:,.0f} ev/s"
                                   for w, x in sorted(d.items())))
    if "round_ratios" in r:
        b, rr = r["bare_driver"], r["round_ratios"]
        row.details.append("1 → 2 workers, each round's own ratio (the row's ratio is their median): ours "
                           + ", ".join(f"{v:.2f}x" for v in rr["ours"]) + "; the driver's floor "
                           + ", ".join(f"{v:.2f}x" for v in rr["bare"]))
        row.details.append(
            "the driver's floor (the same one-row autocommit INSERT per event through plain psycopg, no "
            f"fsm_stage), in the same rounds: 1 worker {b[0]['events_per_s']:,.0f} ev/s, 2 workers "
            f"{b[1]['events_per_s']:,.0f} ev/s, scaling {r['bare_scaling_2']:.2f}x; at 2 workers fsm_stage "
            f"reaches {d[2]['events_per_s'] / b[1]['events_per_s']:.0%} of the floor's events/s (a client "
            "that spends more CPU per append scales better by this ratio, so compare the absolute figures)")
        row.details.append("the rounds alternate which side runs first and whether 1 or 2 workers run first; "
                           "every run: " + "; ".join(f"{k} {', '.join(f'{v:,.0f}' for v in vs)} ev/s"
                                                     for k, vs in r["distinct_rounds"].items()))
    row.details.append(f"{d[1]['events']:,} events per worker, timed from every worker connected to the "
                       "last append (the workers' interpreter exits are not timed)")
    return row


def row_pg_statements(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 18 from ``bench_postgres.run``: statements per reviewed step besides the appends."""
    row = Row(18, "PG statements per reviewed step", "SQL statements `PostgresLog` sends for one reviewed "
              "transition (goto_stage → Approve via scripted review → boundary flush), counted on its "
              "connection: the appends (INSERT batches) vs everything else (refreshes, locks)",
              target="≤ 3 besides the appends")
    if r is None or "statements" not in r:
        row.details.append(f"bench_postgres: {err.splitlines()[0] if err else err}")
        if err and "smoke" in err:
            row.status = SKIPPED
        return row
    x = r["statements"]
    row.ours = f"{x['other']:.0f} besides the appends"
    row.baseline = f"{x['appends']:.0f} appends"
    row.ratio = f"{x['total']:.0f} statements in all"
    row.status = _status(x["other"] <= 3)
    row.details.append(f"medians over {x['steps']} reviewed transitions on one session; the first step: "
                       f"{x['first_step']}")
    return row


def row_inbox_pg(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 19 from ``bench_inbox.run``: the inbox's queue page on PostgreSQL."""
    row = Row(19, "inbox queue on PostgreSQL", "`GET /` of the review inbox listing 1,000 open reviews "
              "across 1,000 sessions of a PostgreSQL database (cold: the first request of a new server; "
              "warm: nothing changed) vs the same page over 1,000 JSONL logs", target="< 1 s")
    if r is None or "postgres" not in r:
        why = err if r is None else r.get("postgres_error")
        row.details.append(f"bench_inbox: {why.splitlines()[0] if why else why}")
        if why and "smoke" in why:
            row.status = SKIPPED
        return row
    pg, js = r["postgres"], r["jsonl"]
    row.ours = f"cold {_ms(pg['cold_s'])}, warm {_ms(pg['warm_s'])}"
    row.baseline = f"JSONL cold {_ms(js['cold_s'])}, warm {_ms(js['warm_s'])}"
    row.ratio = f"{pg['cold_s'] / js['cold_s']:.2f}x JSONL (cold)"
    row.status = _status(max(pg["cold_s"], pg["warm_s"]) < 1.0)
    row.details.append(f"{r['sessions']:,} sessions, one open stage review each; through Starlette's "
                       "TestClient (rendering included); warm: median of 5. PostgreSQL reads only the review "
                       "rows of the sessions whose last seq moved, in one query (`inbox/_pg_queue.py`)")
    return row


def row_pg_open(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 20 from ``bench_postgres.run``: opening a long session vs a short one."""
    row = Row(20, "PG open", "`open_log` of an existing 10,000-event PostgreSQL session vs one of 100 events "
              "(a checkpointed open reads only the rows after the newest checkpoint)",
              target="≤ 2x (O(new events))")
    x = None if r is None else r.get("open")
    if x is None:
        row.details.append(f"bench_postgres: {err.splitlines()[0] if err else err}")
        row.status = SKIPPED if err and "smoke" in err else row.status
        return row
    row.ours = f"{_ms(x['big_s'])} ({x['sizes'][1]:,} events)"
    row.baseline = f"{_ms(x['small_s'])} ({x['sizes'][0]:,} events)"
    row.ratio = f"{x['ratio']:.2f}x"
    row.status = _status(x["ratio"] <= 2.0)
    row.details.append(f"medians of {x['repeat']} interleaved opens (connection included); the long session "
                       f"once open holds {x['big_events_held']:,} events, {_mb(x['big_bytes_held'])} "
                       f"({x['big_note']})")
    return row


# --- output ----------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    """The results as a Markdown table."""
    lines = ["| # | row | compares | fsm_stage | baseline | ratio | target | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.number} | {r.name} | {r.compares} | {r.ours} | {r.baseline} | {r.ratio} | "
                     f"{r.target} | {r.status} |")
    return "\n".join(lines)


def details(rows: list[Row]) -> str:
    """Per-row details as Markdown bullets."""
    out: list[str] = []
    for r in rows:
        if r.details:
            out.append(f"**{r.number}. {r.name}**\n")
            out.extend(f"- {d}" for d in r.details)
            out.append("")
    return "\n".join(out)


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
