"""``open_session``: the one composition of a session (runtime, stage switch, plan mode, agent,
driver), the guard check and plan mode's language."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from two_stages import BUDGET_REVIEWED, budget_review_waiting, two_stages

from fsm_stage import MemoryLog, ScriptedReviewChannel, SessionHeader, ToolCall, open_session
from fsm_stage.config import load_config_text
from fsm_stage.errors import ConfigError, UserError
from fsm_stage.integrations._host import StageHost
from fsm_stage.resources import data_dir

FEATURE_WORK = (data_dir("stage_graphs") / "feature-work.yaml").read_text(encoding="utf-8")


def _log() -> MemoryLog:
    return MemoryLog(SessionHeader("s"))


def test_a_guard_without_a_predicate_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError) as err:
        open_session(load_config_text(FEATURE_WORK), _log())
    assert str(err.value).count("\n") == 0 and "tests_written" in str(err.value)


def test_an_eligibility_name_that_is_no_guard_is_a_one_line_error() -> None:
    """A misspelt predicate name is refused (it would be ignored), even beside the right one."""
    for given in ({"tests_writen": True}, {"tests_written": True, "tests_writen": True}):
        with pytest.raises(ConfigError) as err:
            open_session(load_config_text(FEATURE_WORK), _log(), eligibility=given)
        shown = str(err.value)
        assert shown.count("\n") == 0 and "eligibility names no guard of the graph: tests_writen" in shown


@pytest.mark.parametrize("cwd", [".", "work", ""])
def test_a_session_whose_cwd_is_relative_is_refused_before_anything_runs(cwd: str) -> None:
    """Handoff documents are written under the session's cwd: a relative one would only fail at
    the first full switch, as a tool error the model reads."""
    log = MemoryLog(SessionHeader("s", cwd=cwd))
    with pytest.raises(UserError, match=f"cwd {cwd!r} is not an absolute path") as err:
        open_session(load_config_text(FEATURE_WORK), log, eligibility={"tests_written": True})
    assert "\n" not in str(err.value) and log.events == []


def test_registered_guards_decide_the_edges() -> None:
    config = load_config_text(FEATURE_WORK)
    closed = open_session(config, _log(), eligibility={"tests_written": False})
    opened = open_session(config, _log(), eligibility={"tests_written": lambda _agent: True})
    assert closed.current_stage() == opened.current_stage() == "explore"
    assert closed.stage is not None and opened.stage is not None
    assert closed.stage.guards_hold(closed.agent, ("tests_written",)) is False
    assert opened.stage.guards_hold(opened.agent, ("tests_written",)) is True


def test_the_host_holds_the_composition() -> None:
    host = open_session(load_config_text(FEATURE_WORK), _log(), eligibility={"tests_written": False})
    assert host.controllers == (host.stage, host.plan)
    assert {"goto_stage", "exit_plan_mode"} <= set(host.runtime.tools)
    assert host.driver.session is host.session is host.agent.session
    assert host.pending_reviews() == []
    host.close()
    assert "goto_stage" not in host.runtime.tools  # the controllers are detached


def test_plan_mode_false_and_no_graph() -> None:
    host = open_session(load_config_text(FEATURE_WORK), _log(), plan_mode=False,
                        eligibility={"tests_written": False})
    assert host.plan is None and host.stage is not None
    bare = open_session(None, _log())
    assert bare.controllers == () and bare.current_stage() is None
    with pytest.raises(ConfigError):
        open_session(None, _log(), eligibility={"x": True})


@pytest.mark.parametrize("language", ["zh", "en"])
def test_plan_mode_speaks_the_graphs_language_in_the_adapters(language: str) -> None:
    """An adapter's plan review is asked in the graph's language (it used to be English always)."""
    config = load_config_text(FEATURE_WORK.replace("language: en ", f"language: {language} ", 1))
    channel = ScriptedReviewChannel().approve()
    host = StageHost.open(_log(), graph=config, review=channel, guards={"tests_written": True})
    assert host.plan is not None
    host.plan.set(host.agent, True)
    host.step("Plan the feature.")
    call = ToolCall.of("exit_plan_mode", {"plan": "# Plan\n\n1. Do it."}, id="c1")
    host.reply("", [call])
    asyncio.run(host.run_fsm_tool(call))
    (question,) = channel.requests[0].questions
    assert question.header == ("计划评审" if language == "zh" else "Plan review")


def test_an_adapters_host_has_plan_mode_only_when_the_file_has_a_section() -> None:
    """``StageHost.open`` attaches plan mode as ``open_session`` does: a graph without a
    ``plan_mode:`` section offers no ``exit_plan_mode`` (it used to get a one-line plan mode)."""
    without = load_config_text(two_stages())
    assert without.plan_mode is None
    host = StageHost.open(_log(), graph=without)
    assert host.plan is None
    assert "exit_plan_mode" not in {spec.name for spec in host.runtime.tool_specs}
    given = StageHost.open(_log(), graph=without, plan_mode={"section": "Plan before you edit."})
    assert given.plan is not None
    assert "exit_plan_mode" in {spec.name for spec in given.runtime.tool_specs}
    default = StageHost.open(_log(), guards={"tests_written": True})  # feature-work has a section
    assert default.plan is not None


def test_a_log_recorded_under_another_graph_is_refused_at_open(tmp_path: Path) -> None:
    """The graph is checked when the session opens: resuming a suspended call under a changed
    graph (whose tool policy may differ) never runs a tool first and fails at the first step."""
    from fsm_stage.errors import GraphChangedError, ReviewPending
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel
    from fsm_stage.runtime import user_message

    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=SessionHeader("g-open", cwd=str(tmp_path)))
    host = open_session(load_config_text(two_stages()), log, review=SuspendingReviewChannel())
    host.agent.steer(user_message("go"))
    host.driver.start_turn()
    host.driver.begin_step()
    goto = ToolCall.of("goto_stage", {"stage": "implement", "handoff": "## Next\n- x"}, id="g1")
    host.driver.record_reply("", [goto])
    with pytest.raises(ReviewPending):
        asyncio.run(host.driver.run_tool(goto))  # the request records the graph (fsm/graph)
    log.close()
    changed = load_config_text(two_stages().replace("instruction: Explore.", "instruction: Look around."))
    with pytest.raises(GraphChangedError, match="accept_graph_change=True"):
        open_session(changed, JsonlLog(path), review=SuspendingReviewChannel())
    reopened = open_session(changed, JsonlLog(path), review=SuspendingReviewChannel(),
                            accept_graph_change=True)
    assert reopened.driver.suspended() is not None


def test_a_session_with_only_tool_reviews_records_its_graph_and_is_checked_at_open(tmp_path: Path) -> None:
    """A tool review's request is written with ``fsm/graph`` (once), so a session that never
    switched stages is still refused when opened under a changed graph."""
    from fsm_stage.errors import GraphChangedError, ReviewPending
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel
    from fsm_stage.runtime import user_message

    graph = two_stages().replace("    instruction: Explore.\n", "    instruction: Explore.\n"
                                 "    tools:\n      ask: [deploy]\n", 1)
    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=SessionHeader("g-tools", cwd=str(tmp_path)))
    host = open_session(load_config_text(graph), log, review=SuspendingReviewChannel())
    host.agent.steer(user_message("deploy"))
    host.driver.start_turn()
    host.driver.begin_step()
    calls = [ToolCall("d1", "deploy", "{}"), ToolCall("d2", "deploy", '{"again": true}')]
    host.driver.record_reply("", calls)
    for call in calls:
        with pytest.raises(ReviewPending):
            asyncio.run(host.driver.authorize(call))
    types = [e.type for e in log.events]
    assert types.count("fsm/graph") == 1
    assert types.index("fsm/graph") == types.index("fsm/review/request") - 1  # one batch
    log.close()
    relaxed = load_config_text(graph.replace("ask: [deploy]", "allow: [deploy]"))
    with pytest.raises(GraphChangedError):
        open_session(relaxed, JsonlLog(path), review=SuspendingReviewChannel())


def _graph_records_then_refused(path: Path, changed: str) -> None:
    """The log at ``path`` holds one ``fsm/graph`` record, in the batch of its first review
    request, and opening it under ``changed`` is refused."""
    from fsm_stage.errors import GraphChangedError
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel

    with JsonlLog(path) as log:
        types = [e.type for e in log.events]
    assert types.count("fsm/graph") == 1
    assert types.index("fsm/graph") == types.index("fsm/review/request") - 1  # one batch
    with pytest.raises(GraphChangedError):
        open_session(load_config_text(changed), JsonlLog(path), review=SuspendingReviewChannel())


def test_a_session_whose_first_review_is_a_budget_review_records_its_graph(tmp_path: Path) -> None:
    """A budget review's request is written with ``fsm/graph`` as a stage or tool review's is:
    a session that only ever hit its budget is refused when opened under a changed graph (it
    opened silently, helper-79)."""
    path = tmp_path / "s.jsonl"
    budget_review_waiting(path, "g-budget")
    _graph_records_then_refused(path, BUDGET_REVIEWED.replace("steps: 1", "steps: 50"))


def test_a_session_whose_first_review_is_a_plan_review_records_its_graph(tmp_path: Path) -> None:
    """Plan mode's exit review, the first review of a session with a stage graph, records the
    graph with its request too."""
    from fsm_stage.errors import ReviewPending
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel
    from fsm_stage.runtime import user_message

    graph = two_stages() + "plan_mode:\n  section: Plan first.\n"
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=SessionHeader("g-plan", cwd=str(tmp_path))) as log:
        host = open_session(load_config_text(graph), log, review=SuspendingReviewChannel())
        assert host.plan is not None
        asyncio.run(host.runtime.run_command(host.agent, "/plan"))
        host.agent.steer(user_message("plan it"))
        host.driver.start_turn()
        host.driver.begin_step()
        exit_call = ToolCall.of("exit_plan_mode", {"plan": "# Plan\n1. Do it."}, id="p1")
        host.driver.record_reply("", [exit_call])
        with pytest.raises(ReviewPending):
            asyncio.run(host.driver.run_tool(exit_call))
    _graph_records_then_refused(path, graph.replace("instruction: Explore.", "instruction: Look."))


def test_a_plan_mode_model_alias_the_graph_lacks_is_refused_at_open() -> None:
    """A ``PlanModeConfig`` given in code is not checked by the graph loader: an unknown alias
    is a ``ConfigError`` when the session opens (every plan-mode step used to fail with an
    ``IndexError`` after logging its start)."""
    from fsm_stage.config.model import PlanModeConfig

    graph = load_config_text("name: g\nsection: s\nmodels: {thinker: 'openai:o3'}\nstages:\n"
                             "  - {name: a, instruction: A.}\n")
    with pytest.raises(ConfigError, match=r"^plan_mode.model: 'thinkr' is neither .* models: thinker$"):
        open_session(graph, _log(), plan_mode=PlanModeConfig(section="Plan.", model="thinkr"))
    opened = open_session(graph, _log(), plan_mode=PlanModeConfig(section="Plan.", model="thinker"))
    assert opened.plan is not None


def test_a_stage_model_alias_the_graph_lacks_is_refused_at_open() -> None:
    """The same for a ``StageConfig`` built in code: refused by the stage switch when the session
    opens, not by an ``IndexError`` at the first step of that stage."""
    import attrs

    graph = load_config_text("name: g\nsection: s\nmodels: {thinker: 'openai:o3'}\nstages:\n"
                             "  - {name: a, instruction: A.}\n").graph
    assert graph is not None
    typo = attrs.evolve(graph, stages=(attrs.evolve(graph.stages[0], model="thinkr"),))
    refused = r"^stages\[0\] \(a\)\.model: 'thinkr' is neither .* models: thinker$"
    with pytest.raises(ConfigError, match=refused):
        open_session(typo, _log(), plan_mode=False)
    # an alias whose model is not provider-qualified fails the same way (helper-82)
    thinker = attrs.evolve(graph.stages[0], model="thinker")
    bare = attrs.evolve(graph, models={"thinker": "o3"}, stages=(thinker,))
    with pytest.raises(ConfigError, match=r"^models\.thinker: 'o3' is not a provider-qualified model name"):
        open_session(bare, _log(), plan_mode=False)
