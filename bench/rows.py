"""The rows of ``bench/results.md``: each ``row_*`` / ``rows_*`` turns one bench module's result
dict (or its error) into table rows with their targets and statuses; ``table`` and ``details``
render them. ``run.py`` calls the bench modules and writes the file.

A row without figures keeps the status ``missing``, or ``skipped`` when its part said why it did
not run (an error text starting ``skipped``: no recorded sessions, a PostgreSQL part in
``--smoke``).
"""

from __future__ import annotations

from typing import Any

import attrs

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

    def measured(self, ours: str, baseline: str, ratio: str, *, ok: bool) -> None:
        """Fill the row's figures and its status (``pass`` when ``ok``, else ``MISS``)."""
        self.ours, self.baseline, self.ratio, self.status = ours, baseline, ratio, _status(ok)


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
              "full shape, a distinct handoff per call, the call not logged, in-memory log and handoff "
              "store) vs one raw "
              "`transitions` trigger with one condition + one in-memory append",
              target="≤ 10x raw")
    if r is None:
        return _not_measured(row, "bench_transitions", err)
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
        return _not_measured(row, "bench_memory", err)
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


def _not_measured(row: Row, module: str, err: str | None) -> Row:
    """Say why ``row`` has no figures, in the first line of ``err`` (the whole error, traceback
    included, is in the results' raw numbers): ``skipped`` when the part said so (no recorded
    sessions, a PostgreSQL part in ``--smoke``), else it stays ``missing``. Returns ``row``."""
    row.details.append(f"{module}: {err.splitlines()[0] if err else err}")
    if err is not None and err.startswith("skipped"):
        row.status = SKIPPED
    return row


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
        return [_not_measured(row, "bench_log", err) for row in (reads, fold)]
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
        return [_not_measured(row, "bench_compile", err)]
    total = r["total_s"]
    row.ours = _ms(total)
    inter = r.get("interleaved")
    if isinstance(inter, dict):
        row.measured(_ms(inter["total_s"]),
                     _ms(inter["machine_s"]),
                     f"{inter['ratio']:,.2f}x",
                     ok=inter["ratio"] <= 2.5)
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
              "one reviewed transition (the call not logged) on a `JsonlLog` (every append fsynced) with a "
              "`LocalHandoffStore` (atomic, fsynced file + folder) vs one raw durable step (trigger + one "
              "fsynced JSON line); LangGraph `SqliteSaver.put` beside it", target="≤ 4x raw durable step")
    if r is None:
        return _not_measured(row, "bench_transitions", err)
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
        return _not_measured(row, "bench_cli", err if r is None else r.get("state_skipped", err))
    x = r["state"]
    at = "" if x["events"] >= 1_000_000 else f" (at {x['events']:,} events: no 1M log in this run)"
    row.measured(f"{x['state_cpu_s']:.2f} s CPU, {_mb(x['state_rss_b'])} peak",
                 f"{x['bare_cpu_s']:.2f} s CPU, {_mb(x['bare_rss_b'])} peak",
                 f"{x['cpu_ratio']:.2f}x CPU" + at,
                 ok=x["cpu_ratio"] <= 2.0 and x["state_rss_b"] <= 100e6)
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
        return _not_measured(row, "bench_cli", err)
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
        return _not_measured(row, "bench_cli", err)
    x = r["startup"]
    row.measured(_ms(x["help_s"]), _ms(x["pass_s"]), f"{x['ratio']:.1f}x", ok=x["ratio"] <= 10.0)
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
        return _not_measured(row, "bench_postgres", err)
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
    row.details.append(f"{r['steps']} steps, medians; one append, not a reviewed step: row 21 times a "
                       "reviewed step against LangGraph's checkpointer")
    return row


def row_review_fold(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 11 from ``bench_reviews.run``."""
    row = Row(11, "review fold", "`fsm-stage state --json` (in process) on a JSONL log of 8n reviewed "
              "transitions vs one of n (1,000 / 8,000 in the full run): linear is ~8x, a copy of every "
              "review per review event ~64x", target="≤ 10x")
    if r is None:
        return _not_measured(row, "bench_reviews", err)
    row.measured(_ms(r["state_big_s"]),
                 _ms(r["state_small_s"]),
                 f"{r['state_ratio']:.1f}x",
                 ok=r["state_ratio"] <= 10)
    row.details.append(f"{r['reviews_big']:,} vs {r['reviews_small']:,} reviews, medians")
    return row


def row_session_length(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 12 from ``bench_reviews.run``."""
    row = Row(12, "session length", "one reviewed transition (goto_stage → Approve → boundary flush, full "
              "shape, in memory) after 10,000 earlier ones vs after 100 in the same kind of session "
              "(interleaved windows)", target="ratio within 0.8–1.2")
    if r is None:
        return _not_measured(row, "bench_reviews", err)
    row.measured(_us(r["long_s"]),
                 _us(r["short_s"]),
                 f"{r['length_ratio']:.2f}x",
                 ok=0.8 <= r["length_ratio"] <= 1.2)
    row.details.append(f"after {r['long']:,} vs {r['short']:,} transitions ({r['events_long']:,} events), "
                       f"windows of {r['window']}, medians of the per-round ratios")
    return row


def row_observe(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 13 from ``bench_observe.run``."""
    row = Row(13, "observe", "`Session.append` of a step-shaped event mix with the observability hook "
              "(logging at WARNING, OpenTelemetry not loaded) vs the same append with a no-op hook",
              target="≤ 1.10x no hook")
    if r is None:
        return _not_measured(row, "bench_observe", err)
    row.measured(_us(r["on_s"]), _us(r["off_s"]), f"{r['ratio']:.2f}x", ok=r["ratio"] <= 1.10)
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
        return [_not_measured(row, "bench_turns", err) for row in (long, mid, imp)]
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
        return _not_measured(row, "bench_postgres", err)
    d = {x["workers"]: x for x in r["distinct"]}
    row.measured(f"{d[2]['events_per_s']:,.0f} ev/s (2)",
                 f"{d[1]['events_per_s']:,.0f} ev/s (1)",
                 f"{r['distinct_scaling_2']:.2f}x",
                 ok=r["distinct_scaling_2"] >= 1.8)
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
        return _not_measured(row, "bench_postgres", err)
    x = r["statements"]
    row.measured(f"{x['other']:.0f} besides the appends",
                 f"{x['appends']:.0f} appends",
                 f"{x['total']:.0f} statements in all",
                 ok=x["other"] <= 3)
    row.details.append(f"medians over {x['steps']} reviewed transitions on one session; the first step: "
                       f"{x['first_step']}")
    return row


def row_inbox_pg(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 19 from ``bench_inbox.run``: the inbox's queue page on PostgreSQL."""
    row = Row(19, "inbox queue on PostgreSQL", "`GET /` of the review inbox listing 1,000 open reviews "
              "across 1,000 sessions of a PostgreSQL database (cold: the first request of a new server; "
              "warm: nothing changed) vs the same page over 1,000 JSONL logs", target="< 1 s")
    if r is None or "postgres" not in r:
        return _not_measured(row, "bench_inbox", err if r is None else r.get("postgres_error"))
    pg, js = r["postgres"], r["jsonl"]
    row.measured(f"cold {_ms(pg['cold_s'])}, warm {_ms(pg['warm_s'])}",
                 f"JSONL cold {_ms(js['cold_s'])}, warm {_ms(js['warm_s'])}",
                 f"{pg['cold_s'] / js['cold_s']:.2f}x JSONL (cold)",
                 ok=max(pg["cold_s"], pg["warm_s"]) < 1.0)
    row.details.append(f"{r['sessions']:,} sessions, one open stage review each; through Starlette's "
                       "TestClient (rendering included); warm: median of 5. PostgreSQL reads only the review "
                       "rows of the sessions whose last seq moved, in one query, and their headers in a "
                       "second (`inbox/_pg_queue.py`)")
    return row


def row_pg_open(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 20 from ``bench_postgres.run``: opening a long session vs a short one."""
    row = Row(20, "PG open", "`open_log` of an existing 10,000-event PostgreSQL session vs one of 100 events "
              "(a checkpointed open reads only the rows after the newest checkpoint)",
              target="≤ 2x (O(new events))")
    x = None if r is None else r.get("open")
    if x is None:
        return _not_measured(row, "bench_postgres", err)
    row.measured(f"{_ms(x['big_s'])} ({x['sizes'][1]:,} events)",
                 f"{_ms(x['small_s'])} ({x['sizes'][0]:,} events)",
                 f"{x['ratio']:.2f}x",
                 ok=x["ratio"] <= 2.0)
    row.details.append(f"medians of {x['repeat']} interleaved opens (connection included); the long session "
                       f"once open holds {x['big_events_held']:,} events, {_mb(x['big_bytes_held'])} "
                       f"({x['big_note']})")
    return row


def row_pg_reviewed(r: dict[str, Any] | None, err: str | None) -> Row:
    """Row 21 from ``bench_postgres.run``: a reviewed step vs LangGraph's checkpointer."""
    row = Row(21, "PG reviewed step", "one reviewed transition on a throwaway PostgreSQL cluster (fsync on; "
              "goto_stage with its call logged → Approve via scripted review → boundary flush) vs LangGraph "
              "`PostgresSaver.put` + `get_tuple` of a checkpoint holding a 20-message conversation",
              target="≤ 1x LangGraph `PostgresSaver`")
    x = None if r is None else r.get("reviewed_vs_langgraph")
    if x is None:
        return _not_measured(row, "bench_postgres", err)
    if "error" in x:
        row.details.append(f"not measured: {x['error']}")
        return row
    row.measured(_ms(x["ours_s"]), _ms(x["langgraph_s"]), f"{x['ratio']:.2f}x", ok=x["ratio"] <= 1.0)
    row.details.append(f"medians of {x['steps']} steps, one of each side in turn; LangGraph's checkpoint "
                       f"holds {x['messages']} messages of ~200 characters; ours commits the call with the "
                       "review request, the answer, the result, and the transition with its redemption "
                       "(row 18); LangGraph commits one checkpoint and reads it back")
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
