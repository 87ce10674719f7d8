"""stage:policy context, eligibility predicates, named guards and variables (S31–S38; §1.7, §1.8)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from fsm_stage.config import EdgeConfig
from fsm_stage.constants import STAGE_POLICY_CONTEXT, STAGE_POLICY_ORDER
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.runtime.agent import Agent
from fsm_stage.runtime.assembly import SNAPSHOT_FOLD, snapshot_if_changed
from fsm_stage.stage_switch import PREDICATE_TYPE_MESSAGE, ProjectionUnavailableError

from .harness import SECTION, Harness, make_config, run


def policy(h: Harness) -> str | None:
    """The rendered stage:policy text, or None when the entry is not registered / empty."""
    for c in h.runtime.assemble(h.agent).context:
        if c.name == STAGE_POLICY_CONTEXT:
            assert c.order == STAGE_POLICY_ORDER
            return c.text
    return None


def targets(h: Harness) -> str:
    """The ``stage_targets`` template variable for the harness agent."""
    variables = h.controller.variables(h.agent)
    assert variables is not None
    return variables["stage_targets"]


def test_no_predicate_gives_empty_text_S31() -> None:
    """S31: the entry exists (order 116) and renders '' without predicates."""
    h = Harness()
    assert STAGE_POLICY_CONTEXT in h.runtime.context_names
    assert h.controller.policy_text(h.agent) == ""
    assert policy(h) is None  # empty entries are dropped from the assembly


def test_true_predicate_gives_the_section_S32() -> None:
    """S32: a predicate returning True shows the configured section."""
    h = Harness()
    h.controller.register_eligibility(lambda _a: True)
    assert policy(h) == SECTION


def test_any_predicate_enables_and_disposal_removes_S33() -> None:
    """S33: false + true → section; dispose the true one → ''; disposing the false one is fine."""
    h = Harness()
    seen: list[str] = []

    def false(_a: Agent) -> bool:
        seen.append("false")
        return False

    def true(_a: Agent) -> bool:
        seen.append("true")
        return True

    dispose_false = h.controller.register_eligibility(false)
    dispose_true = h.controller.register_eligibility(true)
    assert h.controller.policy_text(h.agent) == SECTION
    assert seen[:2] == ["false", "true"]  # registration order
    dispose_true()
    assert h.controller.policy_text(h.agent) == ""
    dispose_false()
    dispose_false()
    assert h.controller.policy_text(h.agent) == ""


def test_policy_joins_the_snapshot_only_when_changed_S34() -> None:
    """S34: the runtime-context snapshot carries the section; an unchanged text is not re-appended,
    a changed one (stage switch with << stage_current >>) is."""
    h = Harness(make_config(section="Stage << stage_current >>; next: << stage_targets >>."))
    h.controller.register_eligibility(lambda _a: True)
    context = h.runtime.assemble(h.agent).context
    snap = snapshot_if_changed(h.session.read(SNAPSHOT_FOLD), context)
    assert snap is not None and "Stage alpha; next: beta, gamma." in snap["content"][0]["text"]
    h.session.append_message(snap)
    assert snapshot_if_changed(h.session.read(SNAPSHOT_FOLD), h.runtime.assemble(h.agent).context) is None
    assert h.controller.set(h.agent, "beta") == "committed"
    snap2 = snapshot_if_changed(h.session.read(SNAPSHOT_FOLD), h.runtime.assemble(h.agent).context)
    assert snap2 is not None and "Stage beta; next: alpha, gamma." in snap2["content"][0]["text"]


def test_system_prompt_never_carries_the_stage_S35() -> None:
    """S35: no system section is named stage:context / stage:policy; the system prompt does not change
    across a stage switch (cache-safe) and neither does the tool list."""
    h = Harness()
    h.controller.register_eligibility(lambda _a: True)
    before = h.runtime.assemble(h.agent)
    assert not {"stage:context", "stage:policy"} & set(h.runtime.section_names)
    h.controller.set(h.agent, "gamma")
    after = h.runtime.assemble(h.agent)
    assert before.system == after.system
    assert before.tools == after.tools and "goto_stage" in after.tool_names


def test_variables_S36() -> None:
    """S36."""
    h = Harness()
    assert h.controller.variables(h.agent) == {"stage_current": "alpha", "stage_targets": "beta, gamma"}


def test_variables_edge_cases_S37() -> None:
    """S37 (a–d): no agent; after a switch (configured order); unsorted configs; unconfigured current."""
    h = Harness()
    assert h.controller.variables(None) is None  # (a)
    assert h.controller.policy_text(None) == ""
    h.controller.set(h.agent, "beta")
    assert targets(h) == "alpha, gamma"  # (b)
    z = Harness(make_config(("zeta", "alpha", "beta")))
    z.controller.set(z.agent, "alpha")
    assert targets(z) == "zeta, beta"  # (c)
    assert z.command("/stage").text == z.text("command.current", stage="alpha", stages="alpha, beta, zeta")
    r = Harness()
    r.controller.set(r.agent, "retired")
    assert targets(r) == "alpha, beta, gamma"  # (d)


def test_register_eligibility_rules_S37e_S37f_S37g() -> None:
    """S37e: non-callable → TypeError naming the predicate; S37f: same callable stored once;
    S37g: closing clears every predicate."""
    h = Harness()
    with pytest.raises(TypeError, match="predicate must be a function"):
        h.controller.register_eligibility(cast(Any, 42))
    assert "predicate" in PREDICATE_TYPE_MESSAGE

    def pred(_a: Agent) -> bool:
        return True

    d1 = h.controller.register_eligibility(pred)
    h.controller.register_eligibility(pred)
    d1()
    assert h.controller.policy_text(h.agent) == ""
    h.controller.register_eligibility(pred)
    h.controller.register_eligibility(lambda _a: True, name="ready")
    h.controller.close()
    assert not h.controller.is_eligible(h.agent)
    assert not h.controller.guards_hold(h.agent, ("ready",))


def test_closing_unregisters_policy_S38() -> None:
    """S38: after close() the assembly no longer lists stage:policy."""
    h = Harness()
    h.controller.register_eligibility(lambda _a: True)
    assert policy(h) == SECTION
    h.controller.close()
    assert STAGE_POLICY_CONTEXT not in h.runtime.context_names
    assert policy(h) is None


def test_raising_predicate_counts_as_false(caplog: pytest.LogCaptureFixture) -> None:
    """A predicate that raises fails closed and is logged (fail closed)."""
    h = Harness()

    def broken(_a: Agent) -> bool:
        raise RuntimeError("flag store down")

    h.controller.register_eligibility(broken)
    assert h.controller.policy_text(h.agent) == ""
    assert "flag store down" in caplog.text


def test_targets_follow_graph_edges_and_named_guards() -> None:
    """<< stage_targets >> lists only the open edges out of the current stage."""
    cfg = make_config(targets={"alpha": ["beta"], "beta": [EdgeConfig("gamma", ("tests_green",)), "alpha"],
                               "gamma": []})
    h = Harness(cfg)
    assert h.controller.variables(h.agent) == {"stage_current": "alpha", "stage_targets": "beta"}
    h.controller.set(h.agent, "beta")
    assert targets(h) == "alpha"
    green = {"value": False}
    dispose = h.controller.register_eligibility(lambda _a: green["value"], name="tests_green")
    assert h.controller.targets(h.agent) == ("alpha",)
    green["value"] = True
    assert h.controller.targets(h.agent) == ("gamma", "alpha")
    dispose()
    assert h.controller.targets(h.agent) == ("alpha",)
    h.controller.set(h.agent, "gamma")
    assert targets(h) == ""


def test_named_guard_names_hold_one_predicate() -> None:
    h = Harness()
    h.controller.register_eligibility(lambda _a: True, name="ready")
    with pytest.raises(ValueError, match="ready"):
        h.controller.register_eligibility(lambda _a: False, name="ready")


def test_named_guards_do_not_gate_the_guidance() -> None:
    h = Harness()
    h.controller.register_eligibility(lambda _a: True, name="ready")
    assert h.controller.policy_text(h.agent) == ""


def test_policy_snapshot_through_the_reference_loop_S34() -> None:
    """S34 end to end: the loop logs the snapshot with the rendered section before the request."""
    h = Harness()
    h.controller.register_eligibility(lambda _a: True)
    loop = Loop(h.runtime, h.agent, ScriptedModel([ModelReply.say("ok")]))
    run(loop.prompt("hi"))
    assert any(SECTION in t for t in h.prompt_texts())


def test_reads_fail_loudly_after_close_S97() -> None:
    """S97: with the projection gone, current() raises instead of answering the initial stage."""
    h = Harness()
    h.controller.close()
    with pytest.raises(ProjectionUnavailableError, match="not registered"):
        h.controller.current(h.session)
    assert h.controller.projection_state(h.session) is None
