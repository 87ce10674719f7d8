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


#: The steps of a scenario whose first goto_stage (to ``build``, call id ``call_goto``) waits on a
#: suspended review (under ``steps:``; answer it with an ``answer`` step, then ``resume: true``).
SUSPENDED_GOTO = """\
  - user: Start.
  - model:
      calls:
        - tool: goto_stage
          id: call_goto
          args: {stage: build, handoff: "# Handoff\\\\n\\\\nBuild it."}
          review: suspend
"""


def record_and_replay(tmp_path: Path, scenario: Path, graph: Path) -> tuple[Path, Path, str]:
    """Simulate ``scenario`` (its log ``rec.jsonl``, cwd ``w1``), turn the log back into a
    scenario with ``fsm-stage scenario --graph graph`` and simulate that (``replayed.jsonl``,
    cwd ``w2``); each must pass. Returns both logs and the written scenario's text."""
    log = tmp_path / "rec.jsonl"
    code, out, err = invoke("simulate", str(scenario), "--log", str(log), "--cwd", str(tmp_path / "w1"))
    assert code == 0, out + err
    replay = tmp_path / "replay.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(graph), "-o", str(replay))
    assert code == 0, err
    log2 = tmp_path / "replayed.jsonl"
    code, out, err = invoke("simulate", str(replay), "--log", str(log2), "--cwd", str(tmp_path / "w2"))
    assert code == 0, out + err
    return log, log2, replay.read_text(encoding="utf-8")

#: A graph's stages design ⇄ build (add keys of build's below it).
DESIGN_BUILD = """\
stages:
  - name: design
    instruction: Design.
    targets: [build]
  - name: build
    instruction: Build.
    targets: [design]
"""
