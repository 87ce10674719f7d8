"""Replay (issue 11 item 9, done-when 1): a scenario that approves ``goto_stage`` and then stops
the turn, written with ``simulate --log``, reads back with ``state --json`` showing
``stage.pending``; ``scenario`` + ``simulate`` of that log reproduce it; and a new process
resuming the log applies the switch at its next step without asking anyone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from rig import Rig

from fsm_stage.cli import main
from fsm_stage.config import load_config_text
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import ScriptedReviewChannel

GRAPH = """\
name: reviewed
initial: explore
stages:
  - name: explore
    instruction: Look around.
  - name: implement
    instruction: Build it.
section: "Stage <<stage_current>>"
"""

SCENARIO = """\
description: approve goto_stage, then stop the turn
graph: g.yaml
session:
  id: s2
steps:
  - user: move on
  - model:
      calls:
        - tool: goto_stage
          args:
            stage: implement
            handoff: "# Handoff"
          review: approve
  - end_turn: aborted
"""


def _state(path: Path) -> dict[str, Any]:
    out = CliRunner().invoke(main, ["state", "--json", str(path)])
    assert out.exit_code == 0, out.output
    report: dict[str, Any] = json.loads(out.output)
    return report


def test_an_approved_unapplied_switch_replays_and_applies_in_a_new_process(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(GRAPH)
    (tmp_path / "sc.yaml").write_text(SCENARIO)
    first = tmp_path / "first.jsonl"
    ran = CliRunner().invoke(main, ["simulate", str(tmp_path / "sc.yaml"), "--log", str(first)])
    assert ran.exit_code == 0, ran.output
    assert _state(first)["stage"] == {"current": "explore", "pending": "implement", "source": "log",
                                      "at_last_header": "explore", "has_stage_prompt": True}
    back = tmp_path / "back.yaml"
    assert CliRunner().invoke(main, ["scenario", str(first), "--graph", str(tmp_path / "g.yaml"),
                                     "-o", str(back)]).exit_code == 0
    second = tmp_path / "second.jsonl"
    rerun = CliRunner().invoke(main, ["simulate", str(back), "--log", str(second)])
    assert rerun.exit_code == 0 and "expectations: 2 of 2 passed" in rerun.output, rerun.output
    assert _state(second)["stage"]["pending"] == "implement"
    config = load_config_text(GRAPH, "g.yaml").graph
    assert config is not None
    with JsonlLog(first) as log:
        review = ScriptedReviewChannel()  # would raise if asked: its queue is empty
        rig = Rig(log, review, graph_config=config)
        rig.open_turn()
        rig.step()
        assert rig.stage.current(rig.session) == "implement" and review.requests == []
    assert _state(first)["stage"]["pending"] is None
