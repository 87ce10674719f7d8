"""Paths and small helpers shared by the simulator tests."""

from __future__ import annotations

from pathlib import Path

import shared_data
from click.testing import CliRunner

from fsm_stage.cli import main
from fsm_stage.scenario import load_scenario_text
from fsm_stage.simulate import SimulationResult, simulate

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "stage_graphs"
SCENARIOS = GRAPHS / "scenarios"
SHIPPED = sorted(SCENARIOS.glob("*.yaml"))
DSH_SESSIONS = shared_data.DSH_SESSIONS
PLAN_REVIEW_LOG = shared_data.PLAN_REVIEW_LOG


def run_text(text: str, tmp_path: Path, name: str = "s.yaml") -> SimulationResult:
    """Write scenario ``text`` to ``tmp_path/name`` (``graph:`` paths are relative to it) and run it
    with ``tmp_path/work`` as the session cwd."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return simulate(load_scenario_text(text, str(path)), cwd=tmp_path / "work")


def graph_ref(name: str) -> str:
    """An absolute ``graph:`` value for a shipped graph."""
    return str(GRAPHS / name)


def invoke(*args: str) -> tuple[int, str, str]:
    """Run ``fsm-stage ARGS`` in-process: ``(exit code, stdout, stderr)``."""
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr
