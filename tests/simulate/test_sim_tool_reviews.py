"""A host tool an ``ask`` rule of the tool policy reviews: a scenario scripts its review like
goto_stage's (approve, keep, suspend + answer + resume), a missing outcome is one error, a review
on a call no rule asks about is refused before the run, and ``fsm-stage scenario`` replays it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import invoke, record_and_replay, run_text

from fsm_stage.errors import ConfigError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import EventLog
from fsm_stage.scenario import load_scenario_text
from fsm_stage.simulate import SimulationError

GRAPH = """\
name: ask
section: When done, call goto_stage with one of << stage_targets >>.
stages:
  - name: build
    instruction: Build.
    targets: [ship]
    tools: {ask: [shell]}
  - name: ship
    instruction: Ship.
    targets: [build]
"""


def _scenario(tmp_path: Path, call: str, tail: str = "  - model: Done.\n") -> str:
    (tmp_path / "g.yaml").write_text(GRAPH, encoding="utf-8")
    return ("graph: g.yaml\nsteps:\n  - user: Start.\n  - model:\n      calls:\n"
            "        - tool: shell\n          id: call_sh\n          args: {cmd: ls}\n" + call + tail)


def _tool_events(log: Path | EventLog) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for e in (read_log(log).events if isinstance(log, Path) else log.events):
        if e.type in ("fsm/review/answer", "fsm/tool/refused"):
            out.append((e.type, e.data.get("outcome"), e.data.get("by")))
        elif e.type == "tool/result":
            out.append((e.type, e.data["message"]["content"][0]["content"][0]["text"]))
    return out


def test_an_ask_rule_without_a_scripted_outcome_is_one_error_naming_the_step(tmp_path: Path) -> None:
    text = _scenario(tmp_path, '          result: "a b"\n')
    with pytest.raises(SimulationError, match=r"s\.yaml:4:5: shell asked the human a review .* no `review:`"):
        run_text(text, tmp_path)
    code, _out, err = invoke("simulate", str(tmp_path / "s.yaml"))
    assert code == 1 and "Traceback" not in err and "shell asked the human a review" in err


def test_approve_runs_the_tool_and_keep_refuses_it(tmp_path: Path) -> None:
    approved = run_text(_scenario(tmp_path, '          review: approve\n          result: "a b"\n'), tmp_path)
    assert approved.ok and _tool_events(approved.log) == [
        ("fsm/review/answer", "approve", "channel"), ("tool/result", "a b")]
    kept = run_text(_scenario(tmp_path, "          review: {feedback: not now}\n"), tmp_path)
    assert kept.ok
    events = _tool_events(kept.log)
    assert events[0] == ("fsm/review/answer", "keep", "channel")
    assert "the reviewer did not approve (not now)" in str(events)


def test_a_suspended_tool_review_is_answered_then_resumed(tmp_path: Path) -> None:
    text = _scenario(tmp_path, '          review: suspend\n          result: "a b"\n',
                     "  - answer: {call: call_sh, outcome: approve}\n  - resume: true\n  - model: Done.\n")
    result = run_text(text, tmp_path)
    assert result.ok and ("tool/result", "a b") in _tool_events(result.log)


def test_review_on_a_call_no_rule_asks_about_is_a_warning(tmp_path: Path) -> None:
    """Whether a call is reviewed is the policy's verdict at run time (paths read in the session
    cwd, symlinks resolved; a replay under a changed graph): an unused review is a warning."""
    text = _scenario(tmp_path, '          review: approve\n          result: "a b"\n').replace(
        "tool: shell", "tool: read_file")
    result = run_text(text, tmp_path)
    assert result.ok and any("read_file (call_sh) was not reviewed, so its `review: approve` was not used"
                             in w for w in result.warnings)


def test_a_result_for_a_call_its_reviewer_refuses_is_a_load_error(tmp_path: Path) -> None:
    text = _scenario(tmp_path, '          review: keep\n          result: "a b"\n')
    with pytest.raises(ConfigError, match=r"s\.yaml:\d+:\d+: .*result: a call its reviewer does not approve "
                                          r"\(keep\) never runs; remove `result`"):
        load_scenario_text(text, str(tmp_path / "s.yaml"))


@pytest.mark.parametrize("call,tail", [
    ('          review: approve\n          result: "a b"\n', "  - model: Done.\n"),
    ("          review: keep\n", "  - model: Done.\n"),
    ('          review: suspend\n          result: "a b"\n',
     "  - answer: {call: call_sh, outcome: approve}\n  - resume: true\n  - model: Done.\n"),
    ("          review: suspend\n",
     "  - answer: {call: call_sh, outcome: keep, feedback: later}\n  - resume: true\n  - model: Done.\n"),
    ("          review: suspend\n", "  - end_turn: aborted\n  - user: Again.\n  - model: Fine.\n"),
])
def test_fsm_stage_scenario_replays_a_tool_review(tmp_path: Path, call: str, tail: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(_scenario(tmp_path, call, tail), encoding="utf-8")
    log, log2, _ = record_and_replay(tmp_path, scenario, tmp_path / "g.yaml")
    assert _tool_events(log2) == _tool_events(log)


def test_the_policy_line_says_every_tool_in_a_stage_without_rules(tmp_path: Path) -> None:
    text = _scenario(tmp_path, '          review: approve\n          result: "a b"\n',
                     "  - model:\n      calls:\n        - tool: goto_stage\n          args: {stage: ship, "
                     "handoff: done}\n          review: approve\n  - model: Shipped.\n")
    result = run_text(text, tmp_path)
    assert result.ok
    assert [(r.stage, r.policy) for r in result.records] == [
        ("build", "stage build: every tool; ask shell"), ("build", "stage build: every tool; ask shell"),
        ("ship", "every tool")]


def test_a_reviewed_call_after_a_suspended_one_runs_at_the_resume(tmp_path: Path) -> None:
    """The first dispatch stops at the suspended call; the resume runs the reply's later calls
    through the runtime, a tool no scenario call answers included (it was left without a
    result, and end_step failed with a traceback)."""
    text = _scenario(tmp_path, '          review: suspend\n          result: "a b"\n'
                               "        - tool: rm_rf\n          id: call_rm\n          args: {path: x}\n"
                               "          review: keep\n"
                               "        - tool: read_file\n          id: call_rd\n          args: {path: x}\n"
                               "          result: text\n",
                     "  - answer: {call: call_sh, outcome: approve}\n  - resume: true\n  - model: Done.\n")
    (tmp_path / "g.yaml").write_text(GRAPH.replace("ask: [shell]", "ask: [shell, rm_rf]"), encoding="utf-8")
    result = run_text(text, tmp_path)
    assert result.ok
    results = [e[1] for e in _tool_events(result.log) if e[0] == "tool/result"]
    assert results[0] == "a b" and "the reviewer did not approve" in str(results[1]) and results[2] == "text"
    # in reply order, as without the suspension (the registered tool ran before the unknown one)
    calls = [e.data["callId"] for e in result.log.events if e.type == "tool/call"]
    assert calls == ["call_sh", "call_rm", "call_rd"]


def test_an_aborted_tool_review_stops_the_turn_without_a_traceback(tmp_path: Path) -> None:
    text = _scenario(tmp_path, "          review: abort\n", "  - user: Again.\n  - model: Fine.\n")
    result = run_text(text, tmp_path)
    assert result.ok
    events = _tool_events(result.log)
    assert ("fsm/review/answer", "dismiss", "channel") in events and "the review failed" in str(events)
    ends = [e.data["reason"]["kind"] for e in result.log.events if e.type == "turn/end"]
    assert ends == ["aborted", "completed"]


def test_a_call_that_runs_without_a_result_is_a_warning(tmp_path: Path) -> None:
    """helper-63: an approved call of a tool another call answers ran silently with ``""``."""
    text = _scenario(tmp_path, '          review: approve\n          result: "a b"\n'
                               "        - tool: shell\n          id: call_2\n          args: {cmd: pwd}\n"
                               "          review: approve\n")
    result = run_text(text, tmp_path)
    assert result.ok
    assert any("shell (call_2) ran without a `result:`, so it answered the empty string" in w
               for w in result.warnings), result.warnings


def test_an_approved_call_of_a_tool_no_one_registered_gets_the_unknown_tool_error_at_the_resume(
        tmp_path: Path) -> None:
    """The reference loop runs every call through the runtime: an approved call of a tool the
    scenario gives no result is redeemed and answered "unknown tool" (the step driver leaves
    such a call to a host that runs its own tools, not to the loop)."""
    text = _scenario(tmp_path, "          review: suspend\n",
                     "  - answer: {call: call_sh, outcome: approve}\n  - resume: true\n  - model: Done.\n")
    result = run_text(text, tmp_path)
    assert result.ok
    assert ("tool/result", "Error: unknown tool shell") in _tool_events(result.log)
    assert [e.data["applied"] for e in result.log.events if e.type == "fsm/review/redeemed"] == [True]
