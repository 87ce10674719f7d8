"""Replay of recorded DSH sessions: ``fsm-stage scenario LOG`` then ``fsm-stage simulate``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_helpers import GRAPHS, SCENARIOS, SHIPPED

from fsm_stage.cli import main
from fsm_stage.log.dsh import read_log
from fsm_stage.scenario import (
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    Review,
    SessionSettings,
    ToolCall,
    UserPrompt,
    dump_scenario,
    load_scenario,
    load_scenario_text,
    steps_from_events,
)
from fsm_stage.scenario.model import USAGE_KEYS
from fsm_stage.simulate import simulate

SKELETON_TYPES = {"command/run", "command/done", "plan/mode", "turn/start", "turn/end", "step/start",
                  "step/end"}


def _skeleton(events: list[Any]) -> list[tuple[Any, ...]]:
    """The command / plan-mode / turn / step events in order, with their identifying fields."""
    out: list[tuple[Any, ...]] = []
    for ev in events:
        d = ev.data
        if ev.type not in SKELETON_TYPES:
            continue
        if ev.type == "plan/mode":
            out.append((ev.type, d["active"]))
        elif ev.type in ("command/run",):
            out.append((ev.type, d["name"], d.get("args")))
        elif ev.type == "command/done":
            out.append((ev.type, d["kind"]))
        elif ev.type in ("step/start", "step/end"):
            out.append((ev.type, d["turn"], d["step"]))
        else:
            out.append((ev.type, d["turn"]))
    return out


def test_plan_review_replay_puts_plan_mode_events_where_they_were_recorded(
        plan_review_log: Path, tmp_path: Path) -> None:
    """docs/session-log.md / docs/contracts.md: replaying the recorded session yields
    ``plan/mode {true}`` between the ``/plan`` command's run and done, and ``plan/mode {false}``
    between step 1's end and step 2's start, exactly as recorded."""
    runner = CliRunner()
    made = runner.invoke(main, ["scenario", str(plan_review_log)])
    assert made.exit_code == 0, made.output
    scenario = tmp_path / "replay.yaml"
    scenario.write_text(made.stdout, encoding="utf-8")
    out_log = tmp_path / "replayed.jsonl"
    ran = runner.invoke(main, ["simulate", str(scenario), "--log", str(out_log),
                               "--cwd", str(tmp_path / "w")])
    assert ran.exit_code == 0, ran.output
    recorded = _skeleton(read_log(plan_review_log).events)
    replayed = _skeleton(read_log(out_log).events)
    assert recorded == replayed
    assert ("plan/mode", True) in replayed and ("plan/mode", False) in replayed
    assert not list(tmp_path.glob(".replayed.jsonl.partial*"))


def test_replay_steps_from_the_plan_review_log(plan_review_log: Path) -> None:
    """The scenario keeps the command as typed (args verbatim), skips the text it steered,
    keeps each model answer and turns the approved exit into ``review: approve``."""
    steps = steps_from_events(read_log(plan_review_log).events)
    assert [type(s) for s in steps] == [Command, ModelStep, ModelStep]
    cmd = steps[0]
    assert isinstance(cmd, Command) and cmd.name == "plan" and cmd.args.startswith(" Plan a small change")
    first = steps[1]
    assert isinstance(first, ModelStep)
    (call,) = first.calls
    assert call.tool == "exit_plan_mode" and call.review == Review("approve")
    assert call.args["plan"].startswith("# Add `--greeting` flag")
    # each model step keeps the usage its request logged (token budgets count it on replay)
    logged = [e.data["usage"] for e in read_log(plan_review_log).events if e.type == "assistant/message"]
    assert steps[2] == ModelStep("DONE", usage={k: v for k, v in logged[-1].items() if k in USAGE_KEYS})
    assert steps[2].usage is not None and steps[2].usage["outputTokens"] == logged[-1]["outputTokens"]


def test_replay_under_another_graph(plan_review_log: Path, tmp_path: Path) -> None:
    """``simulate --graph`` re-runs a recorded session under a changed graph: with feature-work
    (plan mode plus stages) the same exit is approved and the initial stage prompt appears."""
    runner = CliRunner()
    made = runner.invoke(main, ["scenario", str(plan_review_log),
                                "--graph", str(GRAPHS / "seed-plan-mode.yaml")])
    scenario = tmp_path / "replay.yaml"
    scenario.write_text(made.stdout, encoding="utf-8")
    ran = runner.invoke(main, ["simulate", str(scenario), "--json",
                               "--graph", str(GRAPHS / "feature-work.yaml"), "--cwd", str(tmp_path / "w")])
    assert ran.exit_code == 0, ran.output
    records = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [r["stage"] for r in records] == ["explore", "explore"]
    assert "goto_stage" in records[0]["tools"]
    assert any(m["text"].startswith("Current stage: explore") for m in records[0]["messages"])


def test_recorded_outcomes_become_canned_results_and_reviews(tmp_path: Path) -> None:
    """Tools fsm_stage does not provide replay their recorded result; reviewed tools replay the
    review answer; an unfinished turn ends with ``end_turn: aborted``."""
    from fsm_stage.log.events import Event

    def ev(seq: int, type: str, data: dict[str, Any]) -> Event:
        return Event(type, seq, 0, data)

    call = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": "{\"cmd\": \"ls\"}"}
    events = [
        ev(0, "turn/start", {"turn": 1}),
        ev(1, "user/message", {"content": [{"type": "text", "text": "list files"}],
                               "source": {"kind": "user"}}),
        ev(2, "user/message", {"content": [{"type": "text", "text": "snapshot"}],
                               "source": {"kind": "plugin", "plugin": "p", "form": "snapshot"}}),
        ev(3, "assistant/message", {"message": {"role": "assistant", "content": [call]}}),
        ev(4, "tool/result", {"message": {"source": {"kind": "tool", "callId": "c1"}, "content": [
            {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "a.txt"}],
             "isError": False}]}}),
        ev(5, "turn/end", {"turn": 1, "reason": {"kind": "aborted", "cause": {"kind": "user"}}}),
    ]
    steps = steps_from_events(events)
    assert steps == [UserPrompt("list files"),
                     ModelStep("", (ToolCall("bash", {"cmd": "ls"}, result="a.txt", id="c1"),)),
                     EndTurn("aborted")]
    text = dump_scenario(str(GRAPHS / "seed-stage-switch.yaml"), SessionSettings(id="r"), steps)
    result = simulate(load_scenario_text(text, str(tmp_path / "r.yaml")), cwd=tmp_path)
    assert result.records[0].tool_names == ("bash", "goto_stage")
    turn_end = [e for e in result.log.events if e.type == "turn/end"]
    assert turn_end[-1].data["reason"]["kind"] == "aborted"


def test_dump_then_load_round_trips_awkward_strings(tmp_path: Path) -> None:
    texts = ["a\nb", "a\nb\n", "trailing \nspace", "# P\n\n- a\n", "x\n\n\n", "  lead\nx", "tab\tx\ny",
             "é\nü ✓", "yes", "null", "- dash", "{brace}", ""]
    steps = [ModelStep(t, (ToolCall("exit_plan_mode", {"plan": t}, Review("approve")),)) for t in texts]
    steps += [UserPrompt(t) for t in texts if t.strip()]
    (tmp_path / "g.yaml").write_text("", encoding="utf-8")
    text = dump_scenario("g.yaml", SessionSettings(id="x", subagent=True), steps)
    loaded = load_scenario_text(text, str(tmp_path / "x.yaml"))
    assert loaded.steps == tuple(steps)
    assert loaded.session == SessionSettings(id="x", subagent=True)


def test_scenario_command_refuses_a_file_that_is_not_a_session_log(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-log.jsonl"
    bad.write_text('{"jsonrpc": "2.0", "method": "session/update"}\n', encoding="utf-8")
    res = CliRunner().invoke(main, ["scenario", str(bad)])
    assert res.exit_code == 1
    assert "not a session log" in res.stderr and "Traceback" not in res.stderr


def test_load_scenario_accepts_the_generated_file(plan_review_log: Path, tmp_path: Path) -> None:
    made = CliRunner().invoke(main, ["scenario", str(plan_review_log)])
    path = tmp_path / "s.yaml"
    path.write_text(made.stdout, encoding="utf-8")
    scenario = load_scenario(path)
    assert scenario.session.id == "{{sessionId}}"
    assert scenario.description.startswith("Replay of ")


def test_every_recorded_session_replays(plan_review_log: Path, tmp_path: Path) -> None:
    """Robustness over DSH's recorded corpus: every session log that holds prompts, commands or
    model answers becomes a scenario that loads and runs to the end under feature-work (turns
    started by goals or reports get a prompt, unanswered turns an empty answer)."""
    from fsm_stage.errors import LogFormatError

    ran = 0
    for log in sorted(plan_review_log.parent.glob("*.jsonl")):
        try:
            res = read_log(log)
        except LogFormatError:
            continue  # ACP / stream transcripts are not session logs
        steps = steps_from_events(res.events)
        if not steps:
            continue
        text = dump_scenario(str(GRAPHS / "feature-work.yaml"),
                             SessionSettings(id="replay", subagent=res.header.is_subagent), steps)
        work = tmp_path / log.stem
        result = simulate(load_scenario_text(text, str(work / "s.yaml")), cwd=work)
        assert len(result.records) == sum(isinstance(s, ModelStep) for s in steps), log.name
        ran += 1
    assert ran >= 100


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(texts=st.lists(_TEXT, min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_dump_then_load_round_trips_any_text(texts: list[str]) -> None:
    """Whatever a recorded log holds (control characters, YAML keywords, trailing spaces), the
    YAML ``fsm-stage scenario`` writes loads back to the same steps."""
    steps = [ModelStep(t, (ToolCall("bash", {"cmd": t}, result=t, error=bool(len(t) % 2)),)) for t in texts]
    steps += [UserPrompt(t) for t in texts if t.strip()]
    text = dump_scenario("g.yaml", SessionSettings(id="x"), steps)
    loaded = load_scenario_text(text)
    assert loaded.steps == tuple(steps)


def _record_and_replay(scenario: Path, tmp_path: Path, *graph: str) -> tuple[Path, str]:
    """simulate SCENARIO --log, then `fsm-stage scenario` on that log into tmp_path/out/r.yaml."""
    runner = CliRunner()
    log = tmp_path / "recorded.jsonl"
    ran = runner.invoke(main, ["simulate", str(scenario), "--log", str(log), "--cwd", str(tmp_path / "w0")])
    assert ran.exit_code == 0, ran.output
    out = tmp_path / "out" / "r.yaml"
    (tmp_path / "out").mkdir()
    made = runner.invoke(main, ["scenario", str(log), *graph, "-o", str(out)])
    assert made.exit_code == 0, made.output
    return out, made.stderr


def test_replay_of_a_simulated_log_reproduces_the_session(tmp_path: Path) -> None:
    """The replay records the host system text, the eligibility flips the log reveals
    (guidance from the snapshots, the guard a goto_stage got past) and the recorded stage / plan
    mode of every request; re-run under the same graph it reaches verify again, uses every review
    answer and passes every recorded expectation."""
    original = simulate(load_scenario(SCENARIOS / "feature-work.yaml"), cwd=tmp_path / "w")
    replay, err = _record_and_replay(SCENARIOS / "feature-work.yaml", tmp_path,
                                     "--graph", str(GRAPHS / "feature-work.yaml"))
    assert "warning" not in err
    text = replay.read_text(encoding="utf-8")
    relative = os.path.relpath(GRAPHS / "feature-work.yaml", replay.parent)  # to the output's folder
    assert text.splitlines()[1] == f"graph: {relative}"
    assert load_scenario(replay).graph == (GRAPHS / "feature-work.yaml").resolve()
    assert "  - eligible: {guidance: true}\n" in text and "  - eligible: {tests_written: true}\n" in text
    assert text.count("  - expect: {next_request: {stage: ") == len(original.records)
    scenario = load_scenario(replay)
    assert [(s.name, s.order, s.text) for s in scenario.system] == [
        (s.name, s.order, s.text) for s in original.records[-1].sections]
    result = simulate(scenario, cwd=tmp_path / "w1")
    assert result.failures == () and result.warnings == ()
    assert result.checks == 2 * len(original.records)
    assert [r.stage for r in result.records] == [r.stage for r in original.records]
    assert [r.plan_mode for r in result.records] == [r.plan_mode for r in original.records]
    assert [r.text for r in result.records] != []
    assert result.records[-1].stage == "verify"


def test_replay_under_a_changed_graph_fails_where_it_diverges(tmp_path: Path) -> None:
    """With an extra guard on implement → verify the replayed goto_stage is refused:
    the recorded `review: approve` is flagged unused and the run fails (exit 1) at the first
    request the recording sent in verify."""
    changed = tmp_path / "changed.yaml"
    changed.write_text((GRAPHS / "feature-work.yaml").read_text(encoding="utf-8").replace(
        "guards: [tests_written]", "guards: [tests_written, reviewed]"), encoding="utf-8")
    replay, _ = _record_and_replay(SCENARIOS / "feature-work.yaml", tmp_path,
                                   "--graph", str(GRAPHS / "feature-work.yaml"))
    ran = CliRunner().invoke(main, ["simulate", str(replay), "--graph", str(changed), "--cwd",
                                    str(tmp_path / "w1")])
    assert ran.exit_code == 1
    lines = ran.stdout.splitlines()
    assert any(line.startswith("   ! warning: ") and "goto_stage" in line and "`review: approve` was not used"
               in line for line in lines)
    failed = lines[lines.index("FAILED 2 expectation(s):") + 1:]
    assert [line.split(": expect ", 1)[1] for line in failed] == [
        'next_request.stage: expected "verify" in request 8 (turn 1 step 8), got "implement"',
        'next_request.stage: expected "verify" in request 9 (turn 1 step 9), got "implement"']


def test_replay_recovers_review_comments(tmp_path: Path) -> None:
    """Reviewer feedback is not reduced to `keep`: the comment is in the recorded failure text
    and comes back as `{feedback: TEXT}`; dismissals stay dismissals, a kept stage `keep`."""
    replay, _ = _record_and_replay(SCENARIOS / "dismissed-review.yaml", tmp_path,
                                   "--graph", str(GRAPHS / "feature-work.yaml"))
    calls = [c for s in load_scenario(replay).steps if isinstance(s, ModelStep) for c in s.calls
             if c.review is not None]
    assert [c.review for c in calls] == [
        Review("dismiss"), Review("feedback", "Call the variable HELLO_GREETING, not GREETING."),
        Review("approve"), Review("dismiss"), Review("keep")] + [c.review for c in calls[5:]]
    result = simulate(load_scenario(replay), cwd=tmp_path / "w1")
    assert result.failures == () and result.warnings == ()


def test_replay_without_graph_names_the_shipped_graph_it_chose(tmp_path: Path) -> None:
    replay, err = _record_and_replay(SCENARIOS / "feature-work.yaml", tmp_path)
    assert err == "fsm-stage: note: replaying under the shipped feature-work.yaml (pass --graph to choose)\n"
    assert simulate(load_scenario(replay), cwd=tmp_path / "w1").failures == ()


def test_replay_of_stages_no_shipped_graph_has_asks_for_a_graph(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text("name: g\nsection: Go on.\nstages:\n  - {name: draft, instruction: Draft.}\n",
                     encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("graph: g.yaml\nsteps: [{user: hi}, {model: ok}]\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(main, ["simulate", str(scenario), "--log", str(tmp_path / "l.jsonl")]).exit_code == 0
    made = runner.invoke(main, ["scenario", str(tmp_path / "l.jsonl")])
    assert made.exit_code == 1 and made.stdout == ""
    assert made.stderr == ("fsm-stage: the log names stages (draft) that no shipped graph has; "
                           "pass --graph YOUR-GRAPH.yaml\n")
    made = runner.invoke(main, ["scenario", str(tmp_path / "nope.jsonl")])
    assert made.exit_code == 1 and "nope.jsonl: cannot read session log: no such file" in made.stderr


def test_every_recorded_session_replays_with_its_recorded_plan_mode(plan_review_log: Path,
                                                                    tmp_path: Path) -> None:
    """Over DSH's corpus: with the recorded plan mode of every request as expectations
    (`replay_events`), every session log replays under feature-work without a failure or an unused
    review answer."""
    from fsm_stage.config import load_config
    from fsm_stage.errors import LogFormatError
    from fsm_stage.scenario import replay_events

    graph = load_config(GRAPHS / "feature-work.yaml").graph
    ran = checks = 0
    for log in sorted(plan_review_log.parent.glob("*.jsonl")):
        try:
            res = read_log(log)
        except LogFormatError:
            continue
        replay = replay_events(res.events, graph)
        if not replay.steps:
            continue
        text = dump_scenario(str(GRAPHS / "feature-work.yaml"),
                             SessionSettings(id="replay", subagent=res.header.is_subagent), replay.steps,
                             system=replay.system)
        work = tmp_path / log.stem
        result = simulate(load_scenario_text(text, str(work / "s.yaml")), cwd=work)
        assert (result.failures, result.warnings) == ((), ()), log.name
        expects = [s for s in replay.steps if isinstance(s, Expect)]  # one plan_mode check each
        assert result.checks == len(expects), log.name
        checks += result.checks
        ran += 1
    assert ran >= 100 and checks >= 100


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_scenario_round_trips_through_its_log(path: Path, tmp_path: Path) -> None:
    """simulate --log, `fsm-stage scenario --graph` on that log, simulate again: the
    same stage and plan mode at every request, every recorded expectation held, no review answer
    left unused (refused goto_stage calls get none)."""
    original = simulate(load_scenario(path), cwd=tmp_path / "w")
    replay, err = _record_and_replay(path, tmp_path, "--graph", str(load_scenario(path).graph))
    assert "warning" not in err
    result = simulate(load_scenario(replay), cwd=tmp_path / "w1")
    assert (result.failures, result.warnings) == ((), ())
    states = [(r.stage, r.plan_mode) for r in result.records]
    assert states == [(r.stage, r.plan_mode) for r in original.records]


def test_scenario_output_never_overwrites_its_inputs(tmp_path: Path) -> None:
    log = tmp_path / "rec.jsonl"
    runner = CliRunner()
    assert runner.invoke(main, ["simulate", str(SCENARIOS / "subagent.yaml"), "--log", str(log),
                                "--cwd", str(tmp_path / "w")]).exit_code == 0
    before = log.read_bytes()
    made = runner.invoke(main, ["scenario", str(log), "-o", str(log)])
    assert made.exit_code == 1 and "refusing to overwrite" in made.stderr and log.read_bytes() == before
    made = runner.invoke(main, ["scenario", str(log), "-o", str(tmp_path / "missing" / "r.yaml"),
                                "--graph", str(GRAPHS / "feature-work.yaml")])
    assert made.exit_code == 1 and made.stderr.count("\n") == 1
    assert "cannot write scenario: folder" in made.stderr and "does not exist" in made.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl", "rec.jsonl.lock", "w"]


def test_replay_turns_guidance_off_again(tmp_path: Path) -> None:
    """A snapshot without the stage guidance after one with it flips `guidance` back to false."""
    scenario = tmp_path / "g.yaml"
    scenario.write_text(f"""graph: {GRAPHS / 'feature-work.yaml'}
steps:
  - user: hi
  - eligible: {{guidance: true}}
  - model:
      calls: [{{tool: read_file, args: {{path: a}}, result: x}}]
  - eligible: {{guidance: false}}
  - model: done
""", encoding="utf-8")
    replay, _ = _record_and_replay(scenario, tmp_path, "--graph", str(GRAPHS / "feature-work.yaml"))
    flips = [s.values for s in load_scenario(replay).steps if isinstance(s, EligibilityFlip)]
    assert flips == [{"guidance": True}, {"guidance": False}]
    result = simulate(load_scenario(replay), cwd=tmp_path / "w1")
    assert [bool(r.context) for r in result.records] == [True, False]
