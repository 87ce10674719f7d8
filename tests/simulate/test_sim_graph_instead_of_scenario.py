"""``fsm-stage simulate GRAPH`` (a stage graph where a scenario belongs) is one line saying so,
not one "unknown key" line per graph key."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from fsm_stage.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_a_stage_graph_passed_as_a_scenario_is_one_line() -> None:
    res = CliRunner().invoke(main, ["simulate", str(REPO / "stage_graphs" / "feature-work.yaml")])
    assert res.exit_code == 1
    assert res.stderr.count("\n") == 1 and "this is a stage graph, not a scenario" in res.stderr
    assert "unknown key" not in res.stderr


def test_a_broken_scenario_still_lists_its_problems(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("graph: g.yaml\nsteps: []\nbogus: 1\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["simulate", str(bad)])
    assert res.exit_code == 1 and "stage graph" not in res.stderr and "bogus" in res.stderr
