"""Initial stage prompt and stage-prompt messages (S24–S30, S88, S89; spec §1.3, §1.14)."""

from __future__ import annotations

from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.log.events import Event

from .harness import PROBE, Harness, body, run


def stage_prompts(h: Harness) -> list[str]:
    return [t for t in h.prompt_texts() if t.startswith("Current stage:")]


def test_rejected_first_proposal_injects_nothing_S24() -> None:
    """S24: a step the host rejects runs no pre-step: nothing becomes visible, no record."""
    h = Harness()
    loop = Loop(h.runtime, h.agent, ScriptedModel([ModelReply.say("never")]), accept=lambda _a, _b: False)
    outcomes = run(loop.prompt("hello"))
    assert [o.reason for o in outcomes] == ["blocked"]
    assert h.prompt_texts() == []
    assert h.summaries() == []


def test_initial_prompt_for_top_level_session_S25() -> None:
    """S25: one visible stage prompt, exactly 'Current stage: alpha\\n<instruction>'."""
    h = Harness()
    h.open_turn()
    h.boundary()
    assert stage_prompts(h) == [body("alpha")]


def test_initial_prompt_once_with_system_head_S26() -> None:
    """S26: boot with a system head: one alpha prompt, one summary, fold/projection/variables agree;
    a second boundary adds no second prompt."""
    h = Harness(system_head=True)
    h.open_turn()
    h.boundary()
    assert stage_prompts(h) == [body("alpha")]
    assert h.summaries() == ["Current stage: alpha"]
    assert h.fold() == "alpha"
    state = h.controller.projection_state(h.session)
    assert state is not None and state.stage == "alpha" and state.has_stage_prompt
    assert h.controller.variables(h.agent) == {"stage_current": "alpha", "stage_targets": "beta, gamma"}
    h.boundary()
    assert stage_prompts(h) == [body("alpha")]
    assert h.summaries() == ["Current stage: alpha"]


def test_initial_prompt_follows_the_step_messages_S27() -> None:
    """S27: the initial prompt is added to the END of the entered batch, after the probe."""
    h = Harness()
    h.open_turn()
    batch = h.boundary()
    assert [m["content"][0]["text"] for m in batch] == [PROBE, body("alpha")]
    assert h.prompt_texts() == [PROBE, body("alpha")]


def test_subagent_origin_gets_no_initial_prompt_S28() -> None:
    """S28: origin=subagent (depth 1) → no stage prompt."""
    h = Harness(origin="subagent", depth=1)
    h.open_turn()
    h.boundary()
    assert stage_prompts(h) == []
    assert h.summaries() == []


def test_subagent_depth_only_gets_no_initial_prompt_S29() -> None:
    """S29: delegationDepth=2 without origin is enough."""
    h = Harness(depth=2)
    h.open_turn()
    h.boundary()
    assert stage_prompts(h) == []


def test_aborted_pre_step_changes_nothing_S30a() -> None:
    """S30a: aborted after downstream entered → decision unchanged, no injection, no flush."""
    h = Harness()
    h.open_turn()
    batch = h.boundary(aborted=True)
    assert [m["content"][0]["text"] for m in batch] == [PROBE]
    assert h.summaries() == []
    h.controller.set(h.agent, "beta")
    h.boundary(aborted=True)
    assert h.pending() == "beta" and h.fold() is None


def test_legacy_prompt_blocks_injection_S30b() -> None:
    """S30b: a plugin:stage-switch message containing 'Current stage:' (any form) counts as a prompt."""
    h = Harness()
    h.session.append_message({"id": "old", "role": "user",
                              "content": [{"type": "text", "text": "Current stage: beta\nold"}],
                              "source": {"kind": "plugin:stage-switch", "form": "prompt"}})
    h.open_turn()
    h.boundary()
    assert len(stage_prompts(h)) == 1  # only the legacy one
    assert h.summaries() == []  # form prompt, no summary: not a record, and nothing new written


def test_subagent_still_gets_queued_flush_S30c() -> None:
    """S30c: a subagent with a queued /stage transition still gets the flush."""
    h = Harness(origin="subagent", depth=1)
    h.open_turn()
    assert h.command("/stage gamma").kind == "success"
    h.boundary()
    assert h.fold() == "gamma"
    assert h.prompt_texts()[-2].endswith(body("gamma"))  # flushed before the probe
    assert h.prompt_texts()[-1] == PROBE


def test_pending_first_step_gets_only_the_flush_S30d() -> None:
    """S30d: a fresh session whose first pre-step finds a pending transition gets only the flush."""
    h = Harness()
    h.open_turn()
    assert h.controller.set(h.agent, "beta") == "queued"
    h.boundary()
    assert h.summaries() == ["Current stage: beta"]
    assert all("Current stage: alpha" not in t for t in h.prompt_texts())
    h.boundary()
    assert h.summaries() == ["Current stage: beta"]


def test_user_switch_flush_appends_narrated_prompt_S88() -> None:
    """S88: set() during an open turn with a header logged while alpha → queued; the flush appends
    the narrated beta prompt."""
    h = Harness()
    h.open_turn()
    h.header()
    assert h.controller.set(h.agent, "beta") == "queued"
    h.boundary(step_start=True)
    expected = h.text("notice.user_switch_prefix", stage="beta") + body("beta")
    assert expected in h.prompt_texts()
    assert h.fold() == "beta"


def test_unconfigured_stage_prompt_drops_instruction_S89() -> None:
    """S89: set() to a stage that is not configured: the prompt is just 'Current stage: retired'."""
    h = Harness()
    h.open_turn()
    assert h.controller.set(h.agent, "retired") == "queued"
    h.boundary(step_start=True)
    texts = h.prompt_texts()
    assert any("Current stage: retired" in t for t in texts)
    assert not any("Current stage: retired\n" in t for t in texts)
    assert h.fold() == "retired"
    assert h.controller.variables(h.agent) == {"stage_current": "retired",
                                               "stage_targets": "alpha, beta, gamma"}


def test_initial_prompt_uses_configured_initial() -> None:
    """`initial: beta` starts the session in beta."""
    from .harness import make_config

    h = Harness(make_config(initial="beta"))
    h.open_turn()
    h.boundary()
    assert stage_prompts(h) == [body("beta")]
    ev: Event = h.stage_events()[0]
    assert ev.data["source"] == {"kind": "stage-switch", "form": "notice", "summary": "Current stage: beta"}
