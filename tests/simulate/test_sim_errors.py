"""User mistakes in scenarios and their runs: one line each, no Python internals, every bad file
reported (findings 3, 10, 11, 12)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_helpers import SCENARIOS, graph_ref, run_text

from fsm_stage.cli import main
from fsm_stage.scenario import ScenarioError, load_scenario_text
from fsm_stage.simulate import render_human

FW = graph_ref("feature-work.yaml")


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, "s.yaml")
    return [str(p).split(": ", 1)[1] for p in info.value.details]


def test_binary_scenario_is_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "bin.yaml"
    scenario.write_bytes(b"graph: x\n\x00\xff\xfe steps")
    code, out, err = _invoke("simulate", str(scenario))
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and "binary file" in err


def test_session_cwd_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pub.yaml").write_text("not a folder", encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"graph: {FW}\nsession: {{cwd: pub.yaml}}\nsteps:\n  - user: hi\n  - model: ok\n",
                        encoding="utf-8")
    code, _, err = _invoke("simulate", str(scenario))
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1
    assert "session.cwd 'pub.yaml': not a folder" in err


def test_session_cwd_with_a_nul_byte_is_a_positioned_problem() -> None:
    assert _problems(f'graph: {FW}\nsession: {{cwd: "a\\0b"}}\nsteps: [{{user: hi}}, {{model: ok}}]\n') == [
        "session.cwd: a folder name cannot contain a NUL byte"]


def test_python_internals_never_leak_into_messages() -> None:
    """Finding 12: null / wrong-typed values get messages in the scenario's own terms."""
    head = f"graph: {FW}\n"
    assert _problems(head + "session:\nsteps: [{user: hi}, {model: ok}]\n") == [
        "session: expected a mapping {id, cwd, subagent}, got null"]
    assert _problems(head + "system: [5]\nsteps: [{user: hi}, {model: ok}]\n") == [
        "system[0]: expected a mapping {name, order, text}, got 5"]
    assert _problems(head + "steps: [{user: hi}, {model: {calls: [null]}}]\n") == [
        "steps[1].model.calls[0]: expected a mapping {tool, args, review, result, error, id}, got null"]
    assert _problems(head + "steps:\n  - user: hi\n  - model:\n      calls:\n"
                            "        - {tool: goto_stage, args: {stage: a}, review: {feedback: }}\n") == [
        "steps[1].model.calls[0].review: {feedback: TEXT} needs the feedback text, got null"]


def test_every_bad_scenario_file_is_reported(tmp_path: Path) -> None:
    """Finding 10: all the files are parsed and every file's mistakes reported before any runs."""
    bad1, bad2 = tmp_path / "b1.yaml", tmp_path / "b2.yaml"
    bad1.write_text(f"graph: {FW}\nsteps: [{{usr: hi}}]\n", encoding="utf-8")
    bad2.write_text(f"graph: {FW}\nsteps: [{{user: hi}}, {{model: ok}}, {{end_turn: later}}]\n",
                    encoding="utf-8")
    code, out, err = _invoke("simulate", str(SCENARIOS / "subagent.yaml"), str(bad1), str(bad2),
                             str(tmp_path / "missing.yaml"))
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 3 and "Traceback" not in err
    assert lines[0].startswith(f"{bad1}:2:10: steps[0].usr: unknown step kind")
    assert lines[1].startswith(f"{bad2}:2:35: steps[2].end_turn: expected completed or aborted")
    assert "missing.yaml: cannot read scenario: no such file" in lines[2]


def test_next_request_check_after_the_last_model_step_counts_as_one_failed_check(tmp_path: Path) -> None:
    """Finding 11: it was reported as `-1 of 0 passed`."""
    result = run_text(f"graph: {FW}\nsteps:\n  - user: hi\n  - model: ok\n"
                      "  - expect: {next_request: {contains: [x]}}\n", tmp_path)
    assert [f.check for f in result.failures] == ["next_request"]
    assert render_human(result).splitlines()[-3].endswith("expectations: 0 of 1 passed")
