"""Scenario ``answer`` steps for an approval with edits (``edited``) and a review its deadline
closes (``outcome: expire``), and ``fsm-stage scenario`` writing both back from a log, so a
replay gives the model the same text (an edited document; the expiry's refusal)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import DESIGN_BUILD, SUSPENDED_GOTO, graph_ref, record_and_replay, run_text

from fsm_stage.errors import ConfigError
from fsm_stage.log.dsh import read_log
from fsm_stage.scenario import AnswerReview, load_scenario_text
from fsm_stage.simulate import SimulationError

GRAPH = """\
name: deadlines
section: When done, call goto_stage with one of << stage_targets >>.
review: RULES
""" + DESIGN_BUILD

SCENARIO = "graph: g.yaml\nsession: {id: edits-demo}\nsteps:\n" + SUSPENDED_GOTO + """\
  - ANSWER
  - resume: true
  - expect: {next_request: {stage: STAGE}}
  - model: Done.
"""

EDITED = "# Handoff\n\nBuild it, tests first."


def _write(tmp_path: Path, rules: str, answer: str, stage: str) -> Path:
    (tmp_path / "g.yaml").write_text(GRAPH.replace("RULES", rules), encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.replace("ANSWER", answer).replace("STAGE", stage), encoding="utf-8")
    return scenario


def _answers_and_results(path: Path) -> list[tuple[object, ...]]:
    """What the reviews decided and what the model read back, from the log at ``path``."""
    out: list[tuple[object, ...]] = []
    for ev in read_log(path).events:
        d = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == "fsm/review/answer":
            out.append((d.get("outcome"), d.get("by"), d.get("edited"), d.get("feedback")))
        elif ev.type == "tool/result":
            out.append(("result", *_texts(d)))
    return out


def _texts(value: object) -> list[str]:
    """Every ``text`` string inside a logged message (ids left out)."""
    if isinstance(value, dict):
        own = [value["text"]] if isinstance(value.get("text"), str) else []
        return own + [t for k, v in value.items() if k != "text" for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def test_an_answer_step_approves_with_edits_and_the_replay_keeps_them(tmp_path: Path) -> None:
    answer = "answer: {call: call_goto, outcome: approve, edited: \"" + EDITED.replace("\n", "\\n") + "\"}"
    scenario = _write(tmp_path, "{}", answer, "build")
    log, log2, written = record_and_replay(tmp_path, scenario, tmp_path / "g.yaml")
    (decided, *_rest) = [a for a in _answers_and_results(log) if a[0] != "result"]
    assert decided == ("approve", "api", EDITED, None)
    assert (tmp_path / "w1" / "handoff" / "edits-demo" / "build.md").read_text(encoding="utf-8") == EDITED
    assert "edited: " in written
    assert (tmp_path / "w2" / "handoff" / "edits-demo" / "build.md").read_text(encoding="utf-8") == EDITED
    moved = [tuple(str(x).replace(str(tmp_path / "w2"), str(tmp_path / "w1")) if x is not None else None
                   for x in a) for a in _answers_and_results(log2)]
    assert moved == _answers_and_results(log)  # the same answers, the same results (in its own cwd)


def test_an_expire_step_closes_the_review_as_its_deadline_does_and_replays(tmp_path: Path) -> None:
    scenario = _write(tmp_path, "{deadline: 30m, on_deadline: keep}",
                      "answer: {call: call_goto, outcome: expire}", "design")
    log, log2, written = record_and_replay(tmp_path, scenario, tmp_path / "g.yaml")
    trail = _answers_and_results(log)
    (decided,) = [a for a in trail if a[0] != "result"]
    assert decided[:2] == ("keep", "deadline") and "No reviewer answered" in str(decided[3])
    assert any(a[0] == "result" and "deadline" in str(a[1]).lower() for a in trail), trail
    assert "outcome: expire" in written and "No reviewer answered" not in written
    assert _answers_and_results(log2) == trail


def test_expire_needs_a_review_with_a_deadline(tmp_path: Path) -> None:
    scenario = _write(tmp_path, "{}", "answer: {call: call_goto, outcome: expire}", "design")
    with pytest.raises(SimulationError, match=r"s\.yaml:11:5: answer: expire: review rv_\w+ \(call_goto\) "
                                              r"has no deadline"):
        run_text(scenario.read_text(encoding="utf-8"), tmp_path)


@pytest.mark.parametrize(("answer", "problem"), [
    ("{outcome: keep, edited: text}", "edited: `edited` approves the reviewer's version"),
    ("{outcome: expire, feedback: late}", "feedback: nobody answers a review its deadline closes"),
    ("{outcome: expire, reviewer: alice}", "reviewer: nobody answers a review its deadline closes"),
    ("{outcome: approve, edited: ''}", "edited: expected a non-empty string"),
])
def test_answer_keys_that_do_not_fit_the_outcome_are_positioned_errors(answer: str, problem: str) -> None:
    text = f"graph: {graph_ref('feature-work.yaml')}\nsteps:\n  - answer: {answer}\n"
    where = r"s\.yaml:3:\d+: steps\[0\]\.answer\." + problem.split(":")[0]
    with pytest.raises(ConfigError, match=where) as err:
        load_scenario_text(text, "s.yaml")
    assert problem.split(": ", 1)[1] in str(err.value)


def test_edited_and_expire_round_trip_through_load() -> None:
    text = (f"graph: {graph_ref('feature-work.yaml')}\nsteps:\n"
            "  - answer: {outcome: approve, edited: \"# New\"}\n"
            "  - answer: {call: c1, outcome: expire}\n")
    steps = load_scenario_text(text, "s.yaml").steps
    assert list(steps) == [AnswerReview("approve", "last", None, None, edited="# New"),
                           AnswerReview("expire", "c1")]
