"""The gate: ``Runtime.call_tool`` and ``StagedSession.authorize`` refuse what the stage (and
plan mode) does not allow, before anything runs; the catalog never changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from policy_helpers import jump, run, wired

from fsm_stage.config.policy import ToolPolicyConfig, ToolRuleConfig
from fsm_stage.driver import StagedSession
from fsm_stage.policy._gate import TOOL_REFUSED, ToolPolicy
from fsm_stage.policy._paths import PathGlob
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.tools import ToolCall


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall.of(name, args, id=f"c_{name}")


def policy(allow: Any = None, ask: Any = (), groups: Any = None) -> ToolPolicy:
    def rules(items: Any) -> tuple[ToolRuleConfig, ...]:
        return tuple(ToolRuleConfig(i) if isinstance(i, str) else ToolRuleConfig(**i) for i in items)

    return ToolPolicy(ToolPolicyConfig(None if allow is None else rules(allow), rules(ask)), groups)


# --- decisions ----------------------------------------------------------------------------------


def test_names_globs_and_groups() -> None:
    p = policy(["read_*", "@test", "grep"], groups={"test": ["run_tests"]})
    assert [p.decide(n, {}).verdict for n in ("read_file", "run_tests", "grep", "apply_patch")] == [
        "allow",
        "allow",
        "allow",
        "deny",
    ]
    assert p.decide("apply_patch", {}).rule == "not in the allow list"
    assert policy(["@missing"]).decide("x", {}).verdict == "deny"  # an unknown group admits nothing


def test_argument_rules_check_every_path_argument() -> None:
    p = policy([{"tool": "write_file", "paths": ["**/*.md"]}])
    assert p.decide("write_file", {"path": "README.md"}).verdict == "allow"
    assert p.decide("write_file", {"file_path": "docs/a/b.md"}).verdict == "allow"
    assert p.decide("write_file", {"paths": ["a.md", "./b/c.md"]}).verdict == "allow"
    denied = p.decide("write_file", {"paths": ["a.md", "src/x.py"]})
    assert denied.verdict == "deny" and 'path "src/x.py" matches none of **/*.md' in denied.rule
    assert p.decide("write_file", {"path": "../outside/a.md"}).verdict == "deny"
    assert "no path argument" in p.decide("write_file", {"text": "x"}).rule
    assert p.decide("write_file", {"path": 3}).verdict == "deny"
    custom = policy([{"tool": "edit", "paths": ["docs/*"], "path_args": ["target"]}])
    assert custom.decide("edit", {"target": "docs/x"}).verdict == "allow"
    assert custom.decide("edit", {"target": "docs/a/x"}).verdict == "deny"  # * stays in one folder
    assert custom.decide("edit", {"path": "docs/x"}).verdict == "deny"  # not the declared argument


def test_path_globs_match_by_segment() -> None:
    def m(glob: str, path: str, folder: bool = False) -> bool:
        return PathGlob(glob).match(path, fold=False, folder=folder)

    assert m("**/*.md", "x.md") and m("**/*.md", "a/b/x.md") and not m("*.md", "a/x.md")
    assert m("src/**", "src/a/b.py") and m("src/**", "src") and not m("src/**", "srcx/a")
    assert m("a?.txt", "ab.txt") and not m("a?.txt", "a/.txt") and not m("[a].md", "a.md")
    assert m("secret/**", "", folder=True) and m("**/*.env", "config", folder=True)
    assert not m("secret/**", "notes", folder=True) and not m("**/*.md", "", folder=False)


def test_ask_first_then_allow_then_the_default() -> None:
    md, secret = {"tool": "write_file", "paths": ["**/*.md"]}, {"tool": "write_file", "paths": ["secret/**"]}
    p = policy([md], ask=[secret])
    assert p.decide("write_file", {"path": "a.md"}).verdict == "allow"
    assert p.decide("write_file", {"path": "secret/a.md"}).verdict == "ask"  # ask beats allow
    assert p.decide("write_file", {"path": "a.py"}).verdict == "deny"
    assert p.decide("shell", {}).verdict == "deny"
    open_ = policy(None, ask=["shell"])
    assert (open_.decide("shell", {}).verdict, open_.decide("anything", {}).verdict) == ("ask", "allow")


# --- Runtime.call_tool ------------------------------------------------------------------------


def test_a_denied_call_runs_nothing_and_is_logged_with_its_reason() -> None:
    rt, agent, _stage, _plan, tools = wired()
    result = run(rt.call_tool(agent, call("apply_patch", patch="x"), turn=1, step=1))
    assert result.is_error and tools["apply_patch"].calls == []
    assert result.text == (
        'Error: Tool "apply_patch" is not allowed in stage "explore" (rule: not in the '
        "allow list); nothing ran. It is allowed in stages: implement"
    )
    events = agent.session.events
    assert [e.type for e in events[-3:]] == ["tool/call", "tool/result", TOOL_REFUSED]
    refused = events[-1]
    assert refused.ignorable and refused.data == {
        "callId": "c_apply_patch",
        "name": "apply_patch",
        "stage": "explore",
        "rule": "not in the allow list",
        "planMode": False,
    }
    assert events[-2].data["message"]["content"][0]["isError"] is True
    assert list(events[-2].source_event_seqs or ()) == [events[-3].seq]


def test_allowed_calls_and_own_tools_run() -> None:
    rt, agent, _stage, _plan, tools = wired()
    assert not run(rt.call_tool(agent, call("grep", q="x"))).is_error
    assert tools["grep"].calls == [{"q": "x"}]
    own = run(rt.call_tool(agent, call("goto_stage", stage="nowhere")))
    assert "not allowed in stage" not in own.text  # goto_stage's own answer, not the policy's
    jump(rt, agent, "implement")  # no policy: everything runs
    assert not run(rt.call_tool(agent, call("apply_patch", patch="x"))).is_error


def test_argument_rules_at_dispatch() -> None:
    rt, agent, _stage, _plan, tools = wired()
    assert not run(rt.call_tool(agent, call("write_file", path="notes/plan.md"))).is_error
    refused = run(rt.call_tool(agent, call("write_file", path="src/app.py")))
    assert refused.is_error and 'path "src/app.py" matches none of **/*.md' in refused.text
    assert tools["write_file"].calls == [{"path": "notes/plan.md"}]


def test_plan_mode_policy_combines_with_the_stage_policy() -> None:
    rt, agent, _stage, plan, tools = wired()
    jump(rt, agent, "implement")
    assert plan.set(agent, True) == "committed"
    refused = run(rt.call_tool(agent, call("apply_patch", patch="x")))
    assert refused.is_error and "while plan mode is on" in refused.text
    assert agent.session.events[-1].data["planMode"] is True
    assert not run(rt.call_tool(agent, call("write_file", path="src/a.py"))).is_error  # both allow it
    jump(rt, agent, "explore")  # plan mode allows write_file anywhere, the stage only on *.md
    assert run(rt.call_tool(agent, call("write_file", path="src/a.py"))).is_error
    plan.set(agent, False)
    jump(rt, agent, "implement")
    assert not run(rt.call_tool(agent, call("apply_patch", patch="y"))).is_error
    assert [c["patch"] for c in tools["apply_patch"].calls] == ["y"]


def test_the_catalog_and_system_prompt_are_the_same_in_every_stage() -> None:
    rt, agent, _stage, _plan, _tools = wired()
    seen = set()
    for stage in ("explore", "implement", "verify"):
        jump(rt, agent, stage)
        asm = rt.assemble(agent)
        seen.add((asm.system, json.dumps([t.to_json() for t in asm.tools])))
    assert len(seen) == 1


def test_the_stage_notice_names_the_stage_tools() -> None:
    rt, agent, _stage, _plan, _tools = wired()
    jump(rt, agent, "verify")
    texts = [b.get("text", "") for m in agent.session.messages() for b in m["content"]]
    assert any(
        "Current stage: verify\nVerify.\nTools in this stage: read_file, grep, run_* (other tools "
        "are refused). Ask first (a human reviews the call): apply_patch." in t
        for t in texts
    )


# --- ask --------------------------------------------------------------------------------------


def _scripted() -> Any:
    from fsm_stage.reviews import ScriptedReviewChannel

    return ScriptedReviewChannel(keep_label="Deny")


def test_ask_runs_after_an_approval_and_logs_a_durable_tool_review() -> None:
    channel = _scripted().approve()
    rt, agent, _stage, _plan, tools = wired(review=channel)
    jump(rt, agent, "verify")
    result = run(rt.call_tool(agent, call("apply_patch", patch="p"), turn=1, step=1))
    assert not result.is_error and tools["apply_patch"].calls == [{"patch": "p"}]
    types = [e.type for e in agent.session.events[-6:]]
    assert types == [  # the first review records the graph (fsm/graph) with its request
        "tool/call",
        "fsm/graph",
        "fsm/review/request",
        "fsm/review/answer",
        "fsm/review/redeemed",
        "tool/result",
    ]
    request = agent.session.events[-4].data
    assert (request["kind"], request["callId"], request["from"], request["target"]) == (
        "tool",
        "c_apply_patch",
        "verify",
        "apply_patch",
    )
    assert channel.requests[0].questions[0].options[0].label == "Approve"


def test_ask_refused_by_the_reviewer_runs_nothing() -> None:
    rt, agent, _stage, _plan, tools = wired(review=_scripted().keep("use the other file"))
    jump(rt, agent, "verify")
    result = run(rt.call_tool(agent, call("apply_patch", patch="p")))
    assert result.is_error and tools["apply_patch"].calls == []
    assert "the reviewer did not approve (use the other file)" in result.text
    assert [e.type for e in agent.session.events[-3:]] == ["fsm/review/answer", "tool/result", TOOL_REFUSED]


def test_a_failing_review_channel_refuses_the_call_in_one_line() -> None:
    """A channel that raises is a refusal (its dismiss logged), as for goto_stage, never an
    exception out of call_tool."""
    rt, agent, _stage, _plan, tools = wired(review=_scripted().fail(RuntimeError("the dialog crashed")))
    jump(rt, agent, "verify")
    result = run(rt.call_tool(agent, call("apply_patch", patch="p")))
    assert result.is_error and tools["apply_patch"].calls == []
    assert "the review failed (the dialog crashed)" in result.text
    answer = next(e for e in reversed(agent.session.events) if e.type == "fsm/review/answer")
    assert (answer.data["outcome"], answer.data["by"]) == ("dismiss", "channel")


def test_ask_without_a_review_channel_is_refused() -> None:
    rt, agent, _stage, _plan, tools = wired()
    jump(rt, agent, "verify")
    result = run(rt.call_tool(agent, call("apply_patch", patch="p")))
    assert result.is_error and "no review channel" in result.text and tools["apply_patch"].calls == []


def test_a_suspended_tool_review_resumes_from_the_logged_answer() -> None:
    from fsm_stage.errors import ReviewPending, ReviewSuspended
    from fsm_stage.reviews import Answer

    def suspend(_q: Any) -> list[Answer]:
        raise ReviewSuspended()

    rt, agent, _stage, _plan, tools = wired(review=_scripted().then(suspend))
    jump(rt, agent, "verify")
    driver = StagedSession(rt, agent)
    agent.steer(user_message("patch it"))
    driver.start_turn()
    assert driver.begin_step() is not None
    c = call("apply_patch", patch="p")
    driver.record_reply("", [c])
    with pytest.raises(ReviewPending) as info:
        run(driver.run_tool(c))
    assert info.value.kind == "tool" and tools["apply_patch"].calls == []
    suspended = driver.suspended()
    assert suspended is not None and suspended.review_ids == (info.value.review_id,)
    from fsm_stage import answer_review, open_reviews

    assert [r.kind for r in open_reviews(agent.session)] == ["tool"]
    answer_review(agent.session, info.value.review_id, "approve", option="Approve")
    (result,) = run(driver.resume())
    assert not result.is_error and tools["apply_patch"].calls == [{"patch": "p"}]
    assert [e.type for e in agent.session.events[-2:]] == ["fsm/review/redeemed", "tool/result"]
    assert driver.end_step() is True


def test_a_tool_review_answered_keep_refuses_on_resume() -> None:
    from fsm_stage import answer_review
    from fsm_stage.errors import ReviewPending, ReviewSuspended
    from fsm_stage.reviews import Answer

    def suspend(_q: Any) -> list[Answer]:
        raise ReviewSuspended()

    rt, agent, _stage, _plan, tools = wired(review=_scripted().then(suspend))
    jump(rt, agent, "verify")
    driver = StagedSession(rt, agent)
    agent.steer(user_message("patch it"))
    driver.start_turn()
    driver.begin_step()
    c = call("apply_patch", patch="p")
    driver.record_reply("", [c])
    with pytest.raises(ReviewPending) as info:
        run(driver.run_tool(c))
    answer_review(agent.session, info.value.review_id, "keep", feedback="not now")
    (result,) = run(driver.resume())
    assert result.is_error and "the reviewer did not approve (not now)" in result.text
    assert tools["apply_patch"].calls == []


# --- StagedSession.authorize -------------------------------------------------------------------


def test_the_driver_authorizes_host_tools_before_they_run() -> None:
    rt, agent, _stage, _plan, _tools = wired()
    driver = StagedSession(rt, agent)
    agent.steer(user_message("go"))
    driver.start_turn()
    assert driver.begin_step() is not None
    ok, bad = call("read_file", path="a"), ToolCall.of("shell", {"cmd": "rm -rf /"}, id="c_shell")
    driver.record_reply("", [ok, bad])
    assert run(driver.authorize(ok)) is None
    driver.record_tool_result(ok, "contents")
    refused = run(driver.authorize(bad))
    assert refused is not None and refused.is_error
    assert 'Tool "shell" is not allowed in stage "explore"' in refused.text
    assert "none of this graph's stages" not in refused.text and "implement" in refused.text
    assert driver.unsettled() == ()  # the refusal settled the call
    assert [e.type for e in agent.session.events[-3:]] == ["tool/call", "tool/result", TOOL_REFUSED]
    assert driver.end_step() is True


def test_no_policy_means_everything_runs() -> None:
    rt, agent, _stage, _plan, tools = wired(
        "name: g\nsection: S.\nstages:\n  - {name: a, instruction: A.}\nplan_mode: {section: P.}\n"
    )
    assert not run(rt.call_tool(agent, call("apply_patch", patch="x"))).is_error
    assert tools["apply_patch"].calls


def test_a_graph_without_tool_rules_reads_no_stage_to_authorize_a_call() -> None:
    """No stage has ``tools`` and plan mode has none: every call runs without the current
    stage being read (one projection read less per tool call); a graph with rules reads it."""
    from fsm_stage.policy._gate import policy_state

    rt, agent, stage, _plan, _tools = wired(
        "name: g\nsection: S.\nstages:\n  - {name: a, instruction: A.}\nplan_mode: {section: P.}\n"
    )
    reads: list[object] = []
    real = stage.current
    stage.current = lambda session: reads.append(session) or real(session)  # type: ignore[method-assign]
    assert policy_state(rt, agent) is None and reads == []
    rt2, agent2, stage2, _p, _t = wired()
    reads2: list[object] = []
    real2 = stage2.current
    stage2.current = lambda session: reads2.append(session) or real2(session)  # type: ignore[method-assign]
    assert policy_state(rt2, agent2) is not None and reads2 == [agent2.session]


def test_notice_wording_for_open_and_empty_policies() -> None:
    from policy_helpers import config

    from fsm_stage.policy import policy_summary

    text = ("name: g\nsection: S.\nstages:\n  - {name: a, instruction: A., tools: {}}\n"
            "  - {name: b, instruction: B., tools: {allow: []}}\n"
            "  - {name: c, instruction: C., tools: {ask: [shell]}}\n")
    graph = config(text).graph
    assert graph is not None
    assert policy_summary(graph, "a") is None
    assert policy_summary(graph, "b") == ("Tools in this stage: none besides goto_stage and exit_plan_mode "
                                          "(other tools are refused).")
    assert policy_summary(graph, "c") == ("Tools in this stage: every tool; ask first (a human reviews the "
                                          "call): shell.")


def test_each_controller_brings_its_part_of_the_policy_through_its_own_gate() -> None:
    """The stage switch and plan mode each register a typed ``PolicyGate`` carrying their
    policy source; closing one leaves the other's rules in force, judged once."""
    from fsm_stage.policy._ask import PolicyGate
    from fsm_stage.policy._gate import policy_sources

    rt, agent, stage, plan, tools = wired()
    gates = [g for g in rt.tool_gates if isinstance(g, PolicyGate)]
    assert [g.policy_source for g in gates] == [stage, plan]
    assert policy_sources(rt) == (stage, plan)
    jump(rt, agent, "implement")
    stage.close()
    assert policy_sources(rt) == (None, plan)
    assert not run(rt.call_tool(agent, call("apply_patch", patch="x"))).is_error  # no stage rules left
    assert plan.set(agent, True) == "committed"
    refused = run(rt.call_tool(agent, call("apply_patch", patch="y"), turn=1, step=1))
    assert refused.is_error and "while plan mode is on" in refused.text
    assert [e.type for e in agent.session.events].count(TOOL_REFUSED) == 1
    plan.close()
    assert policy_sources(rt) == (None, None)
    assert not run(rt.call_tool(agent, call("apply_patch", patch="z"))).is_error
    assert [c["patch"] for c in tools["apply_patch"].calls] == ["x", "z"]


def test_arguments_naming_a_key_twice_are_unclassifiable() -> None:
    """`{"path": "src/app.py", "path": "notes/a.md"}`: json.loads keeps the last value, a
    tool's parser may keep the first, so path rules cannot tell which file is meant: the call
    is refused like one whose arguments are not JSON."""
    rt, agent, _stage, _plan, tools = wired()
    twice = ToolCall("c_twice", "write_file", '{"path": "src/app.py", "path": "notes/a.md"}')
    refused = run(rt.call_tool(agent, twice))
    assert refused.is_error and tools["write_file"].calls == []
    assert not run(rt.call_tool(agent, call("write_file", path="notes/a.md"))).is_error
