"""Scenario files: structure, defaults and one-line positioned errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import graph_ref

from fsm_stage.errors import ConfigError
from fsm_stage.scenario import (
    UNSET,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    NextRequest,
    PrefixExpect,
    Review,
    SessionSettings,
    SystemText,
    ToolCall,
    UserPrompt,
    load_scenario,
    load_scenario_text,
)

GOOD = f"""description: demo
graph: {graph_ref('feature-work.yaml')}
session: {{id: demo, cwd: work, subagent: true}}
system: Be brief.
eligible: {{guidance: true}}
steps:
  - user: hi
  - command: /stage  implement now
  - model: plain text
  - model:
      text: calling
      calls:
        - {{tool: goto_stage, args: {{stage: verify}}, review: {{feedback: not yet}}, id: c1}}
        - {{tool: bash, args: {{cmd: ls}}, result: "Error: boom", error: true}}
  - eligible: {{tests_written: true}}
  - end_turn: aborted
  - expect:
      stage: explore
      plan_mode: false
      pending_stage: null
      pending_plan: true
      handoff_exists: verify
      next_request: {{contains: a, not_contains: [b, c], prefix: {{system: kept, messages: broken}}}}
"""


def test_a_complete_scenario_is_structured(tmp_path: Path) -> None:
    s = load_scenario_text(GOOD, str(tmp_path / "demo.yaml"))
    assert s.session == SessionSettings("demo", "work", True)
    assert s.resolved_cwd() == (tmp_path / "work").resolve()
    assert s.system == (SystemText("host", 0, "Be brief."),)
    assert s.eligible == {"guidance": True}
    assert s.steps == (
        UserPrompt("hi"),
        Command("/stage  implement now"),
        ModelStep("plain text"),
        ModelStep("calling", (
            ToolCall("goto_stage", {"stage": "verify"}, Review("feedback", "not yet"), id="c1"),
            ToolCall("bash", {"cmd": "ls"}, result="Error: boom", error=True))),
        EligibilityFlip({"tests_written": True}),
        EndTurn("aborted"),
        Expect(stage="explore", plan_mode=False, pending_stage=None, pending_plan=True,
               handoff_exists=("verify",),
               next_request=NextRequest(("a",), ("b", "c"), PrefixExpect("kept", None, "broken"))),
    )
    cmd = s.steps[1]
    assert isinstance(cmd, Command) and cmd.name == "stage" and cmd.args == "  implement now"
    first = s.steps[0]
    assert isinstance(first, UserPrompt) and first.where == f"{tmp_path / 'demo.yaml'}:7:5"


def test_defaults(tmp_path: Path) -> None:
    text = f"graph: {graph_ref('feature-work.yaml')}\nsteps: [{{user: hi}}, {{expect: {{stage: a}}}}]\n"
    s = load_scenario_text(text, str(tmp_path / "my-run.yaml"))
    assert s.session_id == "my-run" and s.resolved_cwd() is None and not s.session.subagent
    expect = s.steps[1]
    assert isinstance(expect, Expect)
    assert expect.plan_mode is UNSET and expect.pending_stage is UNSET and expect.next_request is None


def test_graph_is_relative_to_the_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "g.yaml").write_text("", encoding="utf-8")
    (tmp_path / "s.yaml").write_text("graph: graphs/g.yaml\nsteps: [{user: hi}]\n", encoding="utf-8")
    assert load_scenario(tmp_path / "s.yaml").graph == tmp_path / "graphs" / "g.yaml"


G = graph_ref("feature-work.yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("graph: x.yaml\nsteps: [{user: hi}]\n", "F:1:8: graph: graph file '"),
    ("steps: [{user: hi}]\n", "F:1:1: (file): missing or empty `graph`"),
    (f"graph: {G}\nsteps: []\n", "F:2:8: steps: missing or empty `steps` list"),
    (f"graph: {G}\nstepz: []\nsteps: [{{user: hi}}]\n", "F:2:1: stepz: unknown key (expected description, "
     "graph, session, system, eligible, reviewers, steps)"),
    (f"graph: {G}\nsession: {{idd: x}}\nsteps: [{{user: hi}}]\n", "F:2:11: session.idd: unknown key"),
    (f"graph: {G}\nsession: {{subagent: yes}}\nsteps: [{{user: hi}}]\n",
     "F:2:21: session.subagent: expected true or false, got a string (\"yes\")"),
    (f"graph: {G}\nsteps:\n  - user: ''\n", "F:3:11: steps[0].user: expected the non-empty prompt text"),
    (f"graph: {G}\nsteps:\n  - command: stage x\n", "F:3:14: steps[0].command: expected a slash command"),
    (f"graph: {G}\nsteps:\n  - {{user: a, model: b}}\n", "F:3:5: steps[0]: a step is a one-key mapping"),
    (f"graph: {G}\nsteps:\n  - model: {{txt: a}}\n",
     "F:3:13: steps[0].model.txt: unknown key (expected text, calls, usage)"),
    (f"graph: {G}\nsteps:\n  - model:\n      calls:\n        - {{args: {{}}}}\n",
     "F:5:11: steps[0].model.calls[0].tool: required key is missing"),
    (f"graph: {G}\nsteps:\n  - eligible: {{ready: 1}}\n",
     "F:3:23: steps[0].eligible.ready: expected true or false, got 1"),
    (f"graph: {G}\nsteps:\n  - expect: {{stage: Bad}}\n",
     "F:3:21: steps[0].expect.stage: 'Bad' is not a stage name"),
    (f"graph: {G}\nsteps:\n  - expect: {{next_request: {{prefix: {{tools: same}}}}}}\n",
     "F:3:45: steps[0].expect.next_request.prefix.tools: must be \"kept\" or \"changed\", "
     'got a string ("same")'),
    (f"graph: {G}\nsteps:\n  - expect: {{stagee: a}}\n", "F:3:14: steps[0].expect.stagee: unknown key"),
    (f"graph: {G}\nsteps:\n  - user: [unclosed\n", "F:3:11: (yaml): YAML syntax error: "
     "the flow sequence opened here is never closed"),
    ("- just a list\n", "F:1:1: (file): a scenario is a mapping"),
])
def test_mistakes_are_one_line_positioned_errors(text: str, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "F"
    with pytest.raises(ConfigError) as info:
        load_scenario_text(text, str(path))
    lines = info.value.problems
    assert len(lines) == 1, lines
    assert "\n" not in lines[0]
    assert lines[0].startswith(expected.replace("F:", f"{path}:", 1)), lines[0]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = f"graph: {G}\nsession: {{x: 1}}\nsteps:\n  - user: ''\n  - bogus: 1\n"
    with pytest.raises(ConfigError) as info:
        load_scenario_text(text, str(tmp_path / "F"))
    assert [p.key for p in info.value.details] == ["session.x", "steps[0].user", "steps[1].bogus"]
    # unknown keys / step kinds point at the key, wrong values at the value (as in graph files)
    assert [(p.line, p.column) for p in info.value.details] == [(2, 11), (4, 11), (5, 5)]
