"""``fsm-stage simulate``: exit codes, the expectation diff, ``--json``, ``--log``, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docs_text import doc_section
from sim_helpers import REPO, SCENARIOS, graph_ref, invoke

from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog

FEATURE_WORK = SCENARIOS / "feature-work.yaml"


def test_main_command_prints_every_request_and_exits_0(tmp_path: Path) -> None:
    code, out, _ = invoke("simulate", str(FEATURE_WORK), "--cwd", str(tmp_path))
    assert code == 0
    headings = [line for line in out.splitlines() if line.startswith("━━ request ")]
    assert len(headings) == 9
    assert "stage explore · plan mode on" in headings[0]
    assert "stage verify · plan mode off" in headings[-1]
    assert "system CHANGED (plan:policy (order 50) removed)" in out
    assert "messages BROKEN" in out
    assert out.rstrip().splitlines()[-1].endswith("expectations: 36 of 36 passed")


def test_failing_expectation_exits_1_with_a_clear_diff(tmp_path: Path) -> None:
    scenario = tmp_path / "wrong.yaml"
    scenario.write_text(f"""graph: {graph_ref('feature-work.yaml')}
steps:
  - user: hi
  - expect:
      stage: implement
      next_request:
        contains: ["Current stage: verify"]
        prefix: {{messages: broken}}
  - model: hello
""", encoding="utf-8")
    code, out, _ = invoke("simulate", str(scenario), "--cwd", str(tmp_path / "w"))
    assert code == 1
    failed = out[out.index("\nFAILED ") + 1:].splitlines()
    assert failed[0] == "FAILED 3 expectation(s):"
    assert failed[1] == f"  {scenario}:4:5: expect stage: expected \"implement\", got \"explore\""
    assert failed[2].endswith('expect next_request.contains: expected request 1 (turn 1 step 1) to contain '
                              '"Current stage: verify", got no such text')
    assert failed[3].endswith("expect next_request.prefix.messages: expected broken in request 1 "
                              "(turn 1 step 1), got first request")


def test_json_writes_one_record_per_request_and_failures_on_stderr(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"""graph: {graph_ref('seed-plan-mode.yaml')}
steps:
  - user: hi
  - model: hello
  - expect: {{plan_mode: true}}
""", encoding="utf-8")
    code, out, err = invoke("simulate", str(scenario), "--json", "--cwd", str(tmp_path / "w"))
    assert code == 1
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert record["request"] == 1 and record["turn"] == 1 and record["step"] == 1
    assert record["plan_mode"] is False and record["stage"] is None
    assert record["tools"] == ["exit_plan_mode"]
    (message,) = record["messages"]
    assert (message["role"], message["source"], message["text"]) == ("user", "user", "hi")
    assert message["tokens"] > 0
    assert record["tokens"]["total"] == sum(record["tokens"][k] for k in ("system", "tools", "messages"))
    assert record["prefix"]["first"] is True
    assert "expect plan_mode: expected true, got false" in err


def test_log_writes_a_dsh_session_log(tmp_path: Path) -> None:
    """An existing session log is replaced with --force (a stale one from another session here)."""
    out_log = tmp_path / "session.jsonl"
    with JsonlLog(out_log, header=SessionHeader(id="stale", cwd=str(tmp_path))):
        pass
    code, _, _ = invoke("simulate", str(FEATURE_WORK), "--log", str(out_log), "--force", "--cwd",
                         str(tmp_path / "w"))
    assert code == 0
    res = read_log(out_log, strict=True)
    assert res.header.id == "feature-work-demo"
    types = [e.type for e in res.events]
    assert types.count("request/header") >= 2 and types[-1] == "turn/end"
    assert [e.data["active"] for e in res.events if e.type == "plan/mode"] == [True, False]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl", "session.jsonl.lock", "w"]


def test_graph_override_runs_the_scenario_under_another_graph(tmp_path: Path) -> None:
    code, out, _ = invoke("simulate", str(SCENARIOS / "subagent.yaml"), "--graph",
                           graph_ref("seed-stage-switch.yaml"), "--cwd", str(tmp_path))
    assert code == 1  # the seed's guidance text differs from feature-work's
    assert "The current stage is complete. Call goto_stage" in out
    assert "expect next_request.contains: expected request 3 (turn 2 step 1) to contain " \
           '"When the current stage (explore) is complete' in out


def test_bad_scenario_file_gives_one_line_positioned_errors(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(f"""graph: {graph_ref('feature-work.yaml')}
steps:
  - user: hi
  - model:
      calls:
        - {{tool: goto_stage, args: {{stage: implement}}, review: yes}}
  - expekt: {{stage: explore}}
""", encoding="utf-8")
    code, out, err = invoke("simulate", str(scenario))
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert lines == [
        f"{scenario}:6:64: steps[1].model.calls[0].review: unknown review outcome 'yes'; expected approve, "
        "keep, dismiss, abort, suspend or {feedback: TEXT}",
        f"{scenario}:7:5: steps[2].expekt: unknown step kind; expected one of user, command, model, "
        "eligible, end_turn, answer, resume, expect",
    ]


def test_missing_scenario_file_is_one_line(tmp_path: Path) -> None:
    code, _, err = invoke("simulate", str(tmp_path / "nope.yaml"))
    assert code == 1
    assert err.count("\n") == 1 and "cannot read scenario" in err


def test_bad_graph_is_reported_by_the_config_loader(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text("name: g\nstages: []\n", encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("graph: g.yaml\nsteps:\n  - user: hi\n  - model: ok\n", encoding="utf-8")
    code, _, err = invoke("simulate", str(scenario))
    assert code == 1 and "Traceback" not in err
    assert str(graph) in err or "g.yaml" in err


def test_unrunnable_scenario_is_a_one_line_error(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"graph: {graph_ref('feature-work.yaml')}\nsteps:\n  - model: hello\n",
                        encoding="utf-8")
    code, _, err = invoke("simulate", str(scenario))
    assert code == 1
    assert err.startswith(f"fsm-stage: {scenario}:3:5: model step with no turn to answer in")
    assert err.count("\n") == 1


def test_json_seq_points_at_the_step_start_in_the_log(tmp_path: Path) -> None:
    out_log = tmp_path / "s.jsonl"
    code, out, _ = invoke("simulate", str(FEATURE_WORK), "--json", "--log", str(out_log),
                           "--cwd", str(tmp_path / "w"))
    assert code == 0
    events = read_log(out_log).events
    for line in out.splitlines():
        record = json.loads(line)
        start = events[record["seq"]]
        assert start.type == "step/start"
        assert (start.data["turn"], start.data["step"]) == (record["turn"], record["step"])


def test_several_scenarios_run_as_a_suite(tmp_path: Path) -> None:
    good = SCENARIOS / "subagent.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"graph: {graph_ref('feature-work.yaml')}\nsteps:\n  - user: hi\n  - model: ok\n"
                   "  - expect: {stage: verify}\n", encoding="utf-8")
    code, out, _ = invoke("simulate", str(good), str(bad), "--cwd", str(tmp_path / "w"))
    assert code == 1
    assert out.rstrip().endswith("1 of 2 scenarios passed")
    assert f"scenario {good}" in out and f"scenario {bad}" in out
    code, out, _ = invoke("simulate", str(good), str(good), "--json", "--cwd", str(tmp_path / "j"))
    assert code == 0
    assert {json.loads(line)["scenario"] for line in out.splitlines()} == {str(good)}
    code, _, err = invoke("simulate", str(good), str(good), "--log", str(tmp_path / "x.jsonl"))
    assert code == 2 and "--log takes one scenario" in err


def test_folders_and_files_in_the_wrong_place_exit_1_with_one_line(tmp_path: Path) -> None:
    """A folder where a file is expected (and a file where the cwd folder should be)
    is a one-line error with exit 1, like every other input mistake — not a usage error (2)."""
    folder = tmp_path / "dd"
    folder.mkdir()
    afile = tmp_path / "f.txt"
    afile.write_text("x", encoding="utf-8")
    cases = {
        ("simulate", str(folder)): "dd: cannot read scenario: it is a directory",
        ("simulate", str(FEATURE_WORK), "--log", str(folder)):
            "dd: cannot write session log: it is a directory",
        ("simulate", str(FEATURE_WORK), "--graph", str(folder)): "is a directory",
        ("simulate", str(FEATURE_WORK), "--cwd", str(afile)): "f.txt': not a folder (a file is in the way)",
        ("scenario", str(folder)): "dd: cannot read session log: it is a directory",
    }
    for args, message in cases.items():
        code, out, err = invoke(*args)
        assert (code, out) == (1, ""), args
        assert err.count("\n") == 1 and message in err, (args, err)


def test_readme_excerpts_are_the_main_commands_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's line-by-line explanation quotes `fsm-stage simulate
    stage_graphs/scenarios/feature-work.yaml` run from the repository root: every quoted line
    (except the `…` elisions and the failure example) is a line of the real output."""
    section = doc_section("simulate")
    part = section[section.index("## The output, line by line"):section.index("## Scenario files")]
    blocks = [b.split("```", 1)[0] for b in part.split("```text\n")[1:]]
    quoted = [line for b in blocks if not b.startswith("FAILED") for line in b.splitlines()
              if line.strip() != "…"]
    assert len(quoted) > 30
    monkeypatch.chdir(REPO)
    code, out, _ = invoke("simulate", "stage_graphs/scenarios/feature-work.yaml")
    assert code == 0
    lines = set(out.splitlines())
    assert [line for line in quoted if line not in lines] == []


def test_validate_never_imports_the_simulator() -> None:
    """``fsm-stage validate`` loads neither ``fsm_stage.simulate`` nor ``fsm_stage.scenario``
    (checked in a fresh interpreter: this test process imported both already)."""
    import os
    import subprocess
    import sys

    code = ("import sys\nfrom click.testing import CliRunner\nfrom fsm_stage.cli import main\n"
            f"r = CliRunner().invoke(main, ['validate', {graph_ref('feature-work.yaml')!r}])\n"
            "assert r.exit_code == 0, r.output\n"
            "names = ('fsm_stage.simulate', 'fsm_stage.scenario')\n"
            "print(sorted(m for m in sys.modules if m.startswith(names)))\n")
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"
