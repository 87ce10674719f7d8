"""Smoke test for the benchmark harness (issue 7): it runs end to end on tiny sizes.

No timing assertions: the numbers of a smoke run are meaningless. These tests only make sure
``bench/run.py`` keeps working as the library changes (every row present, results file
written with the machine noted, missing parts reported instead of crashing).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def run_mod() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run_under_test", BENCH / "run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_run_prints_every_row_and_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", "--output", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    numbers = list(range(1, 22))  # 20: PostgreSQL open, 21: a reviewed step on PostgreSQL
    assert [r.split("|")[1].strip() for r in rows] == [str(n) for n in numbers]
    for r in rows:  # every row states a target and an outcome
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert cells[6], r
        assert cells[7] in {"pass", "MISS", "missing", "skipped"}, r
    # the PostgreSQL row says why it did not run in smoke mode
    assert "skipped in --smoke" in proc.stdout
    for n in numbers:  # every target is printed with its status
        assert f"target {n} " in proc.stderr
    text = out.read_text(encoding="utf-8")
    for key in ("CPU", "cores", "Python", "transitions", "date (UTC)"):
        assert f"| {key}" in text
    assert "## Raw numbers" in text
    # the baselines never depend on other helpers' code: they are always measured
    row3 = next(r for r in rows if r.split("|")[1].strip() == "3")
    assert "µs" in row3.split("|")[5]


def test_missing_bench_module_is_reported_not_raised(run_mod: ModuleType) -> None:
    result, err, _ = run_mod.call_bench("bench_does_not_exist", quick=True, smoke=False)
    assert result is None
    assert "not landed" in err


def test_row_status_follows_the_targets(run_mod: ModuleType) -> None:
    """The pass/miss logic compares the measured ratio with the stated target."""
    base = {"raw_s": 10e-6, "psm_s": 100e-6, "stages": 100, "n": 10, "repeat": 1, "missing": {}}
    assert run_mod.row_transitions({**base, "reviewed_s": 99e-6}, None).status == "pass"
    slow = run_mod.row_transitions({**base, "reviewed_s": 105e-6}, None)
    assert (slow.status, slow.ratio) == ("MISS", "10.5x")
    absent = run_mod.row_transitions({**base, "missing": {"reviewed": "not landed"}}, None)
    assert absent.status == "missing"

    mem = {"add_model_default_b": 144_000.0, "add_model_noauto_b": 85_000.0, "psm_b": 1e6,
           "psm_sessions": 3, "noauto_sessions": 10, "sessions": 10, "stages": 10,
           "missing": {}}
    # decided on the whole live session, not on the cursor
    assert run_mod.row_memory({**mem, "cursor_b": 40.0, "live_session_b": 900.0}, None).status == "pass"
    assert run_mod.row_memory({**mem, "cursor_b": 40.0, "live_session_b": 1500.0}, None).status == "MISS"

    turns = {"long_turn": {"early_calls": 100, "late_calls": 2000, "sample": 10, "early_s": 1e-3,
                           "late_s": 1.15e-3, "ratio": 1.15},
             "midturn": {"sessions": 10, "midturn_b": 3900.0},
             "host_import": {"import_s": 0.1, "pass_s": 0.02, "ratio": 5.0, "repeat": 1},
             "midturn_rss": {"sessions": 10_000, "rss_b": 90 * 2**20, "empty_rss_b": 40 * 2**20,
                             "added_b": 50 * 2**20}}
    long, mid, imp = run_mod.rows_turns(turns, None)
    assert (long.status, mid.status, imp.status) == ("pass", "MISS", "pass")  # 90 MiB > 80 MiB
    turns["long_turn"] = {**turns["long_turn"], "late_s": 1.3e-3, "ratio": 1.3}
    turns["midturn_rss"] = {**turns["midturn_rss"], "rss_b": 70 * 2**20}
    long, mid, _ = run_mod.rows_turns(turns, None)
    assert (long.status, mid.status) == ("MISS", "pass")
    scaling = {"distinct": [{"workers": 1, "events": 2_000, "events_per_s": 100.0},
                            {"workers": 2, "events": 4_000, "events_per_s": 170.0}],
               "distinct_scaling_2": 1.7}
    assert run_mod.row_pg_scaling(scaling, None).status == "MISS"
    assert run_mod.row_pg_scaling({**scaling, "distinct_scaling_2": 1.85}, None).status == "pass"
    counted = {"statements": {"steps": 5, "appends": 5.0, "other": 4.0, "total": 9.0, "first_step": {}}}
    assert run_mod.row_pg_statements(counted, None).status == "MISS"
    counted["statements"] = {**counted["statements"], "other": 3.0, "total": 8.0}
    assert run_mod.row_pg_statements(counted, None).status == "pass"
    assert run_mod.row_pg_statements(None, "skipped in --smoke (…)").status == "skipped"
    versus = {"steps": 10, "messages": 20, "ours_s": 2e-3, "langgraph_s": 1e-3, "ratio": 2.0}
    slow_pg = run_mod.row_pg_reviewed({"reviewed_vs_langgraph": versus}, None)
    assert (slow_pg.status, slow_pg.ratio) == ("MISS", "2.00x")
    fast = {**versus, "ours_s": 0.9e-3, "ratio": 0.9}
    assert run_mod.row_pg_reviewed({"reviewed_vs_langgraph": fast}, None).status == "pass"
    no_langgraph = run_mod.row_pg_reviewed({"reviewed_vs_langgraph": {"error": "not installed"}}, None)
    assert no_langgraph.status == "missing" and "not installed" in no_langgraph.details[0]
    assert run_mod.row_pg_reviewed(None, "skipped in --smoke (…)").status == "skipped"


def test_profile_covers_the_reviewed_transition(run_mod: ModuleType) -> None:
    """``--profile 3`` profiles the real reviewed path (tool, review, flush), not a stand-in."""
    text = run_mod.profile(3, top=60)
    for name in ("goto_stage", "on_pre_step", "fire"):
        assert name in text


def test_rows_without_recorded_sessions_are_skipped_and_say_why(run_mod: ModuleType, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows 1, 2 and 7 run on the recorded DSH sessions: without them they are ``skipped``
    with the folder to set (not ``missing``, which means a library is not installed), and
    rows 8-9, which need no recording, are still measured."""
    monkeypatch.setenv("FSM_STAGE_SHARED", str(tmp_path))
    monkeypatch.syspath_prepend(str(BENCH))
    for name in ("realmix", "bench_log"):
        sys.modules.pop(name, None)
    result, err, _ = run_mod.call_bench("bench_log", quick=False, smoke=True)
    assert result is None and err.startswith("skipped: no recorded DSH sessions at ")
    assert "FSM_STAGE_SHARED" in err
    assert [row.status for row in run_mod.rows_log(None, err)] == ["skipped", "skipped"]
    import bench_cli

    monkeypatch.setattr(bench_cli, "simulate_scaling", lambda *a: {"stub": True})
    monkeypatch.setattr(bench_cli, "startup", lambda *a: {"stub": True})
    cli = bench_cli.run(smoke=True)
    assert cli["state_skipped"].startswith("skipped: no recorded DSH sessions")
    assert "startup" in cli and "simulate" in cli
    state = run_mod.row_state(cli, None)
    assert state.status == "skipped" and "FSM_STAGE_SHARED" in state.details[0]
    assert run_mod.row_state(None, "failed: ValueError: x").status == "missing"
