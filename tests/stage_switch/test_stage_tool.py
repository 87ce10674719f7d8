"""goto_stage: registration, presentation, validation chain, graph edges and guards (S39–S51)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

from fsm_stage.config import EdgeConfig
from fsm_stage.constants import TOOL_CALL, TOOL_RESULT
from fsm_stage.handoff import HandoffPathError, MemoryHandoffStore
from fsm_stage.log.projections import fold_stage
from fsm_stage.runtime.tools import ToolResult
from fsm_stage.stage_switch import NO_AGENT_MESSAGE
from fsm_stage.stage_switch.tool import GotoStageTool

from .harness import Harness, Targets, make_config, run

H = "# Handoff\n\nwork"


def no_side_effects(h: Harness, before: int) -> None:
    """S51d: a failed call writes no stage event and sets no pending transition."""
    new = [e.type for e in h.session.events[before:]]
    assert all(t in (TOOL_CALL, TOOL_RESULT) for t in new), new
    assert h.pending() is None
    earlier = h.session.events[:before]
    assert h.stage_events() == [e for e in earlier if e in h.stage_events()]  # no new record
    assert h.fold() == fold_stage(earlier)


def test_tool_schema_S39() -> None:
    """S39: description, properties [stage, handoff] in order, required [stage], handoff param has no '##'."""
    h = Harness()
    spec = next(t for t in h.runtime.assemble(h.agent).tools if t.name == "goto_stage")
    assert spec.description == h.text("goto_tool.description")
    assert list(spec.parameters["properties"]) == ["stage", "handoff"]
    assert spec.parameters["required"] == ["stage"]
    assert spec.parameters["properties"]["handoff"] == {"type": "string",
                                                        "description": h.text("goto_tool.handoff_param")}
    assert "##" not in h.text("goto_tool.handoff_param")
    assert spec.output is not None and spec.output["required"] == ["approved", "stage"]
    assert spec.to_openai()["function"]["name"] == "goto_stage"


def test_present_call_card_S40() -> None:
    """S40: generic card titled by the target; body = handoff, else the light wording."""
    h = Harness()
    tool = h.runtime.tools["goto_stage"]
    assert isinstance(tool, GotoStageTool)
    card = tool.present_call({"stage": "beta", "handoff": "# Handoff\n\nwork"})
    assert card == {"card": "generic", "title": h.text("present.call_title", stage="beta"), "kind": "other",
                    "content": [{"type": "text", "text": "# Handoff\n\nwork"}]}
    light = tool.present_call({"stage": "beta"})
    assert light["content"] == [{"type": "text", "text": h.text("present.light_call_content", stage="beta")}]
    empty = tool.present_call({"stage": "beta", "handoff": ""})
    assert empty["content"] == [{"type": "text", "text": ""}]


def test_present_result_card_S41() -> None:
    """S41: generic card with the result's content unchanged."""
    h = Harness()
    content = [{"type": "text", "text": "ok"}]
    tool = h.runtime.tools["goto_stage"]
    assert isinstance(tool, GotoStageTool)
    card = tool.present_result(
        {"stage": "beta"}, {"content": content, "isError": False})
    assert card == {"card": "generic", "title": h.text("present.result_title"), "content": content}


def test_rendered_results_S42() -> None:
    """S42 (a–c): full = approved + handoff path; light = approved only; value keys exactly."""
    h = Harness()
    h.review.approve()
    h.open_turn()
    full = h.goto("beta", H, log=False)
    assert full.text == h.text("tool_result.approved", stage="beta") + h.text(
        "tool_result.handoff_path", path="/workspace/handoff/agent-1/beta.md")
    assert set(full.value) == {"approved", "stage", "handoffPath"}
    lt = Harness(make_config(min_handoff_tokens=100))
    lt.review.approve()
    lt.open_turn()
    light = lt.goto("beta", log=False)
    assert light.text == lt.text("tool_result.approved", stage="beta")
    assert light.value == {"approved": True, "stage": "beta"}


def test_agentless_call_S43() -> None:
    """S43: no calling agent → the fixed message."""
    h = Harness()
    result = h.goto("beta", "# Handoff", agent=None, log=False)
    assert result.is_error and result.text == "Error: " + NO_AGENT_MESSAGE


def test_unknown_target_S44() -> None:
    """S44: a target outside the configured stages, with the sorted list (even without a review channel)."""
    h = Harness(review=None)
    before = len(h.session.events)
    result = h.goto("ghost")
    expected = h.text("errors.not_configured", stage="ghost", stages="alpha, beta, gamma")
    assert result.text == "Error: " + expected
    no_side_effects(h, before)


def test_already_current_S45() -> None:
    """S45."""
    h = Harness()
    result = h.goto("alpha")
    assert result.text == "Error: " + h.text("errors.already_current", stage="alpha")


def test_no_review_channel_S46() -> None:
    """S46: degrade to the manual switch when no review channel exists."""
    h = Harness(review=None, handoffs=None)
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text("errors.no_user_questions")


def test_missing_handoff_before_review_S47() -> None:
    """S47: full shape without handoff → requires_handoff (the template), reviewer never asked."""
    h = Harness(handoffs=None)
    before = len(h.session.events)
    result = h.goto("beta")
    assert result.text == "Error: " + h.text("errors.requires_handoff")
    assert "## Primary Request and Intent" in result.text
    assert h.review.requests == []
    assert h.fold() is None
    no_side_effects(h, before)


def test_no_file_store_S48() -> None:
    """S48."""
    h = Harness(handoffs=None)
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text("errors.no_fs")


def test_write_failure_passes_through_S49() -> None:
    """S49: a write that raises 'disk full' fails the call with that message, unchanged."""
    h = Harness()
    h.handoffs.fail_with = OSError("disk full")
    result = h.goto("beta", H)
    assert result.text == "Error: disk full"
    assert h.fold() is None and h.review.requests == []


def test_path_refusal_is_a_clear_tool_error() -> None:
    """A handoff path refusal reaches the model as one clear line."""

    class Refusing(MemoryHandoffStore):
        def write(self, relative: PurePosixPath, text: str, *, cwd: str | None, policy: Any = None) -> str:
            raise HandoffPathError("handoff folder '/workspace/handoff' is a symlink")

    h = Harness(handoffs=Refusing())
    result = h.goto("beta", H)
    assert result.text == "Error: handoff folder '/workspace/handoff' is a symlink"


def test_threshold_needs_a_token_meter_first_S50() -> None:
    """S50: threshold configured, no meter (and no fs) → missing_token_meter."""
    h = Harness(make_config(min_handoff_tokens=100), meter=None, handoffs=None)
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text("errors.missing_token_meter")


def test_validation_order_and_no_side_effects_S51() -> None:
    """S51a–e: blank handoff = missing; unknown before current before review channel; review channel
    before meter/handoff/fs; no failure writes an event or sets pending; a declined review keeps the file."""
    h = Harness()
    assert h.goto("beta", "   ").text == "Error: " + h.text("errors.requires_handoff")  # (a)
    bare = Harness(review=None)
    assert "not configured" in bare.text("errors.not_configured", stage="x", stages="y")
    assert bare.goto("alpha").text == "Error: " + bare.text("errors.already_current", stage="alpha")  # (b)
    c = Harness(make_config(min_handoff_tokens=1), review=None, meter=None, handoffs=None)
    assert c.goto("beta").text == "Error: " + c.text("errors.no_user_questions")  # (c)
    d = Harness()
    before = len(d.session.events)
    for stage, handoff in (("ghost", None), ("alpha", None), ("beta", None), ("beta", "  ")):
        assert d.goto(stage, handoff).is_error
    no_side_effects(d, before)  # (d)
    e = Harness()
    e.review.keep()
    assert e.goto("beta", "# Draft").is_error
    assert e.handoffs.files == {"/workspace/handoff/agent-1/beta.md": "# Draft"}  # (e)
    assert e.pending() is None


# ----------------------------------------------------------------------------- graph edges as guards

EDGES: Targets = {"alpha": ["beta"], "beta": [EdgeConfig("gamma", ("tests_green",)), "alpha"], "gamma": []}


def test_model_may_only_take_graph_edges() -> None:
    """goto_stage refuses a target that is not an edge, naming the allowed targets; nothing asked."""
    h = Harness(make_config(targets=EDGES))
    result = h.goto("gamma", H)
    expected = h.text("errors.not_a_target", stage="gamma", current="alpha", targets="beta")
    assert result.text == "Error: " + expected
    assert h.review.requests == [] and h.handoffs.writes == []


def test_edge_guard_must_hold_and_refusal_names_it() -> None:
    """A guarded edge is refused while its named predicate is false (or unregistered), then allowed."""
    h = Harness(make_config(targets=EDGES))
    h.controller.set(h.agent, "beta")
    refused = h.goto("gamma", H)
    assert refused.text == "Error: " + h.text("errors.guard_blocked", stage="gamma", guards="tests_green",
                                              count=1, targets="alpha")
    green = {"ok": False}
    h.controller.register_eligibility(lambda _a: green["ok"], name="tests_green")
    assert h.goto("gamma", H).text == refused.text
    green["ok"] = True
    h.open_turn()
    h.review.approve()
    ok = h.goto("gamma", H)
    assert not ok.is_error and h.pending() == "gamma"


def test_stage_without_targets_refuses_everything_with_none() -> None:
    h = Harness(make_config(targets=EDGES))
    h.controller.set(h.agent, "gamma")
    result = h.goto("alpha", H)
    assert result.text == "Error: " + h.text("errors.not_a_target", stage="alpha", current="gamma",
                                             targets=h.text("errors.no_targets"))


def test_guard_rechecked_after_the_review() -> None:
    """Guards are checked again after the review: a guard that stops holding while the human
    reads refuses the transition."""
    h = Harness(make_config(targets=EDGES))
    h.controller.set(h.agent, "beta")
    green = {"ok": True}
    h.controller.register_eligibility(lambda _a: green["ok"], name="tests_green")
    h.open_turn()
    gate = h.review.block()

    async def scenario() -> ToolResult:
        import asyncio

        task = asyncio.create_task(h.goto_async("gamma", H, log=False))
        await gate.wait_open()
        green["ok"] = False
        gate.approve(h.text("review.approve_label"))
        return await task

    result = run(scenario())
    assert result.is_error and "tests_green" in result.text
    assert h.pending() is None


def test_user_jump_ignores_edges() -> None:
    """/stage may jump anywhere, even where no edge leads."""
    h = Harness(make_config(targets=EDGES))
    assert h.command("/stage gamma").kind == "success"
    assert h.fold() == "gamma"


def test_retired_current_stage_may_go_anywhere() -> None:
    """From a stage no longer in the graph the model may go to any configured stage."""
    h = Harness(make_config(targets=EDGES))
    h.controller.set(h.agent, "retired")
    h.open_turn()
    h.review.approve()
    assert not h.goto("gamma", H).is_error
    h.boundary()
    assert h.fold() == "gamma"


def test_stage_moved_during_review_refuses_the_stale_approval() -> None:
    """Another writer moved the stage while the human read → the approval is stale."""
    h = Harness()
    h.open_turn()
    gate = h.review.block()

    async def scenario() -> ToolResult:
        import asyncio

        task = asyncio.create_task(h.goto_async("beta", H, log=False))
        await gate.wait_open()
        h.session.append_message(h.controller.stage_prompt("gamma", narrate=False))  # another writer
        gate.approve(h.text("review.approve_label"))
        return await task

    result = run(scenario())
    assert result.text == "Error: " + h.text("errors.stage_changed", stage="beta", current="gamma")
    assert h.pending() is None


def _closed(h: Harness) -> list[object]:
    return [e.data for e in h.session.events if e.type == "fsm/review/redeemed"]


def test_flush_when_the_logged_stage_moved_closes_the_approval_stage_changed() -> None:
    """An approval is redeemed only from the stage it was asked in: if the logged stage moved
    (another writer) the flush closes it ``stage-changed``, never applies it as a jump, and tells
    the model in one model-visible line (docs/reviews.md, "Redemption")."""
    h = Harness(make_config(targets=EDGES))
    h.open_turn()
    h.review.approve()
    assert not h.goto("beta", H).is_error
    pending = h.controller.pending_transition(h.session)
    assert pending is not None and pending.kind == "model"
    h.session.append_message(h.controller.stage_prompt("gamma", narrate=False))  # another writer
    h.boundary()
    assert h.fold() == "gamma" and h.pending() is None
    assert [(d["applied"], d["reason"]) for d in _closed(h)] == [(False, "stage-changed")]  # type: ignore[index]
    told = [m["content"][0]["text"] for m in h.session.messages() if "was not applied" in str(m)]
    assert len(told) == 1 and told[0].startswith('The approved transition to stage "beta" was not applied')
    assert '"gamma"' in told[0]


GUARDED: Targets = {"alpha": [EdgeConfig("beta", ("tests_green",))], "beta": ["alpha"]}


def test_flush_fires_the_edge_with_the_real_guards_when_they_still_hold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """DESIGN: the flush fires the machine's edge with the live eligibility (the
    guard is consulted again at flush time); while it holds, no jump and no warning."""
    import logging

    h = Harness(make_config(targets=GUARDED))
    calls: list[object] = []

    def tests_green(agent: object) -> bool:
        calls.append(agent)
        return True

    h.controller.register_eligibility(tests_green, name="tests_green")
    h.open_turn()
    h.review.approve()
    assert not h.goto("beta", H).is_error
    before = len(calls)
    with caplog.at_level(logging.WARNING):
        h.boundary()
    assert h.fold() == "beta"
    assert len(calls) > before  # the guard was evaluated at flush time
    assert "stage switch" not in caplog.text


def test_flush_after_a_guard_closed_closes_the_approval_guard_closed() -> None:
    """Fail closed: a guard that closed between the approval and the flush means the edge does
    not hold any more; the approval is closed ``guard-closed`` (never applied as a jump) and the
    model is told."""
    h = Harness(make_config(targets=GUARDED))
    green = {"value": True}
    h.controller.register_eligibility(lambda _a: green["value"], name="tests_green")
    h.open_turn()
    h.review.approve()
    assert not h.goto("beta", H).is_error
    green["value"] = False
    h.boundary()
    assert h.controller.current(h.session) == "alpha" and h.pending() is None
    assert [(d["applied"], d["reason"]) for d in _closed(h)] == [(False, "guard-closed")]  # type: ignore[index]
    assert sum("no longer holds" in str(m) for m in h.session.messages()) == 1


def test_plan_mode_machine_is_not_a_stage_graph() -> None:
    import pytest

    from fsm_stage.graph import compile_plan_mode
    from fsm_stage.stage_switch import StageController

    with pytest.raises(TypeError, match="stage graph"):
        StageController(compile_plan_mode())
