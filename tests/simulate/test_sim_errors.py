"""User mistakes in scenarios and their runs: one line each, no Python internals, every bad file
reported."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import SCENARIOS, graph_ref, invoke, run_text

from fsm_stage.errors import ConfigError
from fsm_stage.scenario import load_scenario_text
from fsm_stage.simulate import render_human

FW = graph_ref("feature-work.yaml")


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_scenario_text(text, "s.yaml")
    return [str(p).split(": ", 1)[1] for p in info.value.details]


def test_binary_scenario_is_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "bin.yaml"
    scenario.write_bytes(b"graph: x\n\x00\xff\xfe steps")
    code, out, err = invoke("simulate", str(scenario))
    assert code == 1 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and "binary file" in err


def test_session_cwd_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pub.yaml").write_text("not a folder", encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"graph: {FW}\nsession: {{cwd: pub.yaml}}\nsteps:\n  - user: hi\n  - model: ok\n",
                        encoding="utf-8")
    code, _, err = invoke("simulate", str(scenario))
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1
    assert "session.cwd 'pub.yaml': not a folder" in err


def test_session_cwd_with_a_nul_byte_is_a_positioned_problem() -> None:
    assert _problems(f'graph: {FW}\nsession: {{cwd: "a\\0b"}}\nsteps: [{{user: hi}}, {{model: ok}}]\n') == [
        "session.cwd: a folder name cannot contain a NUL byte"]


def test_python_internals_never_leak_into_messages() -> None:
    """Null / wrong-typed values get messages in the scenario's own terms."""
    head = f"graph: {FW}\n"
    assert _problems(head + "session:\nsteps: [{user: hi}, {model: ok}]\n") == [
        "session: is null; expected a mapping {id, cwd, subagent, parent}"]
    assert _problems(head + "system: [5]\nsteps: [{user: hi}, {model: ok}]\n") == [
        "system[0]: expected a mapping {name, order, text}, got a number (5)"]
    assert _problems(head + "steps: [{user: hi}, {model: {calls: [null]}}]\n") == [
        "steps[1].model.calls[0]: is null; expected a mapping {tool, args, review, result, error, id}"]
    assert _problems(head + "steps:\n  - user: hi\n  - model:\n      calls:\n"
                            "        - {tool: goto_stage, args: {stage: a}, review: {feedback: }}\n") == [
        "steps[1].model.calls[0].review: {feedback: TEXT} needs the feedback text, got null"]


def test_every_bad_scenario_file_is_reported(tmp_path: Path) -> None:
    """All the files are parsed and every file's mistakes reported before any runs."""
    bad1, bad2 = tmp_path / "b1.yaml", tmp_path / "b2.yaml"
    bad1.write_text(f"graph: {FW}\nsteps: [{{usr: hi}}]\n", encoding="utf-8")
    bad2.write_text(f"graph: {FW}\nsteps: [{{user: hi}}, {{model: ok}}, {{end_turn: later}}]\n",
                    encoding="utf-8")
    code, out, err = invoke("simulate", str(SCENARIOS / "subagent.yaml"), str(bad1), str(bad2),
                             str(tmp_path / "missing.yaml"))
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 3 and "Traceback" not in err
    assert lines[0].startswith(f"{bad1}:2:10: steps[0].usr: unknown step kind")
    assert lines[1].startswith(f"{bad2}:2:45: steps[2].end_turn: expected completed, aborted or blocked")
    assert "missing.yaml: cannot read scenario: no such file" in lines[2]


def test_next_request_check_after_the_last_model_step_counts_as_one_failed_check(tmp_path: Path) -> None:
    """It is one failed check (`0 of 1 passed`), not `-1 of 0 passed`."""
    result = run_text(f"graph: {FW}\nsteps:\n  - user: hi\n  - model: ok\n"
                      "  - expect: {next_request: {contains: [x]}}\n", tmp_path)
    assert [f.check for f in result.failures] == ["next_request"]
    assert render_human(result).splitlines()[-3].endswith("expectations: 0 of 1 passed")


def test_scenario_data_that_would_be_ignored_is_refused() -> None:
    """A `result` on a call its reviewer refuses, `result`/`error` on a tool fsm_stage
    runs itself, `error` without the failure text, duplicate call ids, duplicate or reserved or
    blank system sections."""
    head = f"graph: {FW}\n"
    call = "steps:\n  - user: hi\n  - model:\n      calls:\n"
    assert _problems(head + call + "        - {tool: read_file, result: ok, review: keep}\n") == [
        "steps[1].model.calls[0].result: a call its reviewer does not approve (keep) never runs; "
        "remove `result`"]
    assert _problems(head + call + "        - {tool: read_file, error: true, review: dismiss}\n") == [
        "steps[1].model.calls[0].error: a call its reviewer does not approve (dismiss) never runs; "
        "remove `error`"]
    assert _problems(head + call + "        - {tool: goto_stage, args: {stage: verify}, result: ok}\n") == [
        "steps[1].model.calls[0].result: goto_stage is run by fsm_stage; `result`/`error` only "
        "answer your own tools"]
    assert _problems(head + call + "        - {tool: read_file, error: true}\n") == [
        "steps[1].model.calls[0].error: `error: true` returns the `result` text as the tool's "
        "failure; add `result`"]
    assert _problems(head + call + "        - {tool: read_file, result: a, id: c1}\n"
                                   "        - {tool: read_file, result: b, id: c1}\n") == [
        "steps[1].model.calls[1].id: call id 'c1' is already used by steps[1].model.calls[0]"]
    assert _problems(head + "system:\n  - {name: host, order: 0, text: a}\n"
                            "  - {name: host, order: 1, text: b}\n"
                            "  - {name: plan:policy, order: 50, text: c}\n"
                            "  - {name: extra, order: 2, text: ' '}\n"
                            "steps: [{user: hi}, {model: ok}]\n") == [
        "system[1].name: section name 'host' is already used by system[0]",
        "system[2].name: 'plan:policy' is plan mode's section; pick another name",
        "system[3].text: a system section needs non-blank text"]


def test_names_the_graph_does_not_know_are_refused_before_the_run(tmp_path: Path) -> None:
    """Suggestion: `expect` stages and eligibility predicates are checked against the graph that
    runs before any step runs, all at once."""
    from fsm_stage.simulate import SimulationError

    with pytest.raises(SimulationError) as info:
        run_text(f"""graph: {FW}
steps:
  - user: hi
  - expect: {{stage: implemnt, pending_stage: verfy, handoff_exists: [nope]}}
  - model: ok
  - eligible: {{test_written: true}}
""", tmp_path)
    lines = str(info.value).splitlines()
    assert len(lines) == 4
    assert lines[0].endswith("s.yaml:4:5: expect stage: 'implemnt' is not a stage of "
                             f"{FW} (explore, implement, verify)")
    assert "expect pending_stage: 'verfy' is not a stage" in lines[1]
    assert "expect handoff_exists: 'nope' is not a stage" in lines[2]
    assert lines[3].endswith("s.yaml:6:5: unknown eligibility predicate(s) test_written; this graph "
                             "knows guidance, tests_written")
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())


def test_a_review_answer_nobody_asked_for_is_a_warning(tmp_path: Path) -> None:
    """A refused goto_stage asks no review; its scripted answer is flagged, the run
    still passes (warnings do not change the exit status)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"""graph: {FW}
steps:
  - user: hi
  - model:
      calls: [{{tool: goto_stage, args: {{stage: verify}}, review: approve}}]
  - model: done
  - expect: {{stage: explore}}
""", encoding="utf-8")
    code, out, _ = invoke("simulate", str(scenario), "--cwd", str(tmp_path / "w"))
    assert code == 0
    assert f"   ! warning: {scenario}:4:5: goto_stage (call-1-1) was not reviewed, so its " \
           "`review: approve` was not used" in out.splitlines()
    assert out.rstrip().splitlines()[-1].endswith("expectations: 1 of 1 passed · 1 warning")
    code, _, err = invoke("simulate", str(scenario), "--json", "--cwd", str(tmp_path / "w"))
    assert code == 0 and "warning: " in err


def test_handoff_checks_see_only_this_run(tmp_path: Path) -> None:
    """With a fixed session.cwd a second run does not see the first run's handoff documents
    (`handoff_missing` holds on every run)."""
    from fsm_stage.scenario import load_scenario
    from fsm_stage.simulate import simulate

    scenario = tmp_path / "fw.yaml"
    text = (SCENARIOS / "feature-work.yaml").read_text(encoding="utf-8")
    scenario.write_text(text.replace("graph: ../feature-work.yaml", f"graph: {FW}")
                        .replace("session:\n", "session:\n  cwd: work\n", 1)
                        .replace("handoff_missing: [implement]", "handoff_missing: [implement, verify]"),
                        encoding="utf-8")
    parsed = load_scenario(scenario)
    assert parsed.session.cwd == "work"
    for _ in range(2):
        result = simulate(parsed)
        assert result.failures == ()
    assert (tmp_path / "work" / "handoff" / "feature-work-demo" / "verify.md").is_file()


def test_next_request_stage_and_plan_mode_are_checked(tmp_path: Path) -> None:
    """`next_request: {stage, plan_mode}` (what `fsm-stage scenario` records) compares the state
    the next request is sent in; a stage the graph lacks is refused before the run."""
    result = run_text(f"""graph: {FW}
steps:
  - user: hi
  - expect: {{next_request: {{stage: explore, plan_mode: false}}}}
  - model: ok
  - user: again
  - expect: {{next_request: {{stage: verify, plan_mode: true}}}}
  - model: ok
""", tmp_path)
    assert result.checks == 4
    assert [(f.check, f.expected, f.actual) for f in result.failures] == [
        ("next_request.stage", '"verify" in request 2 (turn 2 step 1)', '"explore"'),
        ("next_request.plan_mode", "true in request 2 (turn 2 step 1)", "false")]
    from fsm_stage.simulate import SimulationError
    with pytest.raises(SimulationError, match=r"expect next_request.stage: 'nowhere' is not a stage"):
        run_text(f"graph: {FW}\nsteps:\n  - user: hi\n  - expect: {{next_request: {{stage: nowhere}}}}\n"
                 "  - model: ok\n", tmp_path, name="t.yaml")
    assert _problems(f"graph: {FW}\nsteps:\n  - user: hi\n  - expect: {{next_request: {{stage: No}}}}\n"
                     "  - model: ok\n") == ["steps[1].expect.next_request.stage: 'No' is not a stage name "
                                            "([a-z][a-z0-9_-]*)"]


def test_null_values_are_spelled_as_yaml(tmp_path: Path) -> None:
    """`null`, not Python's `None` / `NoneType`; and a graph that is a folder."""
    head = f"graph: {FW}\n"
    assert _problems(head + "steps: [{user: hi}, {model: {calls: [{tool: read_file, args: null, "
                            "result: x}]}}]\n") == [
        "steps[1].model.calls[0].args: expected a mapping, got null"]
    assert _problems(head + "eligible: {guidance: null}\nsteps: [{user: hi}, {model: ok}]\n") == [
        "eligible.guidance: expected true or false, got null"]
    assert _problems(head + "steps: [{user: hi}, {model: ok}, {end_turn: null}]\n") == [
        "steps[2].end_turn: expected completed, aborted or blocked, got null"]
    assert _problems(head + "steps: [{command: null}]\n") == [
        "steps[0].command: expected a slash command like '/plan' or '/stage verify', got null"]
    (tmp_path / "gdir").mkdir()
    with pytest.raises(ConfigError, match="is a folder; expected a stage-graph file"):
        load_scenario_text("graph: gdir\nsteps: [{user: hi}, {model: ok}]\n", str(tmp_path / "s.yaml"))
