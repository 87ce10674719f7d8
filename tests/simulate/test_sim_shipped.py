"""The shipped scenarios (``stage_graphs/scenarios``) pass their own ``expect:`` blocks, and the
simulator's prefix report confirms the cache-safety claims of docs/architecture.md invariant 3 on them."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import SHIPPED

from fsm_stage.constants import PLAN_POLICY_ORDER, PLAN_POLICY_SECTION, STAGE_SWITCHED_PREFIX
from fsm_stage.scenario import Expect, load_scenario
from fsm_stage.simulate import RequestRecord, SimulationResult, simulate

REQUIRED = {"feature-work.yaml", "seed-stage-switch.yaml", "subagent.yaml", "refused-transition.yaml",
            "dismissed-review.yaml"}


def _run(path: Path, tmp_path: Path) -> SimulationResult:
    return simulate(load_scenario(path), cwd=tmp_path)


def _pairs(result: SimulationResult) -> list[tuple[RequestRecord, RequestRecord]]:
    return list(zip(result.records, result.records[1:], strict=False))


def test_the_required_scenarios_are_shipped() -> None:
    assert {p.name for p in SHIPPED} >= REQUIRED


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_scenario_passes_its_own_expectations(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    assert any(isinstance(s, Expect) for s in scenario.steps), "every shipped scenario carries expect: blocks"
    result = _run(path, tmp_path)
    assert result.failures == (), "\n".join(f.line() for f in result.failures)
    assert result.checks >= 5 and result.records


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_light_stage_switches_keep_system_and_tools(path: Path, tmp_path: Path) -> None:
    """S35 / DESIGN invariant 3: a stage switch never changes the system prompt or the tool
    catalog; across a light switch the whole previous system+tools prefix is reused, unless the
    new stage chooses another model (a different model caches nothing: reported as a switch)."""
    result = _run(path, tmp_path)
    for prev, cur in _pairs(result):
        if prev.stage == cur.stage or cur.prefix.messages != "kept":
            continue
        assert cur.prefix.system == "kept", (cur.index, cur.prefix.system_change)
        assert cur.prefix.tools == "kept", (cur.index, cur.prefix.tools_change)
        switched = (prev.model or {}).get("model") != (cur.model or {}).get("model")
        assert cur.prefix.model == ("switched" if switched else "kept" if cur.model else None)
        assert cur.prefix.head_percent == (0.0 if switched else 100.0)
        assert cur.prefix.reused_tokens == 0 if switched else (
            cur.prefix.reused_tokens >= prev.system_tokens + prev.tool_tokens)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_plan_mode_changes_only_the_order_50_section(path: Path, tmp_path: Path) -> None:
    """B36, B38: entering or leaving plan mode changes the system prompt only at plan:policy
    (order 50); the tool list is identical in both modes."""
    result = _run(path, tmp_path)
    for prev, cur in _pairs(result):
        before = {(s.name, s.order): s.text for s in prev.sections}
        after = {(s.name, s.order): s.text for s in cur.sections}
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        if prev.plan_mode != cur.plan_mode:
            assert changed == {(PLAN_POLICY_SECTION, PLAN_POLICY_ORDER)}, (cur.index, changed)
            assert cur.prefix.tools == "kept"
            assert cur.prefix.system_change is not None and PLAN_POLICY_SECTION in cur.prefix.system_change
        else:
            assert not changed, (cur.index, changed)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_only_a_full_transition_breaks_the_message_prefix(path: Path, tmp_path: Path) -> None:
    """S73: the full transition's handoff notice replaces the history; nothing else does."""
    result = _run(path, tmp_path)
    for prev, cur in _pairs(result):
        if cur.prefix.messages == "broken":
            assert cur.stage != prev.stage
            assert cur.messages[0].text.startswith(STAGE_SWITCHED_PREFIX)
            assert cur.prefix.system == "kept" and cur.prefix.tools == "kept"


def test_feature_work_has_one_light_one_full_transition_and_a_plan_round(tmp_path: Path) -> None:
    """The README's main scenario covers what it says: explore → implement (light) → verify (full),
    plus a plan-mode round, each visible in the per-request records."""
    result = _run(next(p for p in SHIPPED if p.name == "feature-work.yaml"), tmp_path)
    stages = [r.stage for r in result.records]
    assert stages[0] == "explore" and stages[-1] == "verify" and "implement" in stages
    switches = [(p, c) for p, c in _pairs(result) if p.stage != c.stage]
    assert [c.prefix.messages for _, c in switches] == ["kept", "broken"]
    assert any(r.plan_mode for r in result.records) and not result.records[-1].plan_mode
    assert (tmp_path / "handoff" / "feature-work-demo" / "verify.md").is_file()
    assert not (tmp_path / "handoff" / "feature-work-demo" / "implement.md").exists()


def test_subagent_scenario_never_sees_an_initial_stage_prompt(tmp_path: Path) -> None:
    """S28: a subagent session gets no initial stage prompt; S34: it still gets the guidance."""
    result = _run(next(p for p in SHIPPED if p.name == "subagent.yaml"), tmp_path)
    first = result.records[0]
    assert not any("Current stage:" in m.text for m in first.messages)
    assert any(c.name == "stage:policy" for r in result.records for c in r.context)
