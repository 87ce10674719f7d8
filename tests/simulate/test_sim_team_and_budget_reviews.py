"""Scenarios over graphs with team rules and budget reviews: an ``answer`` step names its
``reviewer`` (the review's rules decide; a quorum takes one step per reviewer), a budget review
waits for an ``answer`` step, and ``fsm-stage scenario`` + ``simulate`` reproduce such a log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_helpers import DESIGN_BUILD, SUSPENDED_GOTO, graph_ref, invoke, run_text

from fsm_stage.log.dsh import read_log
from fsm_stage.scenario import AnswerReview, load_scenario_text
from fsm_stage.simulate import SimulationError

GRAPH = """\
name: team
section: When done, call goto_stage with one of << stage_targets >>.
review: {approvers: [alice, bob], quorum: QUORUM}
""" + DESIGN_BUILD + """\
    budget: {turns: TURNS}
    on_budget: review
"""

TEAM = "graph: g.yaml\nsession: {id: team-demo}\nsteps:\n" + SUSPENDED_GOTO + """\
ANSWERS  - resume: true
  - expect: {next_request: {stage: build}}
  - model: Building.
  - user: More.
  - expect: {stage: build}
  - model: Done.
"""


def _write(tmp_path: Path, quorum: int, answers: str, turns: int = 9) -> Path:
    graph = GRAPH.replace("QUORUM", str(quorum)).replace("TURNS", str(turns))
    (tmp_path / "g.yaml").write_text(graph, encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TEAM.replace("ANSWERS", answers), encoding="utf-8")
    return scenario


def _simulate(tmp_path: Path, scenario: Path, name: str) -> tuple[Path, str]:
    """``fsm-stage simulate SCENARIO --log tmp_path/<name>.jsonl``, which must pass: the log and
    the report."""
    log = tmp_path / f"{name}.jsonl"
    code, out, err = invoke("simulate", str(scenario), "--log", str(log),
                            "--cwd", str(tmp_path / f"w-{name}"))
    assert code == 0, out + err
    return log, out


def _record(tmp_path: Path, text: str, name: str = "rec") -> tuple[Path, str]:
    """Simulate scenario ``text``, written as ``tmp_path/<name>.yaml`` (``_simulate``)."""
    scenario = tmp_path / f"{name}.yaml"
    scenario.write_text(text, encoding="utf-8")
    return _simulate(tmp_path, scenario, name)


def test_an_answer_step_names_its_reviewer_and_the_rules_decide(tmp_path: Path) -> None:
    _write(tmp_path, 1, "")
    text = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve}\n")
    with pytest.raises(SimulationError, match=r"s\.yaml:11:5: answer: .*its rules need a named reviewer"):
        run_text(text, tmp_path)
    named = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    result = run_text(named, tmp_path)
    assert result.ok, result.failures


def test_a_scripted_approve_of_a_review_that_needs_a_named_reviewer_is_an_error(tmp_path: Path) -> None:
    """The channel's approve answers for nobody under approvers: the run stops saying what to
    write (it went on with the review open and passed)."""
    _write(tmp_path, 1, "")
    text = TEAM.replace("review: suspend", "review: approve").replace("ANSWERS  - resume: true\n", "")
    with pytest.raises(SimulationError, match=r"s\.yaml:\d+:\d+: goto_stage \(call_goto\): the review's "
                                              r"rules need a named reviewer .* `review: suspend`"):
        run_text(text, tmp_path)


def test_a_quorum_takes_one_answer_step_per_reviewer(tmp_path: Path) -> None:
    _write(tmp_path, 2, "")
    votes = ("  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n"
             "  - answer: {call: call_goto, outcome: approve, reviewer: bob}\n")
    assert run_text(TEAM.replace("ANSWERS", votes), tmp_path).ok


def test_group_approvers_resolve_through_the_scenarios_reviewers_file(tmp_path: Path) -> None:
    """``reviewers:`` names a reviewers file (relative to the scenario) whose groups resolve an
    edge's ``@group`` approvers; without it the answer fails with the rules' hint."""
    _write(tmp_path, 1, "")
    graph = tmp_path / "g.yaml"
    text = graph.read_text(encoding="utf-8").replace("approvers: [alice, bob]", "approvers: ['@leads']")
    graph.write_text(text, encoding="utf-8")
    team = "reviewers:\n  alice: {groups: [leads]}\n  bob: {}\n"
    (tmp_path / "team.yaml").write_text(team, encoding="utf-8")
    by_bob = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: bob}\n")
    with pytest.raises(SimulationError, match=r"not among the approvers.*@groups resolve only with the"):
        run_text(by_bob, tmp_path)
    by_alice = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    with pytest.raises(SimulationError, match="alice is not among the approvers"):
        run_text(by_alice, tmp_path)  # no reviewers file: @leads names nobody
    with_team = "reviewers: team.yaml\n" + by_alice
    assert run_text(with_team, tmp_path).ok
    log, _out = _record(tmp_path, with_team, "team-rec")
    code, _text, err = invoke("scenario", str(log), "--graph", str(graph))
    assert code == 0 and "name @group approvers; add `reviewers: FILE`" in err
    with pytest.raises(SimulationError, match="bob is not among the approvers"):
        run_text("reviewers: team.yaml\n" + by_bob, tmp_path)


def test_a_missing_reviewers_file_is_a_positioned_error(tmp_path: Path) -> None:
    from fsm_stage.errors import ConfigError

    path = tmp_path / "s.yaml"
    text = f"graph: {graph_ref('feature-work.yaml')}\nreviewers: nope.yaml\nsteps:\n  - user: Hi.\n"
    with pytest.raises(ConfigError, match=r"s\.yaml:2:\d+: reviewers: .*nope\.yaml' is not a file"):
        load_scenario_text(text, str(path))
    with pytest.raises(ConfigError, match="reviewers: expected a reviewers file"):
        load_scenario_text(text.replace("nope.yaml", "[1]"), str(path))


BUDGET_TAIL = """\
  - user: More.
  - end_turn: blocked
  - answer: {call: last, outcome: approve, option: Continue with a fresh budget, reviewer: alice}
  - expect: {stage: build}
  - model: Building with a fresh budget.
"""


def test_a_budget_review_waits_for_an_answer_step(tmp_path: Path) -> None:
    """The budget ran out: the scripted reviewer does not answer at the boundary (no call asked
    it), the turn stops, and an ``answer`` step with the budget's option continues."""
    _write(tmp_path, 1, "", turns=1)
    text = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    text = text.removesuffix("  - user: More.\n  - expect: {stage: build}\n  - model: Done.\n") + BUDGET_TAIL
    log, out = _record(tmp_path, text)
    assert "budget review: nobody answers now" in out and "stopped before a request: budget of stage" in out
    kinds = [e.data.get("kind") for e in read_log(log).events if e.type == "fsm/review/request"]
    assert kinds == ["stage", "budget"]
    actions = [e.data.get("action") for e in read_log(log).events if e.type == "fsm/budget"]
    assert "fresh" in actions


def test_the_answer_steps_reviewer_round_trips_through_dump_and_load() -> None:
    text = (f"graph: {graph_ref('feature-work.yaml')}\nsteps:\n"
            "  - answer: {call: last, outcome: approve, reviewer: alice}\n")
    (step,) = load_scenario_text(text, "s.yaml").steps
    assert step == AnswerReview("approve", "last", None, None, reviewer="alice")


def test_a_model_step_a_budget_stops_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A model step whose turn a budget stops before any request: one error naming the step
    and what to do (the run once retried the stopped turn forever, growing the log)."""
    _write(tmp_path, 1, "", turns=1)
    text = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    text = text.replace("  - expect: {stage: build}\n  - model: Done.\n", "  - model: Never asked.\n")
    with pytest.raises(SimulationError) as err:
        run_text(text, tmp_path)
    assert "s.yaml:16:5: model step, but no request was made: budget of stage build ran out" in str(err.value)
    assert "write `end_turn: blocked` here" in str(err.value)
    no_turn = TEAM.replace("ANSWERS", "").replace("  - resume: true\n", "  - end_turn: blocked\n", 1)
    with pytest.raises(SimulationError, match="end_turn: blocked needs a waiting turn"):
        run_text(no_turn, tmp_path)


def _trace(path: Path) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for ev in read_log(path).events:
        d = ev.data if isinstance(ev.data, dict) else {}
        if ev.type == "fsm/review/request":
            out.append((ev.type, d.get("kind"), d.get("target")))
        elif ev.type == "fsm/review/answer":
            out.append((ev.type, d.get("outcome"), d.get("option"), tuple(d.get("reviewers") or ())))
        elif ev.type in ("fsm/budget", "turn/end"):
            out.append((ev.type, d.get("action") or (d.get("reason") or {}).get("kind")))
    return out


def test_scenario_then_simulate_reproduces_team_answers_and_a_budget_review(tmp_path: Path) -> None:
    """`fsm-stage scenario` of a log with a named reviewer's answers (a quorum of two) and a
    budget stop answered later writes `reviewer`, `end_turn: blocked` and the budget's `answer`;
    simulating it writes the same reviews, answers, budget events and turn ends."""
    _write(tmp_path, 2, "", turns=1)
    votes = ("  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n"
             "  - answer: {call: call_goto, outcome: approve, reviewer: bob}\n")
    text = TEAM.replace("ANSWERS", votes).removesuffix(
        "  - user: More.\n  - expect: {stage: build}\n  - model: Done.\n") + BUDGET_TAIL.replace(
        "reviewer: alice}", "reviewer: alice}\n  - answer: {call: last, outcome: approve, "
        "option: Continue with a fresh budget, reviewer: bob}")
    log, _ = _record(tmp_path, text)
    replay = tmp_path / "replay.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(replay))
    assert code == 0, err
    written = replay.read_text(encoding="utf-8")
    assert "end_turn: blocked" in written and "reviewer: bob" in written and "fresh budget" in written
    log2, _ = _simulate(tmp_path, replay, "replayed")
    assert _trace(log2) == _trace(log)
    assert ("fsm/budget", "fresh") in _trace(log)


def test_an_open_budget_review_is_listed_with_where_its_budget_ran_out(tmp_path: Path) -> None:
    _write(tmp_path, 1, "", turns=1)
    text = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    text = text.replace("  - expect: {stage: build}\n  - model: Done.\n", "  - end_turn: blocked\n")
    log, _ = _record(tmp_path, text)
    code, out, err = invoke("review", str(log), "--list")
    assert code == 0, err
    (line,) = [ln for ln in out.splitlines() if " budget: " in ln]
    assert "budget: build (its budget ran out)  (call budget:stage:" in line
    assert "options: Continue with a fresh budget | Move to design | Stop" in out
    code, out, err = invoke("inbox", "list", str(tmp_path))
    assert code == 0, err
    assert "\tbudget\tbuild (its budget ran out)\t" in out


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_log_ending_on_a_budget_stop_or_a_kept_budget_review_replays(tmp_path: Path, language: str) -> None:
    """The replay of a log that ends on a budget stop ends there too (no empty model step after
    it), also after a budget review answered keep and asked again, whatever the graph's language
    (the stop is recognised by its ``fsm/budget`` event, not by its wording)."""
    _write(tmp_path, 1, "", turns=1)
    graph = tmp_path / "g.yaml"
    text = graph.read_text(encoding="utf-8").replace("stages:\n", f"language: {language}\nstages:\n", 1)
    graph.write_text(text, encoding="utf-8")
    head = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    head = head.removesuffix("  - expect: {stage: build}\n  - model: Done.\n") + "  - end_turn: blocked\n"
    kept = head + ("  - answer: {call: last, outcome: keep, feedback: not now, reviewer: alice}\n"
                   "  - user: Again.\n  - end_turn: blocked\n")
    for name, text in (("ends", head), ("kept", kept)):
        log, _ = _record(tmp_path, text, name)
        replay = tmp_path / f"re-{name}.yaml"
        code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(replay))
        assert code == 0, err
        assert replay.read_text(encoding="utf-8").rstrip().endswith("end_turn: blocked"), name
        log2, _ = _simulate(tmp_path, replay, f"re-{name}")
        assert _trace(log2) == _trace(log)


def test_state_shows_an_approved_budget_answer_not_applied_yet(tmp_path: Path) -> None:
    """Between the answer and the next boundary a budget review is neither open nor applied:
    `state` lists it as approved, with the option chosen."""
    import json

    _write(tmp_path, 1, "", turns=1)
    text = TEAM.replace("ANSWERS", "  - answer: {call: call_goto, outcome: approve, reviewer: alice}\n")
    text = text.replace("  - expect: {stage: build}\n  - model: Done.\n",
                        "  - end_turn: blocked\n"
                        "  - answer: {call: last, outcome: approve, option: Move to design, reviewer: bob}\n")
    log, _ = _record(tmp_path, text)
    code, out, err = invoke("state", "--json", str(log))
    assert code == 0, err
    reviews = json.loads(out)["reviews"]
    assert reviews["open"] == []
    assert [(r["kind"], r["option"]) for r in reviews["approved"]] == [("budget", "Move to design")]
    code, out, err = invoke("state", str(log))
    assert "(budget: Move to design); applied at the next step" in out
    code, out, err = invoke("draw", str(tmp_path / "g.yaml"), "--log", str(log), "--format", "mermaid")
    assert code == 0, err
    assert "s_build --> s_design: (pending)" in out and "class s_design pending" in out, out


# GRAPH without review rules, a one-turn budget in build, and a third stage to move to
STALE_GRAPH = (GRAPH.replace("review: {approvers: [alice, bob], quorum: QUORUM}\n", "")
               .replace("targets: [design]\n", "targets: [design, verify]\n").replace("TURNS", "1")
               + "  - name: verify\n    instruction: Verify.\n    targets: [build]\n")

STALE = """\
graph: g.yaml
steps:
  - user: Start.
  - model:
      calls:
        - {tool: goto_stage, id: g1, args: {stage: build, handoff: "# H"}, review: approve}
  - model: Building.
  - user: More.
  - end_turn: blocked
  - answer: {call: last, outcome: approve, option: Move to verify}
TAIL"""


def test_an_approved_budget_move_of_an_ended_visit_is_stale_not_pending(tmp_path: Path) -> None:
    """Answered "Move to verify", then the user jumped elsewhere: the next boundary redeems only
    the current visit's review, so `state` says it is never applied and `draw` marks no move
    (it drew one from the wrong stage)."""
    graph = tmp_path / "g.yaml"
    graph.write_text(STALE_GRAPH, encoding="utf-8")
    waiting, _ = _record(tmp_path, STALE.replace("TAIL", ""), "waiting")
    code, out, err = invoke("draw", str(graph), "--log", str(waiting), "--format", "mermaid")
    assert code == 0 and "s_build --> s_verify: (pending)" in out, out + err
    jump = "  - command: /stage design\n  - model: Designing.\n"
    jumped, _ = _record(tmp_path, STALE.replace("TAIL", jump), "jumped")
    code, out, err = invoke("state", "--json", str(jumped))
    (approved,) = json.loads(out)["reviews"]["approved"]
    assert (approved["kind"], approved["option"], approved["stale"]) == ("budget", "Move to verify", True)
    code, out, err = invoke("state", str(jumped))
    assert "(budget: Move to verify); never applied: its stage visit ended" in out
    code, out, err = invoke("draw", str(graph), "--log", str(jumped), "--format", "mermaid")
    assert code == 0 and "pending" not in out, out


def test_a_bad_reviewers_file_is_one_line_before_any_log_is_written(tmp_path: Path) -> None:
    _write(tmp_path, 1, "")
    (tmp_path / "team.yaml").write_text("reviewers: [alice]\n", encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("reviewers: team.yaml\n" + TEAM.replace("ANSWERS", ""), encoding="utf-8")
    log = tmp_path / "out.jsonl"
    code, _out, err = invoke("simulate", str(scenario), "--log", str(log))
    assert code == 1 and "team.yaml" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not log.exists()




def test_a_model_steps_usage_is_counted_by_token_budgets_and_replays(tmp_path: Path) -> None:
    """``model: {text, usage}`` logs the request's token counts, so a ``tokens_out`` budget stops
    the next turn in the simulator as it would live (without usage the simulator never spent a
    token, helper-83); ``fsm-stage scenario`` of that log writes the usage back and simulating it
    stops again."""
    from two_stages import TOKEN_BUDGET

    (tmp_path / "g.yaml").write_text(TOKEN_BUDGET, encoding="utf-8")
    text = ("graph: g.yaml\nsteps:\n  - user: one\n"
            "  - model: {text: ok, usage: {inputTokens: 900, outputTokens: 500, cacheReadTokens: 300}}\n"
            "  - user: two\n  - end_turn: blocked\n")
    log, _ = _record(tmp_path, text)
    (usage,) = [e.data["usage"] for e in read_log(log).events if e.type == "assistant/message"]
    assert usage == {"inputTokens": 900, "outputTokens": 500, "cacheReadTokens": 300}
    replay = tmp_path / "replay.yaml"
    code, _, err = invoke("scenario", str(log), "--graph", str(tmp_path / "g.yaml"), "-o", str(replay))
    assert code == 0, err
    assert "outputTokens: 500" in replay.read_text(encoding="utf-8")
    log2, _ = _simulate(tmp_path, replay, "replayed")
    assert _trace(log2) == _trace(log)
    bad = text.replace("outputTokens: 500", "outputTokens: -1").replace("cacheReadTokens", "cached")
    from fsm_stage.errors import ConfigError

    with pytest.raises(ConfigError) as err_info:
        load_scenario_text(bad, str(tmp_path / "s.yaml"))
    problems = str(err_info.value)
    assert "usage.outputTokens: expected a whole number of tokens" in problems
    assert "usage.cached: unknown key" in problems
