"""Scenario files go through the config loader's positioned-problem machinery
(``ProblemReport`` / ``positioned_problems``): problems print like a stage graph's, and session
ids of any length are safe (the handoff writer's ``session_segment`` names their folders)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import graph_ref, invoke, run_text

from fsm_stage.errors import ConfigError
from fsm_stage.handoff import MAX_SEGMENT_LENGTH, session_segment
from fsm_stage.scenario import ModelStep, load_scenario_text

FW = graph_ref("feature-work.yaml")
# no min_handoff_tokens: every model transition is full, so it writes a handoff document
FULL_GRAPH = """stages:
  - {name: explore, instruction: Read.}
  - {name: implement, instruction: Write.}
section: "Stage << stage_current >>; next: << stage_targets >>."
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
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
    with pytest.raises(ConfigError) as info:
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
    step = sc.steps[1]
    assert isinstance(step, ModelStep)
    call = step.calls[0]
    assert (call.review, call.id, call.result) == (None, None, "ok")


@pytest.mark.parametrize("length", [MAX_SEGMENT_LENGTH, MAX_SEGMENT_LENGTH + 1, 300])
def test_session_ids_of_any_length_run_and_get_a_bounded_handoff_folder(tmp_path: Path, length: int) -> None:
    """Session ids are not length-limited: an id longer than MAX_SEGMENT_LENGTH gets the handoff
    writer's hashed segment (so no ENAMETOOLONG), one up to it is used as it is."""
    (tmp_path / "g.yaml").write_text(FULL_GRAPH, encoding="utf-8")
    sid = "s" * length
    result = run_text(f"graph: g.yaml\nsession: {{id: {sid}}}\nsteps:\n  - user: hi\n  - model:\n"
                      "      calls: [{tool: goto_stage, args: {stage: implement, handoff: '# h'}, "
                      "review: approve}]\n  - model: ok\n  - expect: {handoff_exists: [implement]}\n",
                      tmp_path)
    assert result.failures == () or list(result.failures) == []
    assert result.checks == 1
    folder = session_segment(sid)
    assert len(folder) <= MAX_SEGMENT_LENGTH and (folder == sid) == (length <= MAX_SEGMENT_LENGTH)
    assert (tmp_path / "work" / "handoff" / folder / "implement.md").read_text(encoding="utf-8")


def test_several_scenarios_with_cwd_get_one_safe_folder_per_session(tmp_path: Path) -> None:
    """`--cwd DIR` with several scenarios: the per-session subfolder is the session segment, so
    an id with `..` or `/` stays inside DIR and a 300-character id does not fail the run."""
    long_id = "x" * 300
    paths = []
    for name, sid in (("a.yaml", "../escaped"), ("b.yaml", long_id)):
        path = tmp_path / name
        path.write_text(f"graph: {FW}\nsession: {{id: '{sid}'}}\nsteps: [{{user: hi}}, {{model: ok}}]\n",
                        encoding="utf-8")
        paths.append(str(path))
    code, out, err = invoke("simulate", *paths, "--cwd", str(tmp_path / "out"))
    assert code == 0, err
    assert out.rstrip().endswith("2 of 2 scenarios passed")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [session_segment("../escaped"), session_segment(long_id)])
    assert not (tmp_path / "escaped").exists()
