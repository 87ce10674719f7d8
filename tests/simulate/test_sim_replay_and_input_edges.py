"""Input edges of the simulator and ``fsm-stage scenario``: text that cannot be UTF-8, tool calls
refused before any review, an empty session id, ``scenario --graph`` / ``-o``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from sim_helpers import GRAPHS, invoke

from fsm_stage.errors import ConfigError
from fsm_stage.scenario import ModelStep, load_scenario, load_scenario_text
from fsm_stage.simulate import MessageView, simulate
from fsm_stage.tokens import HeuristicTokenMeter

# no min_handoff_tokens: every model transition is full, so goto_stage without `handoff` is refused
# before anyone is asked (errors.requires_handoff)
FULL_GRAPH = """name: full
language: en
stages:
  - {name: explore, instruction: Read.}
  - {name: implement, instruction: Write.}
section: "Stage << stage_current >>; next: << stage_targets >>."
"""

HANDOFF = """## Goal
Add the flag.
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_lone_surrogate_in_scenario_text_is_a_positioned_problem(tmp_path: Path) -> None:
    """`user: "\\ud800"`: text that cannot be encoded as UTF-8 can never be sent to a model or
    logged, so the loader refuses it, positioned at the value, wherever it is (prompt, tool args,
    keys), instead of a UnicodeEncodeError traceback at print time."""
    _write(tmp_path, "g.yaml", FULL_GRAPH)
    text = ('graph: g.yaml\nsteps:\n  - user: "ok \\ud800 zalgo"\n'
            '  - model: {calls: [{tool: mine, args: {"k\\udfff": v}, result: "r"}]}\n')
    with pytest.raises(ConfigError) as info:
        load_scenario_text(text, str(tmp_path / "s.yaml"))
    lines = info.value.problems
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{tmp_path / 's.yaml'}:3:11: steps[0].user: ")
    assert "U+D800" in lines[0] and "UTF-8" in lines[0]
    assert ":4:" in lines[1] and "U+DFFF" in lines[1]
    for line in lines:
        line.encode("utf-8")  # the message itself is printable


def test_lone_surrogate_scenario_through_the_cli_is_one_line(tmp_path: Path) -> None:
    _write(tmp_path, "g.yaml", FULL_GRAPH)
    scenario = _write(tmp_path, "s.yaml", 'graph: g.yaml\nsteps:\n  - user: "\\u202e\\u0000\\ud800 zalgo"\n'
                      "  - model: x\n")
    code, out, err = invoke("simulate", str(scenario), "--cwd", str(tmp_path / "w"))
    assert (code, out) == (1, "")
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith(f"{scenario}:3:") and "U+D800" in err


def _graph_value(scenario: Path) -> str:
    """The ``graph:`` value as written (YAML may fold a long path onto the next line)."""
    value = YAML(typ="safe").load(scenario.read_text(encoding="utf-8"))["graph"]
    assert isinstance(value, str)
    return value


def _record(tmp_path: Path) -> Path:
    """Simulate a session whose first goto_stage is refused before the review (no handoff), the
    second approved; return its log."""
    _write(tmp_path, "g.yaml", FULL_GRAPH)
    scenario = _write(tmp_path, "s.yaml", f"""graph: g.yaml
steps:
  - user: Add the flag.
  - model:
      calls:
        - {{tool: goto_stage, args: {{stage: implement}}}}
  - model:
      calls:
        - tool: goto_stage
          args: {{stage: implement, handoff: {HANDOFF!r}}}
          review: approve
  - model: Done.
""")
    log = tmp_path / "rec.jsonl"
    code, _, err = invoke("simulate", str(scenario), "--log", str(log), "--cwd", str(tmp_path / "w0"))
    assert code == 0, err
    return log


def test_goto_stage_refused_before_the_review_is_replayed_without_a_review(tmp_path: Path) -> None:
    """A goto_stage the stage switch refused before asking anyone (here: the handoff document
    is missing) is not written `review: keep` (the replay would warn "was not reviewed"). It
    gets no review; the one the reviewer approved keeps `approve`; the replay runs
    without a warning."""
    log = _record(tmp_path)
    out = tmp_path / "rt.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(out))
    assert code == 0, err
    calls = [c for s in load_scenario(out).steps if isinstance(s, ModelStep) for c in s.calls]
    assert [(c.tool, c.review.kind if c.review else None) for c in calls] == [
        ("goto_stage", None), ("goto_stage", "approve")]
    result = simulate(load_scenario(out), cwd=tmp_path / "w1")
    assert result.warnings == () and result.failures == ()
    assert result.records[-1].stage == "implement"


def test_scenario_refuses_an_empty_session_id(tmp_path: Path) -> None:
    """`--id ""` would write `id: ''`, which the loader refuses: it is a usage error (exit 2)
    naming --id, and nothing is written."""
    log = _record(tmp_path)
    out = tmp_path / "rt.yaml"
    for bad in ("", "  "):
        code, stdout, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "--id", bad,
                                   "-o", str(out))
        assert code == 2 and stdout == "" and "--id" in err and "Traceback" not in err
        assert not out.exists()


def test_scenario_graph_that_does_not_exist_is_worded_like_other_commands(tmp_path: Path) -> None:
    """Doc note: `scenario --graph nosuch.yaml` says what `state --graph` says."""
    log = _record(tmp_path)
    missing = tmp_path / "nosuch.yaml"
    code, out, err = invoke("scenario", str(log), "--graph", str(missing))
    assert (code, out) == (1, "")
    assert err == f"fsm-stage: {missing}: cannot read stage graph: no such file\n"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path))
    assert code == 1 and err.startswith(f"fsm-stage: {tmp_path}: cannot read stage graph: ")


def test_scenario_of_a_graph_inside_the_installed_package_is_written_absolute(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Doc note: `-o` wrote `graph:` relative to the output through the install's folders
    (`../repo/.venv/lib/python3.11/site-packages/fsm_stage/_data/…`), broken when the output or
    the venv moves. A graph inside the installed package is written as an absolute path; a graph
    of the user's (or of a source checkout) stays relative to the output."""
    from fsm_stage.cli import sim_cmds

    log = _record(tmp_path)
    package = tmp_path / "venv" / "site-packages" / "fsm_stage"
    (package / "_data" / "stage_graphs").mkdir(parents=True)
    shipped = package / "_data" / "stage_graphs" / "feature-work.yaml"
    shipped.write_text((GRAPHS / "feature-work.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(sim_cmds, "PACKAGE_DIR", package)
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "rt.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(shipped), "-o", str(out))
    assert code == 0, err
    assert _graph_value(out) == str(shipped.resolve())
    assert load_scenario(out).graph == shipped.resolve()
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(out))
    assert code == 0, err
    assert _graph_value(out) == "../g.yaml"


SUBAGENT = """graph: g.yaml
session: {id: child-1, subagent: true%s}
steps:
  - user: Report back.
  - model: Done.
"""


def test_subagent_parent_session_is_configurable(tmp_path: Path) -> None:
    """Doc note: the subagent header got an invented `parentSession: child-1-parent`. DSH always
    writes a child's parent id, so a scenario can name it (`session.parent`); the default stays
    `<id>-parent` (documented)."""
    _write(tmp_path, "g.yaml", FULL_GRAPH)
    named = _write(tmp_path, "named.yaml", SUBAGENT % ", parent: lead-7")
    result = simulate(load_scenario(named), cwd=tmp_path / "w")
    assert result.log.header.parent_session == "lead-7" and result.log.header.is_subagent
    default = _write(tmp_path, "default.yaml", SUBAGENT % "")
    assert simulate(load_scenario(default), cwd=tmp_path / "w").log.header.parent_session == "child-1-parent"


def test_session_parent_needs_a_subagent_and_a_name(tmp_path: Path) -> None:
    _write(tmp_path, "g.yaml", FULL_GRAPH)
    text = "graph: g.yaml\nsession: {parent: lead}\nsteps: [{user: hi}, {model: ok}]\n"
    with pytest.raises(ConfigError) as info:
        load_scenario_text(text, str(tmp_path / "s.yaml"))
    assert [p.split(": ", 1)[1] for p in info.value.problems] == [
        "session.parent: only a subagent session (subagent: true) has a parent session"]
    text = "graph: g.yaml\nsession: {subagent: true, parent: ' '}\nsteps: [{user: hi}, {model: ok}]\n"
    with pytest.raises(ConfigError) as info:
        load_scenario_text(text, str(tmp_path / "s.yaml"))
    assert [p.split(": ", 1)[1] for p in info.value.problems] == [
        "session.parent: must be a non-empty string"]


def test_scenario_of_a_subagent_log_keeps_its_parent(tmp_path: Path) -> None:
    _write(tmp_path, "g.yaml", FULL_GRAPH)
    named = _write(tmp_path, "named.yaml", SUBAGENT % ", parent: lead-7")
    log = tmp_path / "child.jsonl"
    code, _, err = invoke("simulate", str(named), "--log", str(log), "--cwd", str(tmp_path / "w"))
    assert code == 0, err
    out = tmp_path / "rt.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(out))
    assert code == 0, err
    session = load_scenario(out).session
    assert (session.subagent, session.parent) == (True, "lead-7")


def test_scenario_of_a_log_with_a_lone_surrogate_replaces_it_and_warns(tmp_path: Path) -> None:
    """JSON can escape a lone surrogate (`"\\ud800"`), so a recorded log may hold one, which the
    scenario loader would refuse. The replay replaces
    it with U+FFFD, says so on stderr, and the scenario loads and runs."""
    import json

    log = _record(tmp_path)
    lines = log.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "user/message" and record["data"]["source"]["kind"] == "user":
            record["data"]["content"][0]["text"] += "\ud800"
            lines[i] = json.dumps(record)  # ensure_ascii: written as the escape \ud800
            break
    else:
        raise AssertionError("no user message recorded")
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "rt.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(out))
    assert code == 0, err
    assert ("fsm-stage: warning: 1 text(s) held a lone surrogate (not encodable as UTF-8); replaced with "
            "U+FFFD\n") in err
    scenario = load_scenario(out)
    assert any(getattr(s, "text", "").endswith("\ufffd") for s in scenario.steps)
    assert simulate(scenario, cwd=tmp_path / "w1").failures == ()


def test_each_message_is_viewed_once_not_once_per_request(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Perf note (simulate time grew with the square of the session length): every request lists
    all the messages so far, and each was priced and rendered again at every request. A message's
    view is computed once and reused while the log shows the same message; the records are the
    same as without the reuse."""
    import fsm_stage.simulate.report as report
    import fsm_stage.simulate.views as sim

    _write(tmp_path, "g.yaml", FULL_GRAPH)
    steps = "".join(f"  - user: prompt {i}\n  - model: answer {i}\n" for i in range(30))
    scenario = load_scenario(_write(tmp_path, "long.yaml", f"graph: g.yaml\nsteps:\n{steps}"))
    calls = [0]
    real = report.message_view  # the function the engine imported

    def counting(message: Mapping[str, Any], meter: HeuristicTokenMeter = report._METER) -> MessageView:
        calls[0] += 1
        return real(message, meter)

    monkeypatch.setattr(sim, "message_view", counting)
    result = simulate(scenario, cwd=tmp_path / "w")
    listed = sum(len(r.messages) for r in result.records)
    assert len(result.records) == 30 and listed > 900
    # nothing is archived here: the last request lists every message; linear, not quadratic
    assert calls[0] <= len(result.records[-1].messages) + 2 * len(result.records)
    monkeypatch.setattr(sim, "message_view", real)
    again = simulate(scenario, cwd=tmp_path / "w2")
    assert [r.messages for r in again.records] == [r.messages for r in result.records]


def test_simulate_never_formats_its_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Perf note: `asyncio.run` restores the SIGINT handler through `signal._int_to_enum`, whose
    failed enum lookup formats the handler — a partial holding the main task, whose repr holds
    its result. With the `SimulationResult` as that result, every run formatted every record
    and message once more (seconds on a long session). The main task returns nothing."""
    import signal

    import fsm_stage.simulate as sim

    _write(tmp_path, "g.yaml", FULL_GRAPH)
    scenario = load_scenario(_write(tmp_path, "s.yaml", "graph: g.yaml\nsteps: [{user: hi}, {model: ok}]\n"))
    formatted = [0]

    def counting(self: object) -> str:
        formatted[0] += 1
        return "SimulationResult(...)"

    monkeypatch.setattr(sim.SimulationResult, "__repr__", counting)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # what asyncio.run looks for
    try:
        result = simulate(scenario, cwd=tmp_path / "w")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(result.records) == 1
    assert formatted[0] == 0


def test_exit_plan_mode_refused_before_the_review_is_replayed_without_a_review(tmp_path: Path) -> None:
    """The plan-mode side: `exit_plan_mode` outside plan mode (or with a bad plan) is
    refused before anyone is asked; the replay gives it no review instead of `keep`."""
    _write(tmp_path, "g.yaml", FULL_GRAPH + "plan_mode: {section: Plan first.}\n")
    scenario = _write(tmp_path, "s.yaml", """graph: g.yaml
steps:
  - user: Go.
  - model:
      calls:
        - {tool: exit_plan_mode, args: {plan: "# Plan"}}
  - model: Done.
""")
    log = tmp_path / "rec.jsonl"
    code, _, err = invoke("simulate", str(scenario), "--log", str(log), "--cwd", str(tmp_path / "w0"))
    assert code == 0, err
    out = tmp_path / "rt.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(out))
    assert code == 0, err
    calls = [c for s in load_scenario(out).steps if isinstance(s, ModelStep) for c in s.calls]
    assert [(c.tool, c.review) for c in calls] == [("exit_plan_mode", None)]
    result = simulate(load_scenario(out), cwd=tmp_path / "w1")
    assert result.warnings == () and result.failures == ()
