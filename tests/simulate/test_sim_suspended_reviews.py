"""Suspended reviews in scenarios: ``review: suspend``, ``answer`` and ``resume`` steps, and
``fsm-stage scenario`` + ``simulate`` reproducing a log whose reviews were suspended."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sim_helpers import graph_ref, invoke, run_text

from fsm_stage.errors import ConfigError
from fsm_stage.log.dsh import read_log
from fsm_stage.scenario import (
    AnswerReview,
    ModelStep,
    Resume,
    Review,
    SessionSettings,
    ToolCall,
    dump_scenario,
    load_scenario,
    load_scenario_text,
)
from fsm_stage.simulate import SimulationError, render_human

FW = graph_ref("feature-work.yaml")

SUSPENDED = f"""\
graph: {FW}
session: {{id: suspended-demo}}
steps:
  - command: /plan Add a --greeting flag.
  - model:
      calls:
        - tool: exit_plan_mode
          id: call_plan
          args: {{plan: "# Plan\\n\\n- Add the option."}}
          review: suspend
  - expect: {{plan_mode: true, pending_plan: null}}
  - answer: {{call: call_plan, outcome: keep, feedback: Also read HELLO_GREETING.}}
  - resume: true
  - expect: {{plan_mode: true, next_request: {{contains: ["Also read HELLO_GREETING."]}}}}
  - model:
      calls:
        - tool: exit_plan_mode
          args: {{plan: "# Plan\\n\\n- Add the option.\\n- Read HELLO_GREETING."}}
          review: suspend
  - answer: {{outcome: approve}}
  - resume: true
  - expect: {{plan_mode: true, pending_plan: false}}
  - model: Planned.
  - user: Go on.
  - eligible: {{guidance: true}}
  - model:
      calls:
        - tool: goto_stage
          id: call_goto
          args: {{stage: implement, handoff: "# Handoff\\n\\nThe plan is approved."}}
          review: suspend
  - answer: {{call: call_goto, outcome: approve}}
  - expect: {{stage: explore, pending_stage: implement}}
  - resume: true
  - expect: {{next_request: {{stage: implement}}}}
  - model: Implementing now.
"""

STILL_OPEN = SUSPENDED + """\
  - user: Next stage, please.
  - eligible: {tests_written: true}
  - model:
      calls:
        - tool: goto_stage
          id: call_verify
          args: {stage: verify}
          review: suspend
"""


def _events(path: Path) -> list[Any]:
    return list(read_log(path).events)


def _review_trace(events: list[Any]) -> list[tuple[str, ...]]:
    """The event types in order, with each review answer's outcome and who gave it."""
    out: list[tuple[str, ...]] = []
    for ev in events:
        data = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == "fsm/review/answer":
            out.append((ev.type, data["outcome"], data["by"], str(data.get("feedback"))))
        elif ev.type == "fsm/review/request":
            out.append((ev.type, data["kind"], data["callId"], data["target"]))
        else:
            out.append((ev.type,))
    return out


def _record(tmp_path: Path, text: str) -> tuple[Path, str]:
    """simulate TEXT --log rec.jsonl; returns the log and the human output."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text, encoding="utf-8")
    log = tmp_path / "rec.jsonl"
    code, out, err = invoke("simulate", str(scenario), "--log", str(log), "--cwd", str(tmp_path / "w0"))
    assert code == 0, out + err
    return log, out


def _replay(tmp_path: Path, log: Path) -> tuple[Path, Path, str]:
    """fsm-stage scenario LOG, then simulate the result --log; returns (scenario, log, output)."""
    out_yaml = tmp_path / "replay.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", FW, "-o", str(out_yaml))
    assert code == 0 and "warning" not in err, err
    log2 = tmp_path / "replayed.jsonl"
    code, out, err = invoke("simulate", str(out_yaml), "--log", str(log2), "--cwd", str(tmp_path / "w1"))
    assert code == 0, out + err
    return out_yaml, log2, out


def test_suspended_reviews_stay_open_until_answered_and_resumed(tmp_path: Path) -> None:
    """Each suspended review leaves its tool call open (no tool/result, no step/end) until the
    answer (by: api) and the resume; the report shows the suspension."""
    log, out = _record(tmp_path, SUSPENDED)
    trace = _review_trace(_events(log))
    goto = trace.index(("fsm/review/request", "stage", "call_goto", "implement"))
    assert trace[goto + 1:goto + 3] == [("fsm/review/answer", "approve", "api", "None"), ("tool/result",)]
    plan = trace.index(("fsm/review/request", "plan", "call_plan", "default"))
    assert trace[plan + 1:plan + 3] == [
        ("fsm/review/answer", "keep", "api", "Also read HELLO_GREETING."), ("tool/result",)]
    answers = [t[1:3] for t in trace if t[0] == "fsm/review/answer"]
    assert answers == [("keep", "api"), ("approve", "api"), ("approve", "api")]
    assert ("fsm/review/redeemed",) in trace and trace.count(("turn/end",)) == 2
    assert out.count("(nobody answers now: the call stays open)") == 3
    assert "turn 2 suspended: review rv_" in out and "of call_goto waits for an answer" in out
    assert "answer rv_" in out and "(call_goto): approve" in out
    assert out.count("the host resumes the suspended turn") == 3


def test_replay_of_suspended_reviews_reproduces_the_log(tmp_path: Path) -> None:
    """`fsm-stage scenario` writes `review: suspend` + `answer` + `resume` for each suspended
    review (from the logged answers, not the result wording); simulating that scenario writes
    the same event types, the same review outcomes and stages."""
    log, _ = _record(tmp_path, SUSPENDED)
    replay_yaml, log2, _ = _replay(tmp_path, log)
    text = replay_yaml.read_text(encoding="utf-8")
    assert text.count("review: suspend") == 3 and text.count("resume: true") == 3
    assert "- answer: {call: call_plan, outcome: keep, feedback: Also read HELLO_GREETING.}" in text
    assert "- answer: {call: call_goto, outcome: approve}" in text
    assert "end_turn" not in text
    original, replayed = _events(log), _events(log2)
    assert _review_trace(replayed) == _review_trace(original)
    scenario = load_scenario(replay_yaml)
    assert [s for s in scenario.steps if isinstance(s, Resume)] == [Resume()] * 3


def test_a_log_ending_with_an_open_review_replays_to_the_suspended_state(tmp_path: Path) -> None:
    """The last goto_stage is still waiting when the log ends: the replay ends with that call's
    `review: suspend` (no answer, no resume, no end_turn) and its run ends suspended too."""
    log, out = _record(tmp_path, STILL_OPEN)
    assert "the scenario ends with the turn suspended (open reviews: rv_" in out
    replay_yaml, log2, out2 = _replay(tmp_path, log)
    scenario = load_scenario(replay_yaml)
    last = scenario.steps[-1]
    assert isinstance(last, ModelStep)
    assert last.calls == (ToolCall("goto_stage", {"stage": "verify"}, Review("suspend"), id="call_verify"),)
    assert "the scenario ends with the turn suspended" in out2
    assert _review_trace(_events(log2)) == _review_trace(_events(log))
    assert _events(log2)[-1].type == "fsm/review/request"
    code, state, _ = invoke("state", str(log2), "--json")
    assert code == 0
    opened = json.loads(state)["reviews"]["open"]
    assert [(r["kind"], r["target"]) for r in opened] == [("stage", "verify")]


def test_end_turn_aborted_closes_a_suspended_turn(tmp_path: Path) -> None:
    result = run_text(f"""\
graph: {FW}
steps:
  - user: go
  - eligible: {{guidance: true}}
  - model:
      calls:
        - {{tool: goto_stage, id: g1, args: {{stage: implement}}, review: suspend}}
  - end_turn: aborted
  - expect: {{stage: explore, pending_stage: null}}
""", tmp_path)
    assert result.ok, [f.line() for f in result.failures]
    types = [e.type for e in result.log.events]
    assert types[-4:] == ["fsm/review/answer", "tool/result", "step/end", "turn/end"]
    answer = result.log.events[-4].data
    assert (answer["outcome"], answer["by"]) == ("dismiss", "cancel")
    assert "the user stops the suspended turn" in render_human(result)


def test_resume_before_the_answer_stays_suspended(tmp_path: Path) -> None:
    result = run_text(f"""\
graph: {FW}
steps:
  - command: /plan Plan it.
  - model:
      calls:
        - {{tool: exit_plan_mode, args: {{plan: "# P"}}, review: suspend}}
  - resume: true
  - answer: {{outcome: approve}}
  - resume: true
  - model: Done.
  - expect: {{plan_mode: false}}
""", tmp_path)
    assert result.ok, [f.line() for f in result.failures]
    text = render_human(result)
    assert text.count("turn 1 suspended: review rv_") == 2
    assert [e.type for e in result.log.events].count("tool/result") == 1


def test_dump_then_load_round_trips_answer_and_resume_steps() -> None:
    steps = [ModelStep("", (ToolCall("goto_stage", {"stage": "b"}, Review("suspend"), id="c1"),)),
             AnswerReview("approve", "c1", option="Approve and keep the conversation"),
             AnswerReview("keep", "last", feedback="line one\nline two"),
             AnswerReview("dismiss"), Resume()]
    text = dump_scenario("g.yaml", SessionSettings(id="x"), steps)
    assert load_scenario_text(text).steps == tuple(steps)


def _problems(steps: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_scenario_text(f"graph: {FW}\nsteps:\n{steps}", "s.yaml")
    return [str(p) for p in info.value.details]


def test_bad_answer_and_resume_steps_are_positioned_errors() -> None:
    assert _problems("""\
  - answer: {call: c1, outcome: approved}
  - answer: {call: "", outcome: keep, option: Approve}
  - answer: {outcome: approve, feedback: nice, by: cli}
  - answer: {call: c1}
  - answer: approve
  - resume: yes
  - resume: false
""") == [
        "s.yaml:3:33: steps[0].answer.outcome: expected approve, keep, dismiss or expire, got 'approved'",
        "s.yaml:4:20: steps[1].answer.call: expected a non-empty string, got ''",
        "s.yaml:4:47: steps[1].answer.option: `option` picks an approve option; only with `outcome: approve`",
        "s.yaml:5:42: steps[2].answer.feedback: `feedback` is the reviewer's comments; only with "
        "`outcome: keep`",
        "s.yaml:5:48: steps[2].answer.by: unknown key (expected call, outcome, option, feedback, reviewer, "
        "edited)",
        "s.yaml:6:13: steps[3].answer: missing `outcome`: approve, keep, dismiss or expire",
        "s.yaml:7:13: steps[4].answer: expected a mapping {call: ID | last, outcome: approve | keep | "
        "dismiss | expire, option, feedback, reviewer, edited}",
        "s.yaml:8:13: steps[5].resume: expected true (resume the suspended turn), got 'yes'",
        "s.yaml:9:13: steps[6].resume: expected true (resume the suspended turn), got false",
    ]


@pytest.mark.parametrize(("steps", "message"), [
    ("  - answer: {outcome: approve}\n  - resume: true\n  - model: ok\n  - answer: {outcome: keep}\n",
     r"s\.yaml:8:5: answer: no open review for call 'last' \(open: none\)"),
    ("  - answer: {call: nope, outcome: approve}\n",
     r"s\.yaml:5:5: answer: no open review for call 'nope' \(open: g1 \(rv_\w+\)\)"),
    ("  - answer: {call: g1, outcome: approve, option: Maybe}\n",
     r"s\.yaml:5:5: answer: review rv_\w+: 'Maybe' is not an approve option \(options: Approve\)"),
    ("  - answer: {outcome: dismiss}\n  - answer: {call: g1, outcome: approve}\n",
     r"s\.yaml:6:5: answer: no open review for call 'g1' \(open: none\)"),
    ("  - answer: {outcome: approve}\n  - resume: true\n  - model: ok\n  - resume: true\n",
     r"s\.yaml:8:5: resume: no suspended tool call in the open turn"),
    ("  - model: Still here?\n",
     r"s\.yaml:5:5: model step while the turn is suspended \(a review waits for its answer\); add an "
     r"`answer` step and a `resume: true` step first"),
])
def test_bad_answer_and_resume_runs_name_the_step(tmp_path: Path, steps: str, message: str) -> None:
    text = f"""\
graph: {FW}
steps:
  - user: go
  - model: {{calls: [{{tool: goto_stage, id: g1, args: {{stage: implement}}, review: suspend}}]}}
""" + steps
    with pytest.raises(SimulationError, match=message):
        run_text(text, tmp_path)


def _ev(seq: int, type: str, data: dict[str, Any]) -> Any:
    from fsm_stage.log.events import Event

    return Event(type, seq, 0, data)


def _reviewed_turn(answer: dict[str, Any] | None, result_text: str, is_error: bool) -> list[Any]:
    """One turn: a goto_stage call, its review request, ``answer`` (if any), its tool result."""
    call = {"type": "tool-call", "id": "g1", "name": "goto_stage", "arguments": '{"stage": "implement"}'}
    events = [
        _ev(0, "turn/start", {"turn": 1}),
        _ev(1, "user/message", {"content": [{"type": "text", "text": "go"}], "source": {"kind": "user"}}),
        _ev(2, "assistant/message", {"message": {"role": "assistant", "content": [call]}}),
        _ev(3, "tool/call", {"callId": "g1", "name": "goto_stage", "arguments": '{"stage": "implement"}'}),
        _ev(4, "fsm/review/request", {"id": "rv_1", "callId": "g1", "kind": "stage", "from": "explore",
                                      "target": "implement",
                                      "options": ["Approve", "Approve and keep the conversation",
                                                  "Keep current stage"]}),
    ]
    if answer is not None:
        events.append(_ev(5, "fsm/review/answer", {"id": "rv_1", **answer}))
    events.append(_ev(6, "tool/result", {"message": {"source": {"kind": "tool", "callId": "g1"}, "content": [
        {"type": "tool-result", "toolCallId": "g1", "content": [{"type": "text", "text": result_text}],
         "isError": is_error}]}}))
    return events


@pytest.mark.parametrize(("answer", "review"), [
    ({"outcome": "dismiss", "by": "channel"}, Review("dismiss")),
    ({"outcome": "keep", "feedback": "not yet", "by": "channel"}, Review("feedback", "not yet")),
    ({"outcome": "keep", "feedback": None, "by": "channel"}, Review("keep")),
])
def test_replay_takes_review_outcomes_from_the_logged_answer(answer: dict[str, Any], review: Review) -> None:
    """A result text no catalog knows (another host's wording) no longer decides the outcome:
    the logged ``fsm/review/answer`` does."""
    from fsm_stage.scenario import replay_events

    steps = replay_events(_reviewed_turn(answer, "Error: something else happened", True)).steps
    (model,) = [s for s in steps if isinstance(s, ModelStep)]
    assert model.calls[0].review == review


def test_replay_of_an_answer_given_later_keeps_its_option() -> None:
    """An approval recorded through the API with a non-default option replays as an `answer`
    step naming it, after the call's `review: suspend`, followed by `resume`."""
    from fsm_stage.scenario import replay_events

    light = "Approve and keep the conversation"
    events = _reviewed_turn({"outcome": "approve", "option": light, "by": "cli"}, "ok", False)
    steps = [s for s in replay_events(events).steps if isinstance(s, ModelStep | AnswerReview | Resume)]
    assert steps[1:] == [AnswerReview("approve", "g1", option=light), Resume()]
    assert isinstance(steps[0], ModelStep) and steps[0].calls[0].review == Review("suspend")
