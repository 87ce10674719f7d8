"""Per-stage model, reasoning effort and budgets: declared in the graph, carried by every
request, enforced at the step boundary from the log (docs/stage-models.md)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from fsm_stage import ModelReply, SessionHeader, load_config, open_log, open_session
from fsm_stage.config import load_config_text
from fsm_stage.driver import Loop, ScriptedModel, StagedSession
from fsm_stage.errors import ConfigError
from fsm_stage.log import MemoryLog
from fsm_stage.log.projections.spend import SPEND_FOLD
from fsm_stage.reviews import ScriptedReviewChannel, answer_review, open_reviews
from fsm_stage.runtime import InboxAgent, Runtime
from fsm_stage.runtime.stage_models import DEFAULT_CHOICE
from fsm_stage.stage_switch import StageController

GRAPH = """
name: models
section: When done, call goto_stage with one of << stage_targets >>.
models: {thinker: "openai:o3", fast: "openai:gpt-5-mini"}
stages:
  - name: design
    instruction: Design.
    targets: [build]
    model: thinker
    reasoning_effort: high
  - name: build
    instruction: Build.
    targets: [design]
    model: fast
    model_settings: {temperature: 0.1}
    budget: {BUDGET}
    on_budget: ON_BUDGET
plan_mode:
  section: Plan first.
  model: anthropic:claude-opus-4
  reasoning_effort: xhigh
"""


def graph_text(budget: str = "{turns: 1}", on_budget: str = "stop") -> str:
    return GRAPH.replace("{BUDGET}", budget).replace("ON_BUDGET", on_budget)


def model(name: str, *replies: ModelReply) -> ScriptedModel:
    provider, _, short = name.partition(":")
    return ScriptedModel(list(replies), provider=provider, name=short)


def compose(tmp_path: Path, text: str, *, log: Any = None, review: Any = None,
            plan: bool = False, eligibility: Any = None) -> tuple[Runtime, InboxAgent, StageController]:
    cfg = load_config_text(text)
    assert cfg.graph is not None
    log = log if log is not None else MemoryLog(SessionHeader("s", cwd=str(tmp_path)))
    host = open_session(cfg, log, review=review if review is not None else ScriptedReviewChannel().approve(),
                        plan_mode=plan, guidance=False, repair=False, eligibility=eligibility)
    assert host.stage is not None
    return host.runtime, host.agent, host.stage


def to_build() -> ModelReply:
    return ModelReply.call("goto_stage", {"stage": "build", "handoff": "# Handoff\nBuild it."})


def headers(agent: InboxAgent) -> list[dict[str, Any]]:
    return [e.data["header"]["config"] for e in agent.session.events if e.type == "request/header"]


# --- the graph ---------------------------------------------------------------------------------


def test_model_keys_load_and_aliases_resolve() -> None:
    cfg = load_config_text(graph_text())
    assert cfg.graph is not None and cfg.plan_mode is not None
    build = cfg.graph.stage("build")
    assert build is not None and build.model == "fast" and build.budget is not None
    assert build.budget.turns == 1 and build.on_budget == "stop"
    assert dict(build.model_settings or {}) == {"temperature": 0.1}
    assert cfg.graph.models == {"thinker": "openai:o3", "fast": "openai:gpt-5-mini"}
    assert cfg.plan_mode.model == "anthropic:claude-opus-4"


def test_shipped_example_graph_validates() -> None:
    cfg = load_config(Path(__file__).parents[2] / "stage_graphs" / "model-per-stage.yaml", strict=True)
    assert cfg.graph is not None and cfg.graph.stage("verify") is not None


@pytest.mark.parametrize(("snippet", "message"), [
    ("model: thinkr", "stages[0].model: \"thinkr\" is neither a provider-qualified name"),
    # an escape sequence or a bidi override in a model name would reach a terminal or a request
    ('model: "openai:o3\\e[31m"', "stages[0].model: \"openai:o3\\u001b[31m\" is neither a provider"),
    ('model: "openai:o3\\u202e"', "stages[0].model: \"openai:o3\\u202e\" is neither a provider"),
    ("reasoning_effort: extreme", "stages[0].reasoning_effort: must be \"none\" or"),
    ("budget: {turns: 0}", "stages[0].budget.turns: must be a positive whole number, got 0"),
    ("budget: {seconds: -1}", "stages[0].budget.seconds: must be a positive finite number"),
    # a limit beyond any real spend: refused, where it used to overflow `draw` and `state --graph`
    ("budget: {turns: " + "9" * 400 + "}",
     "stages[0].budget.turns: must be at most 1,000,000,000,000,000, got a number of over 40 digits"),
    ("budget: {tokens_out: 1000000000000001}", "stages[0].budget.tokens_out: must be at most 1,000,000,"),
    ("budget: {seconds: 1e300}", "stages[0].budget.seconds: must be at most 31,622,400 seconds"),
    ("budget: {tokens: 5}", "stages[0].budget.tokens: unknown key(s) tokens"),
    ("budget: {}", "stages[0].budget: is empty"),
    ("on_budget: ask", "stages[0].on_budget: must be \"stop\" or \"review\""),
    ("model_settings: [1]", "stages[0].model_settings: expected a mapping"),
    ("model_settings: {t: .nan}", "stages[0].model_settings: must hold JSON values only"),
])
def test_bad_model_keys_are_positioned_errors(snippet: str, message: str) -> None:
    text = ("name: g\nsection: s\nmodels: {thinker: 'openai:o3'}\nstages:\n"
            f"  - name: a\n    instruction: A.\n    {snippet}\n  - name: b\n    instruction: B.\n")
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "g.yaml")
    lines = str(err.value).splitlines()
    assert any(line.startswith("g.yaml:7:") and message in line for line in lines), lines


def test_bad_alias_and_oversized_settings() -> None:
    text = ("name: g\nsection: s\nmodels: {thinker: o3}\nstages:\n  - name: a\n    instruction: A.\n"
            f"    model_settings: {{blob: '{'x' * 9000}'}}\n")
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "g.yaml")
    text_err = str(err.value)
    assert "g.yaml:3:" in text_err and "models.thinker: must be a provider-qualified model name" in text_err
    assert "stages[0].model_settings: is too large" in text_err


def test_fingerprint_unchanged_for_graphs_without_model_keys() -> None:
    from fsm_stage.config import normalised

    plain = load_config_text("name: g\nsection: s\nstages:\n  - {name: a, instruction: A.}\n")
    assert "model" not in normalised(plain)["graph"]["stages"][0]
    assert "models" not in normalised(plain)["graph"]


def test_schema_describes_the_model_keys() -> None:
    import json

    from fsm_stage.config.schema import schema_text

    schema = json.loads(schema_text())
    stage = schema["$defs"]["StageConfig"]["properties"]
    assert {"model", "reasoning_effort", "model_settings", "budget", "on_budget"} <= stage.keys()
    assert stage["reasoning_effort"]["enum"][-1] == "xhigh"
    assert schema["$defs"]["BudgetConfig"]["additionalProperties"] is False
    assert "model" in schema["$defs"]["PlanModeConfig"]["properties"]


# --- requests carry the choice --------------------------------------------------------------------


def test_reference_loop_sends_each_stage_to_its_model(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{turns: 5}"))
    o3 = model("openai:o3", to_build(), ModelReply.say("unused"))
    mini = model("openai:gpt-5-mini", ModelReply.say("built"))
    fallback = model("x:default")
    loop = Loop(runtime, agent, fallback, models={"openai:o3": o3, "fast": mini})
    asyncio.run(loop.prompt("go"))
    assert [r.model.model for r in o3.requests] == ["openai:o3"]
    assert o3.requests[0].model.reasoning_effort == "high" and o3.requests[0].model.alias == "thinker"
    assert [r.model.model for r in mini.requests] == ["openai:gpt-5-mini"]
    assert dict(mini.requests[0].model.settings) == {"temperature": 0.1}
    assert fallback.requests == []
    # the log says which model each request was for, and which model answered
    assert headers(agent) == [
        {"provider": "openai", "model": "o3", "reasoningEffort": "high"},
        {"provider": "openai", "model": "gpt-5-mini", "modelSettings": {"temperature": 0.1}},
    ]
    sources = [e.data["message"]["source"] for e in agent.session.events if e.type == "assistant/message"]
    assert [s["model"] for s in sources] == ["o3", "gpt-5-mini"]


def test_plan_mode_choice_wins_over_the_stage(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(), plan=True)
    opus = model("anthropic:claude-opus-4", ModelReply.say("planning"))
    o3 = model("openai:o3", ModelReply.say("designing"))
    loop = Loop(runtime, agent, model("x:default"), models={"anthropic:claude-opus-4": opus, "openai:o3": o3})
    asyncio.run(loop.command("/plan"))
    asyncio.run(loop.prompt("think"))
    asyncio.run(loop.command("/plan off"))
    asyncio.run(loop.prompt("design"))
    assert len(opus.requests) == 1 and opus.requests[0].model.reasoning_effort == "xhigh"
    assert opus.requests[0].model.source == "stage:design+plan_mode"
    assert len(o3.requests) == 1 and o3.requests[0].model.reasoning_effort == "high"


def test_missing_model_falls_back_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text())
    fallback = model("x:default", ModelReply.say("a"), ModelReply.say("b"))
    loop = Loop(runtime, agent, fallback)
    with caplog.at_level(logging.WARNING, logger="fsm_stage.loop"):
        asyncio.run(loop.prompt("one"))
        asyncio.run(loop.prompt("two"))
    assert len(fallback.requests) == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "fsm_stage.loop"]
    assert warnings == ["stage:design asks for model openai:o3; this loop has no such model "
                        "(Loop(models=…)), so x:default answers"]


def test_own_loop_gets_the_choice_on_the_step_request(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text())
    driver = StagedSession(runtime, agent)
    driver.start_turn()
    req = driver.begin_step()
    assert req is not None and req.model.model == "openai:o3" and req.model.provider == "openai"
    assert req.model.name == "o3" and req.request.model == req.model
    assert req.model.to_json() == {"model": "openai:o3", "alias": "thinker", "reasoningEffort": "high"}


def test_graph_without_model_keys_sends_the_default_choice(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, "name: g\nsection: s\nstages:\n  - {name: a, instruction: A.}\n")
    driver = StagedSession(runtime, agent, config={"provider": "p", "model": "m"})
    driver.start_turn()
    req = driver.begin_step()
    assert req is not None and req.model == DEFAULT_CHOICE and req.model.is_default
    assert headers(agent) == [{"provider": "p", "model": "m"}]


# --- budgets --------------------------------------------------------------------------------------


def run_prompts(loop: Loop, *texts: str) -> list[Any]:
    return [asyncio.run(loop.prompt(t)) for t in texts]


def test_turn_budget_stops_exactly_after_the_allowed_turns(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{turns: 2}"))
    mini = model("openai:gpt-5-mini", ModelReply.say("1"), ModelReply.say("2"))
    loop = Loop(runtime, agent, model("openai:o3", to_build()), models={"fast": mini})
    first, second, third = run_prompts(loop, "go", "again", "more")
    # turn 1 entered build mid-turn (counts), turn 2 runs, turn 3 is stopped before any request
    assert [o.reason for o in first + second] == ["completed", "completed"]
    assert [(o.reason, o.steps) for o in third] == [("blocked", 0)]
    assert third[0].message == "budget of stage build ran out: turns 2/2"
    end = [e for e in agent.session.events if e.type == "turn/end"][-1]
    assert end.data["reason"] == {"kind": "blocked", "message": "budget of stage build ran out: turns 2/2"}
    stops = [e.data for e in agent.session.events if e.type == "fsm/budget"]
    assert stops[0]["action"] == "stop" and stops[0]["limits"] == ["turns 2/2"]
    assert agent.wants_turn  # the user's message waits for a fresh budget or another stage


def test_step_and_token_budgets_count_from_the_log(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{tokens_out: 100}"))
    usage = {"inputTokens": 10, "outputTokens": 60, "cacheReadTokens": 5}
    mini = model("openai:gpt-5-mini", ModelReply("a", usage=usage), ModelReply("b", usage=usage))
    loop = Loop(runtime, agent, model("openai:o3", to_build()), models={"fast": mini})
    outcomes = run_prompts(loop, "go", "again", "third")
    assert [o[0].reason for o in outcomes] == ["completed", "completed", "blocked"]
    state = agent.session.read(SPEND_FOLD)
    assert (state.stage, state.stage_spend.tokens_out, state.stage_spend.tokens_in) == ("build", 120, 30)
    assert outcomes[2][0].message == "budget of stage build ran out: tokens_out 120/100"


def test_steps_budget_stops_mid_turn(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{steps: 2}"))
    def refused(n: int) -> ModelReply:  # a refused goto_stage keeps the turn going
        return ModelReply.call("goto_stage", {"stage": "nowhere"}, id=f"call_{n}")

    mini = model("openai:gpt-5-mini", refused(1), refused(2), ModelReply.say("never"))
    loop = Loop(runtime, agent, model("openai:o3", to_build()), models={"fast": mini})
    (outcome,) = asyncio.run(loop.prompt("go"))
    assert (outcome.reason, outcome.message) == ("blocked", "budget of stage build ran out: steps 2/2")
    assert len(mini.requests) == 2


def test_seconds_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fsm_stage.driver._budget as budget

    runtime, agent, _ = compose(tmp_path, graph_text(budget="{seconds: 60}"))
    mini = model("openai:gpt-5-mini", ModelReply.say("1"))
    loop = Loop(runtime, agent, model("openai:o3", to_build()), models={"fast": mini})
    asyncio.run(loop.prompt("go"))
    start = agent.session.read(SPEND_FOLD).stage_spend.since
    assert start is not None
    monkeypatch.setattr(budget, "now_ms", lambda: start + 61_000)
    (outcome,) = asyncio.run(loop.prompt("later"))
    assert outcome.reason == "blocked" and outcome.message == "budget of stage build ran out: seconds 61/60"


def test_model_is_told_in_one_line_when_work_resumes(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{turns: 1}"))
    o3 = model("openai:o3", to_build(), ModelReply.say("back in design"))
    mini = model("openai:gpt-5-mini", ModelReply.say("built"))
    loop = Loop(runtime, agent, model("x:default"), models={"openai:o3": o3, "fast": mini})
    run_prompts(loop, "go", "again")  # the second turn is stopped
    asyncio.run(loop.command("/stage design"))
    (outcome,) = asyncio.run(loop.run_until_idle())
    assert outcome.reason == "completed"
    texts = ["".join(b.get("text", "") for b in m["content"]) for m in o3.requests[-1].messages]
    told = [t for t in texts if "ran out" in t]
    assert told == ["The budget of stage build ran out (turns 1/1), so the last turn was stopped "
                    "before the next request."]
    assert agent.session.read(SPEND_FOLD).stops == ()


def test_spend_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    text = graph_text(budget="{turns: 1}")
    log = open_log(path, create=SessionHeader("s", cwd=str(tmp_path)))
    runtime, agent, _ = compose(tmp_path, text, log=log)
    loop = Loop(runtime, agent, model("openai:o3", to_build()),
                models={"fast": model("openai:gpt-5-mini", ModelReply.say("x"))})
    asyncio.run(loop.prompt("go"))
    log.close()
    log2 = open_log(path)
    runtime2, agent2, _ = compose(tmp_path, text, log=log2)
    loop2 = Loop(runtime2, agent2, model("x:default"))
    (outcome,) = asyncio.run(loop2.prompt("after restart"))
    assert outcome.reason == "blocked" and outcome.message == "budget of stage build ran out: turns 1/1"
    log2.close()


def test_review_budget_continue_gives_a_fresh_budget(tmp_path: Path) -> None:
    channel = ScriptedReviewChannel().approve()
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{turns: 1}", on_budget="review"), review=channel)
    mini = model("openai:gpt-5-mini", ModelReply.say("1"), ModelReply.say("2"))
    loop = Loop(runtime, agent, model("openai:o3", to_build()), models={"fast": mini})
    channel.approve("Continue with a fresh budget")
    outcomes = run_prompts(loop, "go", "again")
    assert [o[0].reason for o in outcomes] == ["completed", "completed"]
    actions = [e.data.get("action") for e in agent.session.events if e.type == "fsm/budget"]
    assert actions == ["stop", "fresh", "told"]
    request = next(e.data for e in agent.session.events
                   if e.type == "fsm/review/request" and e.data["kind"] == "budget")
    assert request["kind"] == "budget" and request["options"] == [
        "Continue with a fresh budget", "Move to design", "Stop"]


def test_review_budget_suspends_until_answered_elsewhere_then_moves(tmp_path: Path) -> None:
    runtime, agent, stage = compose(tmp_path, graph_text(budget="{turns: 1}", on_budget="review"))
    runtime.review = None  # no live reviewer: the review waits in the log
    o3 = model("openai:o3", to_build(), ModelReply.say("designing again"))
    loop = Loop(runtime, agent, model("x:default"),
                models={"openai:o3": o3, "fast": model("openai:gpt-5-mini", ModelReply.say("1"))})
    run_prompts(loop, "go")
    (blocked,) = asyncio.run(loop.prompt("again"))
    (review,) = open_reviews(agent.session)
    assert blocked.reason == "blocked" and review.id in (blocked.message or "") and review.kind == "budget"
    # asking again while it is open does not open a second review
    assert asyncio.run(loop.run_until_idle())[0].reason == "blocked"
    assert len(open_reviews(agent.session)) == 1
    answer_review(agent.session, review.id, "approve", option="Move to design", by="cli")
    (outcome,) = asyncio.run(loop.run_until_idle())
    assert outcome.reason == "completed" and stage.current(agent.session) == "design"
    redeemed = [e.data for e in agent.session.events if e.type == "fsm/review/redeemed"]
    assert redeemed[-1] == {"id": review.id, "applied": True, "reason": None}


def test_review_budget_stop_answer_keeps_the_turn_stopped(tmp_path: Path) -> None:
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{turns: 1}", on_budget="review"))
    runtime.review = None
    loop = Loop(runtime, agent, model("openai:o3", to_build()),
                models={"fast": model("openai:gpt-5-mini", ModelReply.say("1"))})
    run_prompts(loop, "go", "again")
    (review,) = open_reviews(agent.session)
    answer_review(agent.session, review.id, "keep", by="cli")
    (outcome,) = asyncio.run(loop.run_until_idle())
    assert outcome.reason == "blocked"  # kept: a new review asks again
    redeemed = [e.data for e in agent.session.events
                if e.type == "fsm/review/redeemed" and e.data["id"] == review.id]
    assert redeemed == [{"id": review.id, "applied": False, "reason": "kept"}]
    assert [r.id for r in open_reviews(agent.session)] != [review.id]


def test_state_shows_spend_against_the_budget(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    path = tmp_path / "s.jsonl"
    graph = tmp_path / "g.yaml"
    graph.write_text(graph_text(budget="{turns: 1, tokens_out: 50}"), encoding="utf-8")
    log = open_log(path, create=SessionHeader("s", cwd=str(tmp_path)))
    runtime, agent, _ = compose(tmp_path, graph.read_text(encoding="utf-8"), log=log)
    mini = model("openai:gpt-5-mini", ModelReply("x", usage={"inputTokens": 5, "outputTokens": 7}))
    asyncio.run(Loop(runtime, agent, model("openai:o3", to_build()), models={"fast": mini}).prompt("go"))
    log.close()

    def state(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "fsm_stage", "state", str(path), *args],
                              capture_output=True, text=True, check=True)
        return done.stdout

    report = json.loads(state("--json", "--graph", str(graph)))
    assert report["spend"] == {"stage": {"tokens_in": 5, "tokens_out": 7, "turns": 1, "steps": 1,
                                         "budget": {"tokens_out": 50, "turns": 1}, "on_budget": "stop"}}
    assert "stage spend:  tokens in 5, out 7/50, turns 1/1, steps 1 (budget, on_budget: stop)" in state(
        "--graph", str(graph))
    assert json.loads(state("--json"))["spend"]["stage"] == {"tokens_in": 5, "tokens_out": 7, "turns": 1,
                                                             "steps": 1}


# --- the simulator --------------------------------------------------------------------------------


def test_simulator_reports_models_and_the_switch_as_a_cache_break() -> None:
    from fsm_stage.scenario import load_scenario
    from fsm_stage.simulate import render_human, simulate

    root = Path(__file__).parents[2] / "stage_graphs" / "scenarios"
    result = simulate(load_scenario(root / "model-per-stage.yaml"))
    assert result.ok, [f.line() for f in result.failures]
    models = [r.model for r in result.records]
    assert models[0] == {"model": "openai:o3", "alias": "thinker", "reasoningEffort": "high"}
    switch = result.records[2].prefix
    assert (switch.model, switch.reused_tokens, switch.model_change) == (
        "switched", 0, "openai:o3 -> openai:gpt-5-mini")
    assert switch.system == "kept" and switch.messages == "kept"  # only the model broke the cache
    assert [(v["stage"], v["model"], v["requests"]) for v in result.stage_spend()] == [
        ("design", "openai:o3", 2), ("implement", "openai:gpt-5-mini", 1)]
    text = render_human(result)
    assert "MODEL SWITCHED (openai:o3 -> openai:gpt-5-mini): no cached prefix" in text
    assert "   model     openai:o3 (thinker) · effort high" in text
    assert result.records[2].to_json()["model"]["model"] == "openai:gpt-5-mini"


def test_scenario_model_expectation_fails_when_the_model_differs(tmp_path: Path) -> None:
    from fsm_stage.scenario import load_scenario
    from fsm_stage.simulate import simulate

    root = Path(__file__).parents[2] / "stage_graphs"
    text = (root / "scenarios" / "model-per-stage.yaml").read_text(encoding="utf-8")
    text = text.replace("graph: ../model-per-stage.yaml", f"graph: {root / 'model-per-stage.yaml'}")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("model: openai:gpt-5-mini", "model: openai:o3").replace(
        "model: switched}", "model: kept}"), encoding="utf-8")
    failures = [f.line() for f in simulate(load_scenario(bad)).failures]
    assert any("next_request.model: expected \"openai:o3\"" in f for f in failures), failures
    assert any("next_request.prefix.model: expected kept" in f and "switched" in f for f in failures)


def test_diagrams_label_the_model_and_budget() -> None:
    from fsm_stage.diagram import to_dot, to_mermaid

    cfg = load_config(Path(__file__).parents[2] / "stage_graphs" / "model-per-stage.yaml")
    assert cfg.graph is not None and cfg.plan_mode is not None
    mermaid = to_mermaid(cfg.graph, cfg.plan_mode)
    assert 'state "design · thinker, high" as s_design' in mermaid
    assert 'state "implement · fast · budget 200k out, 60 steps" as s_implement' in mermaid
    assert 'state "plan · thinker, high" as pm_plan' in mermaid
    assert "verify\\nfast · budget 3 turns" in to_dot(cfg.graph, cfg.plan_mode)


def test_review_budget_stop_with_refused_feedback_is_dismissed_not_a_crash(tmp_path: Path) -> None:
    """A live channel's Stop with feedback holding an escape sequence is refused as every
    reviewer's feedback is: the budget review is dismissed (the turn stays stopped), the
    loop ends normally and no feedback is logged."""
    channel = ScriptedReviewChannel().approve().keep("stop \x1b[2K now", label="Stop")
    runtime, agent, _ = compose(tmp_path, graph_text(budget="{turns: 1}", on_budget="review"), review=channel)
    loop = Loop(runtime, agent, model("openai:o3", to_build()),
                models={"fast": model("openai:gpt-5-mini", ModelReply.say("1"))})
    outcomes = run_prompts(loop, "go", "again")
    assert outcomes[-1][0].reason == "blocked"
    answers = [e.data for e in agent.session.events if e.type == "fsm/review/answer"]
    assert [(a["outcome"], a.get("feedback")) for a in answers] == [("approve", None), ("dismiss", None)]


def _with_rules(text: str, graph_rules: str, edge: str | None = None) -> str:
    """``text`` with graph-level ``review:`` rules and, given ``edge``, build -> design's own."""
    text = text.replace("stages:\n", f"review: {graph_rules}\nstages:\n", 1)
    if edge is not None:
        text = text.replace("    targets: [design]\n", f"    targets: [{{to: design, review: {edge}}}]\n", 1)
    return text


def _budget_review_opened(tmp_path: Path, text: str) -> tuple[InboxAgent, StageController, Loop, Any]:
    """A session in build whose budget ran out, its budget review open and waiting."""
    runtime, agent, stage = compose(tmp_path, text)
    runtime.review = None  # no live reviewer: reviews wait in the log
    o3 = model("openai:o3", to_build(), ModelReply.say("designing again"))
    loop = Loop(runtime, agent, model("x:default"),
                models={"openai:o3": o3, "fast": model("openai:gpt-5-mini", ModelReply.say("1"))})
    run_prompts(loop, "go")
    (goto,) = open_reviews(agent.session)
    answer_review(agent.session, goto.id, "approve", reviewer="alice")
    asyncio.run(loop.resume())
    assert stage.current(agent.session) == "build"
    (blocked,) = asyncio.run(loop.prompt("again"))
    (review,) = open_reviews(agent.session)
    assert blocked.reason == "blocked" and review.kind == "budget"
    return agent, stage, loop, review


def test_a_budget_review_is_asked_under_the_graphs_review_rules(tmp_path: Path) -> None:
    """The graph's ``review`` rules cover every review: a budget review's answer, which can move
    the stage, is refused to anyone they do not name, as the goto_stage review's is."""
    from fsm_stage.errors import ReviewRefusedError

    agent, stage, loop, review = _budget_review_opened(
        tmp_path, _with_rules(graph_text(on_budget="review"), "{approvers: [alice]}"))
    assert review.rules == {"approvers": ["alice"]}
    for who in ({"by": "cli"}, {"reviewer": "mallory"}):
        with pytest.raises(ReviewRefusedError):
            answer_review(agent.session, review.id, "approve", option="Move to design", **who)
    assert stage.current(agent.session) == "build"
    answer_review(agent.session, review.id, "approve", option="Move to design", reviewer="alice")
    (outcome,) = asyncio.run(loop.run_until_idle())
    assert outcome.reason == "completed" and stage.current(agent.session) == "design"


def test_a_budget_review_does_not_offer_a_move_its_edge_reviews_under_other_rules(tmp_path: Path) -> None:
    """A move to a target whose edge has review rules of its own is not an option of the budget
    review (its answer would skip them): the model's goto_stage is reviewed under them instead."""
    text = _with_rules(graph_text(on_budget="review"), "{approvers: [alice]}", edge="{approvers: [bob]}")
    _, _, _, review = _budget_review_opened(tmp_path, text)
    assert review.options == ("Continue with a fresh budget", "Stop")
    assert review.rules == {"approvers": ["alice"]}


def test_a_plan_budget_review_is_asked_under_the_plan_reviews_rules(tmp_path: Path) -> None:
    text = graph_text() + "  budget: {turns: 1}\n  on_budget: review\n  review: {approvers: [alice]}\n"
    runtime, agent, _ = compose(tmp_path, text, plan=True)
    runtime.review = None
    agent.session.append("plan/mode", {"active": True})
    planner = model("anthropic:claude-opus-4", ModelReply.say("planning"), ModelReply.say("more"))
    loop = Loop(runtime, agent, planner)
    (first,) = asyncio.run(loop.prompt("go"))
    (blocked,) = asyncio.run(loop.prompt("again"))
    assert (first.reason, blocked.reason) == ("completed", "blocked")
    (review,) = open_reviews(agent.session)
    assert review.kind == "budget" and review.from_ == "plan mode"
    assert review.rules == {"approvers": ["alice"]}


@pytest.mark.parametrize(("later_rules", "edge", "reason"), [
    ("{approvers: [alice]}", None, "rules-changed"),  # asked under no rules; the graph now has some
    (None, "{approvers: [bob]}", "edge-removed"),  # the move's edge now has rules of its own
])
def test_an_approved_budget_review_is_not_applied_once_its_rules_or_edge_changed(
        tmp_path: Path, later_rules: str | None, edge: str | None, reason: str) -> None:
    """A budget review answered by nobody in particular, under rules that no longer hold when it
    is redeemed (a graph change, or a log written before budget reviews carried rules): the
    answer is redeemed not applied, the stage stays, and the next boundary asks again."""
    from fsm_stage.log import open_log

    path = tmp_path / "s.jsonl"
    text = graph_text(on_budget="review")
    log = open_log(path, create=SessionHeader("s", cwd=str(tmp_path)))
    runtime, agent, _ = compose(tmp_path, text, log=log)
    runtime.review = None
    models = {"openai:o3": model("openai:o3", to_build()),
              "fast": model("openai:gpt-5-mini", ModelReply.say("1"))}
    run_prompts(Loop(runtime, agent, model("x:default"), models=models), "go", "again")
    (review,) = [r for r in open_reviews(agent.session) if r.kind == "budget"]
    answer_review(agent.session, review.id, "approve", option="Move to design", by="cli")
    agent.session.log.close()
    cfg = load_config_text(_with_rules(text, later_rules or "{}", edge))
    host = open_session(cfg, open_log(path), review=None, guidance=False, repair=False,
                        accept_graph_change=True)
    (outcome,) = asyncio.run(Loop(host.runtime, host.agent, model("x:default")).prompt("continue"))
    assert outcome.reason == "blocked" and host.stage.current(host.session) == "build"
    redeemed = [e.data for e in host.session.events
                if e.type == "fsm/review/redeemed" and e.data["id"] == review.id]
    assert redeemed == [{"id": review.id, "applied": False, "reason": reason}]
    asked = [r for r in open_reviews(host.session) if r.kind == "budget"]
    assert len(asked) == 1 and asked[0].id != review.id
    host.close()


def test_a_budget_review_moves_only_along_an_edge_whose_guards_hold(tmp_path: Path) -> None:
    """A guard of the move's edge that does not hold leaves the move out of the budget review's
    options; one that closes after the approval leaves the approval unapplied (``guard-closed``),
    as an approved goto_stage is: a reviewer's answer never skips an edge's guard."""
    text = graph_text(on_budget="review").replace("    targets: [design]\n",
                                                  "    targets: [{to: design, guards: [design_ok]}]\n", 1)
    guard = {"open": False}
    runtime, agent, stage = compose(tmp_path, text, eligibility={"design_ok": lambda _agent: guard["open"]})
    runtime.review = None
    models = {"openai:o3": model("openai:o3", to_build()),
              "fast": model("openai:gpt-5-mini", ModelReply.say("1"))}
    loop = Loop(runtime, agent, model("x:default"), models=models)
    run_prompts(loop, "go", "again")
    (closed,) = open_reviews(agent.session)
    assert closed.options == ("Continue with a fresh budget", "Stop")  # design's guard is closed
    answer_review(agent.session, closed.id, "keep", by="cli")
    guard["open"] = True
    assert asyncio.run(loop.run_until_idle())[0].reason == "blocked"  # asked again, the guard open now
    (review,) = open_reviews(agent.session)
    assert review.options == ("Continue with a fresh budget", "Move to design", "Stop")
    answer_review(agent.session, review.id, "approve", option="Move to design", by="cli")
    guard["open"] = False  # closes before the answer is redeemed
    (outcome,) = asyncio.run(loop.run_until_idle())
    assert outcome.reason == "blocked" and stage.current(agent.session) == "build"
    redeemed = [e.data for e in agent.session.events
                if e.type == "fsm/review/redeemed" and e.data["id"] == review.id]
    assert redeemed == [{"id": review.id, "applied": False, "reason": "guard-closed"}]
