"""Scenario files go through the config loader's positioned-problem machinery
(``ProblemReport`` / ``positioned_problems``): problems print like a stage graph's."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import graph_ref, invoke

from fsm_stage.errors import ConfigError
from fsm_stage.scenario import ScenarioError, load_scenario_text

FW = graph_ref("feature-work.yaml")


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "s.yaml")
    return info.value.problems


def test_a_bad_scenario_prints_bare_positioned_lines_like_a_bad_graph(tmp_path: Path) -> None:
    """One bad scenario: each problem a bare `PATH:LINE:COLUMN: KEY: message` line (no
    `fsm-stage:` prefix, as `validate` prints a graph's), exit 1, nothing run."""
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(f"graph: {FW}\nsession: {{subagent: 2}}\nsteps:\n  - user: ''\n  - model: ok\n",
                        encoding="utf-8")
    code, out, err = invoke("simulate", str(scenario), "--cwd", str(tmp_path / "w"))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{scenario}:2:21: session.subagent: expected true or false, got a number (2)",
        f"{scenario}:4:11: steps[0].user: expected the non-empty prompt text",
    ]
    assert not (tmp_path / "w").exists()


def test_scenario_error_is_a_config_error_with_structured_details() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(f"graph: {FW}\nsteps: [{{bogus: 1}}]\n", "s.yaml")
    err = info.value
    assert isinstance(err, ConfigError)
    assert [(p.path, p.line, p.column, p.key) for p in err.details] == [("s.yaml", 2, 10, "steps[0].bogus")]
    assert err.problems == [str(p) for p in err.details] == str(err).splitlines()


def test_yaml_the_config_loader_refuses_is_refused_in_scenarios_too() -> None:
    """Duplicate keys and tags are positioned problems worded as in graph files."""
    dup = _problems(f"graph: {FW}\nsteps: [{{user: hi}}]\nsteps: [{{user: bye}}]\n")
    assert len(dup) == 1
    assert dup[0].startswith('s.yaml:3:1: steps: YAML syntax error: found duplicate key "steps"')
    assert _problems(f"graph: {FW}\nsteps: [{{user: !env hi}}, {{model: ok}}]\n") == [
        "s.yaml:2:16: steps[0].user: has the YAML tag !env; fsm_stage knows no tags, remove it"]


def test_null_optional_call_fields_still_mean_not_given() -> None:
    """The shared strict converter refuses null for optional fields; scenarios keep reading it as
    "not given" (`review: null`, `id: null`), as before the switch."""
    sc = load_scenario_text(f"graph: {FW}\nsteps:\n  - user: hi\n  - model:\n      calls:\n"
                            "        - {tool: read_file, result: ok, review: null, id: null}\n", "s.yaml")
    call = sc.steps[1].calls[0]  # type: ignore[union-attr]
    assert (call.review, call.id, call.result) == (None, None, "ok")
