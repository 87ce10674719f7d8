"""How the simulator runs scenario steps through the reference loop (timing and errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import SHIPPED, graph_ref, run_text

from fsm_stage.errors import UserError
from fsm_stage.scenario import load_scenario
from fsm_stage.simulate import SimulationError, SimulationResult, simulate

FW = graph_ref("feature-work.yaml")


def _turn_ends(result: SimulationResult) -> list[str]:
    return [e.data["reason"]["kind"] for e in result.log.events if e.type == "turn/end"]


def test_steps_between_model_steps_run_after_the_tools_and_before_the_next_request(tmp_path: Path) -> None:
    """A mid-turn /stage is queued (the turn is open) and flushed at the next accepted pre-step,
    narrated because the model was last told another stage (docs/contracts.md)."""
    result = run_text(f"""graph: {FW}
steps:
  - user: go
  - model:
      calls: [{{tool: read_file, args: {{path: a}}, result: "content"}}]
  - command: /stage verify
  - expect: {{stage: explore, pending_stage: verify}}
  - model: done
  - expect: {{stage: verify, pending_stage: null}}
""", tmp_path)
    assert result.failures == ()
    second = result.records[1]
    assert second.stage == "verify"
    assert second.messages[-1].text.startswith(
        "The user switched this session to stage verify. Current stage: verify")
    assert second.prefix.messages == "kept"


def test_end_turn_aborted_stops_the_open_turn(tmp_path: Path) -> None:
    result = run_text(f"""graph: {FW}
steps:
  - user: go
  - model:
      calls: [{{tool: read_file, args: {{path: a}}, result: "content"}}]
  - end_turn: aborted
  - user: again
  - model: ok
  - end_turn: completed
""", tmp_path)
    assert _turn_ends(result) == ["aborted", "completed"]
    assert len(result.records) == 2


def test_review_abort_fails_the_call_and_aborts_the_turn(tmp_path: Path) -> None:
    result = run_text(f"""graph: {FW}
steps:
  - user: go
  - model:
      calls: [{{tool: goto_stage, args: {{stage: implement}}, review: abort}}]
  - expect: {{stage: explore, pending_stage: null}}
""", tmp_path)
    assert result.failures == ()
    assert _turn_ends(result) == ["aborted"]
    results = [e for e in result.log.events if e.type == "tool/result"]
    assert results[-1].data["message"]["content"][0]["isError"] is True


def test_a_review_without_a_scripted_outcome_stops_the_run(tmp_path: Path) -> None:
    pattern = r"s\.yaml:4:5: goto_stage asked the human a review \(stage-review\)"
    with pytest.raises(SimulationError, match=pattern):
        run_text(f"""graph: {FW}
steps:
  - user: go
  - model:
      calls: [{{tool: goto_stage, args: {{stage: implement}}}}]
  - model: ok
""", tmp_path)


def test_a_turn_left_open_at_the_end_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match="has no model step to answer it"):
        run_text(f"""graph: {FW}
steps:
  - user: go
  - model:
      calls: [{{tool: read_file, args: {{path: a}}, result: "x"}}]
""", tmp_path)


@pytest.mark.parametrize(("steps", "message"), [
    ("  - user: go\n", "ends with a user message that no model step answers"),
    ("  - end_turn: aborted\n", "end_turn: aborted, but no turn is open"),
    ("  - user: go\n  - model:\n      calls: [{tool: read_file, result: x}]\n  - end_turn: completed\n",
     "end_turn: completed, but the turn is still open"),
    ("  - eligible: {test_written: true}\n",
     "unknown eligibility predicate(s) test_written; this graph knows guidance, tests_written"),
])
def test_unrunnable_scenarios_are_user_errors(steps: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_text(f"graph: {FW}\nsteps:\n{steps}", tmp_path)


def test_guard_flips_open_the_guarded_edge(tmp_path: Path) -> None:
    """The scenario's named predicates are the graph's guards (feature-work: implement → verify
    needs tests_written); `guidance` is the unnamed predicate that shows stage:policy (S32)."""
    result = run_text(f"""graph: {FW}
eligible: {{guidance: true}}
steps:
  - user: go
  - expect:
      next_request: {{contains: ["When the current stage (explore) is complete"]}}
  - model:
      calls: [{{tool: goto_stage, args: {{stage: implement}}, review: approve}}]
  - eligible: {{tests_written: true}}
  - expect:
      next_request: {{contains: ["call goto_stage with one of:\\nverify, explore."]}}
  - model:
      calls: [{{tool: goto_stage, args: {{stage: verify}}, review: approve}}]
  - model: verifying
  - expect: {{stage: verify}}
""", tmp_path)
    assert result.failures == (), [f.line() for f in result.failures]


def test_unhandled_commands_are_noted_not_fatal(tmp_path: Path) -> None:
    text = f"graph: {graph_ref('seed-plan-mode.yaml')}\nsteps:\n  - command: /permission read-only\n"
    result = run_text(text, tmp_path)
    assert [n.text for n in result.notes] == [
        "/permission read-only → not handled (no /permission command here)"]
    assert result.log.events == []


def test_host_system_sections_come_first_and_stay(tmp_path: Path) -> None:
    result = run_text(f"""graph: {FW}
system:
  - {{name: host, order: 0, text: You are a coding agent.}}
  - {{name: repo-rules, order: 60, text: Never push to main.}}
steps:
  - command: /plan design it
  - model: here is a thought
""", tmp_path)
    (record,) = result.records
    assert [(s.order, s.name) for s in record.sections] == [
        (0, "host"), (50, "plan:policy"), (60, "repo-rules")]


def test_initial_predicate_names_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match=r"s\.yaml: eligible: unknown eligibility predicate\(s\) ready"):
        run_text(f"graph: {FW}\neligible: {{ready: true}}\nsteps:\n  - user: hi\n  - model: ok\n", tmp_path)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_context_shown_is_what_the_request_sends(path: Path, tmp_path: Path) -> None:
    """The `context` entries of request N are exactly the runtime-context snapshot request N
    carries, also right after a stage change."""
    result = simulate(load_scenario(path), cwd=tmp_path)
    checked = 0
    for record in result.records:
        snapshots = [m for m in record.messages if m.source.endswith(" snapshot")]
        if not record.context:
            continue
        assert snapshots, f"request {record.index} shows context but sends no snapshot"
        body = snapshots[-1].text.split("\n\n", 1)[1]
        assert body == "\n\n".join(c.text for c in record.context), f"request {record.index}"
        for c in record.context:  # feature-work's guidance names the stage the request is sent in
            if "current stage (" in c.text:
                assert f"current stage ({record.stage})" in c.text, f"request {record.index}"
        checked += 1
    assert checked or path.stem in {"refused-transition"}
