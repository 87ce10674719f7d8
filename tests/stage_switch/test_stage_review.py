"""The review exchange and the consent rule (S52–S62; spec §1.12), plus review-answer attacks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from fsm_stage.constants import APPROVE_KEEP_CONVERSATION_LABEL, STAGE_REVIEW_ID
from fsm_stage.prompts import load_catalog
from fsm_stage.reviews import Answer, Question
from fsm_stage.stage_switch import RELOADED_MESSAGE, Consent, Decline, build_review_question, evaluate_review

from .harness import Harness, make_config, run

H = "# Implement\n\n- Completed: exploration"
PATH = "/workspace/handoff/agent-1/beta.md"


def tool_result_data(h: Harness) -> dict[str, Any]:
    data: dict[str, Any] = h.last_tool_result().data
    return data


def test_composed_review_writes_first_and_defers_the_switch_S52() -> None:
    """S52: value, one byte-exact write made before the review, one review to the calling agent with
    the handoff as detail and [approve, keep] labels; the fold waits for the boundary."""
    h = Harness(system_head=True)
    h.open_turn()
    h.user("old work")
    writes_at_review: list[int] = []

    def approve(q: Sequence[Question]) -> list[Answer]:
        writes_at_review.append(len(h.handoffs.writes))
        return [Answer(q[0].id, (h.text("review.approve_label"),))]

    h.review.then(approve)
    result = h.goto("beta", H)
    assert not result.is_error
    assert result.value == {"approved": True, "stage": "beta", "handoffPath": PATH}
    assert [(w.path, w.text) for w in h.handoffs.writes] == [(PATH, H)]
    assert writes_at_review == [1]
    (request,) = h.review.requests
    assert request.agent is h.agent
    (q,) = request.questions
    assert q.id == STAGE_REVIEW_ID and q.header == h.text("review.header") and q.detail == H
    assert q.labels == (h.text("review.approve_label"), APPROVE_KEEP_CONVERSATION_LABEL,
                        h.text("review.keep_stage_label"))
    assert h.fold() is None


def test_full_review_has_no_intent_S53() -> None:
    """S53."""
    h = Harness()
    h.open_turn()
    h.review.approve()
    assert not h.goto("beta", H).is_error
    assert h.review.requests[0].questions[0].intent is None


def test_queued_full_transition_leaves_surface_untouched_S54() -> None:
    """S54: approved with an empty surface → still no model messages before the boundary."""
    h = Harness()
    h.open_turn()
    h.review.approve()
    assert not h.goto("beta", H, log=False).is_error
    assert h.session.messages() == []


def test_keep_with_feedback_S55() -> None:
    """S55: keep + custom → keep_stage_feedback with the feedback; no switch."""
    h = Harness()
    h.open_turn()
    h.review.keep("revisit the handoff")
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text("errors.keep_stage_feedback", feedback="revisit the handoff")
    assert h.fold() is None and h.pending() is None


def test_keep_without_feedback_has_no_meta_S56() -> None:
    """S56: keep → keep_stage, isError, and the durable tool/result has no meta key."""
    h = Harness()
    h.open_turn()
    h.review.keep()
    result = h.goto("beta", H)
    assert result.is_error and result.text == "Error: " + h.text("errors.keep_stage")
    assert "meta" not in tool_result_data(h)


def test_dismissal_names_the_user_takeover_S57() -> None:
    """S57: a dismissal → errors.dismissed (not the channel's message), no meta, no switch."""
    h = Harness()
    h.open_turn()
    h.review.dismiss()
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text("errors.dismissed")
    assert "meta" not in tool_result_data(h)
    assert h.fold() is None and h.pending() is None


APPROVE = "Approve"
KEEP = "Keep current stage"


@pytest.mark.parametrize(
    ("answers", "outcome"),
    [
        ([Answer(STAGE_REVIEW_ID, (APPROVE,))], "consent"),  # (a)
        ([Answer(STAGE_REVIEW_ID, (APPROVE,), "also do X")], "feedback:also do X"),  # (b) + custom text
        ([Answer(STAGE_REVIEW_ID, (APPROVE,), "")], "keep"),  # (c) empty custom still counts
        ([Answer(STAGE_REVIEW_ID, (APPROVE, KEEP))], "keep"),  # (d) several selections
        ([Answer(STAGE_REVIEW_ID, (APPROVE, APPROVE))], "keep"),  # (e)
        ([Answer(STAGE_REVIEW_ID, ())], "keep"),  # (f)
        ([Answer(STAGE_REVIEW_ID, (), "stop")], "feedback:stop"),  # (g) free text only
        ([Answer("other", (APPROVE,))], "keep"),  # (h) no stage-review answer
        ([Answer(STAGE_REVIEW_ID, (APPROVE,)), Answer(STAGE_REVIEW_ID, (APPROVE,))], "keep"),  # (i)
        ([Answer(STAGE_REVIEW_ID, ("approve",))], "keep"),  # (j) wrong case
        ([Answer(STAGE_REVIEW_ID, ("Approved",))], "keep"),  # unknown label
        ([Answer(STAGE_REVIEW_ID, (" Approve",))], "keep"),
        ([Answer(STAGE_REVIEW_ID, (), "Approve")], "feedback:Approve"),  # free text "Approve" is not consent
        ([Answer(STAGE_REVIEW_ID, (APPROVE,), "  ")], "feedback:  "),  # whitespace feedback kept verbatim
        ([], "keep"),
    ],
)
def test_consent_matrix_S58(answers: list[Answer], outcome: str) -> None:
    """S58a–j (+ free text, unknown label, Approve plus custom text): only a lone exact Approve with no
    custom text approves; after a non-consent nothing is pending and a boundary appends nothing."""
    h = Harness()
    h.open_turn()
    h.review.answers(*answers)
    result = h.goto("beta", H)
    if outcome == "consent":
        assert not result.is_error and h.pending() == "beta"
        return
    if outcome == "keep":
        assert result.text == "Error: " + h.text("errors.keep_stage")
    else:
        feedback = outcome.split(":", 1)[1]
        assert result.text == "Error: " + h.text("errors.keep_stage_feedback", feedback=feedback)
    assert h.pending() is None
    h.boundary()
    assert h.summaries() == ["Current stage: alpha"]  # only the initial prompt, no switch


def test_zh_rejects_the_english_label_S58k() -> None:
    """S58k: with language zh the English 'Approve' label does not approve."""
    h = Harness(make_config(language="zh"))
    h.open_turn()
    h.review.answers(Answer(STAGE_REVIEW_ID, ("Approve",)))
    result = h.goto("beta", H)
    assert result.text == "Error: " + h.text("errors.keep_stage")


def test_evaluate_review_pure_S58() -> None:
    """S58 at the pure level: Consent/Decline with the feedback and the message."""
    cat = load_catalog("stage_switch")
    assert evaluate_review([Answer(STAGE_REVIEW_ID, ("Approve",))], cat) == Consent()
    d = evaluate_review([Answer(STAGE_REVIEW_ID, ("Approve",), "x")], cat)
    assert isinstance(d, Decline) and d.feedback == "x" and "x" in d.message


@pytest.mark.parametrize("error", [RuntimeError("boom"), ConnectionError("no provider")])
def test_other_review_failures_pass_through_S59(error: Exception) -> None:
    """S59: a non-dismissal failure fails the call with its own message; no meta, pending or record."""
    h = Harness()
    h.open_turn()
    h.review.fail(error)
    result = h.goto("beta", H)
    assert result.text == "Error: " + str(error)
    assert "meta" not in tool_result_data(h)
    assert h.pending() is None and h.fold() is None


def test_cancellation_is_not_a_dismissal_S59() -> None:
    """S59 / Appendix B5: an aborted review (CancelledError) propagates; it is not reported as dismissed."""
    h = Harness()
    h.open_turn()
    h.review.fail(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        run(h.controller.goto_stage({"stage": "beta", "handoff": H}, h.agent))
    assert h.pending() is None


def test_close_while_review_is_open_S60() -> None:
    """S60: closed before the (approving) answer arrives → the fixed reload message, no switch."""
    h = Harness()
    h.open_turn()
    gate = h.review.block()

    async def scenario() -> Any:
        task = asyncio.create_task(h.controller.goto_stage({"stage": "beta", "handoff": H}, h.agent))
        await gate.wait_open()
        h.controller.close()
        gate.approve("Approve")
        return await asyncio.gather(task, return_exceptions=True)

    (outcome,) = run(scenario())
    assert str(outcome) == RELOADED_MESSAGE
    assert h.fold() is None and h.controller.pending_stage(h.session) is None


def test_close_then_dismiss_still_reports_dismissed_S60() -> None:
    """S60: a rejected ask is classified first: a dismissal after close still says dismissed."""
    h = Harness()
    h.open_turn()
    gate = h.review.block()

    async def scenario() -> Any:
        task = asyncio.create_task(h.controller.goto_stage({"stage": "beta", "handoff": H}, h.agent))
        await gate.wait_open()
        h.controller.close()
        gate.dismiss()
        return await asyncio.gather(task, return_exceptions=True)

    (outcome,) = run(scenario())
    assert str(outcome) == h.text("errors.dismissed")


def test_zh_review_dialog_S61() -> None:
    """S61: language zh → zh header, question and labels; the zh approve label approves."""
    zh = load_catalog("stage_switch", "zh")
    h = Harness(make_config(language="zh"))
    h.open_turn()
    h.review.approve(zh.text("review.approve_label"))
    result = h.goto("beta", "# Handoff")
    assert not result.is_error
    (request,) = h.review.requests
    (q,) = request.questions
    assert q.header == zh.text("review.header")
    assert q.question == zh.text("review.full_question", stage="beta")
    assert q.labels == (zh.text("review.approve_label"), APPROVE_KEEP_CONVERSATION_LABEL,
                        zh.text("review.keep_stage_label"))
    assert q.header != load_catalog("stage_switch").text("review.header")


def test_zh_composed_review_and_boundary_S62() -> None:
    """S62: zh from the config file (plugin form) through the loader; detail kept; switch at boundary."""
    from fsm_stage.config import load_config_text

    cfg = load_config_text(
        "- id: stage-switch\n  config:\n    stages:\n"
        + "".join(f"      - name: {n}\n        instruction: Instruction for the {n} stage.\n"
                  for n in ("alpha", "beta", "gamma"))
        + "    section: Call goto_stage.\n    language: zh\n").graph
    assert cfg is not None
    zh = load_catalog("stage_switch", "zh")
    h = Harness(cfg)
    h.open_turn()
    h.review.approve(zh.text("review.approve_label"))
    assert not h.goto("beta", "# 交接").is_error
    (q,) = h.review.requests[0].questions
    assert (q.header, q.question, q.detail) == (zh.text("review.header"),
                                                zh.text("review.full_question", stage="beta"), "# 交接")
    assert q.labels == (zh.text("review.approve_label"), APPROVE_KEEP_CONVERSATION_LABEL,
                        zh.text("review.keep_stage_label"))
    h.boundary(step_start=True)
    assert h.fold() == "beta"


def test_light_question_shape_S64() -> None:
    """The light question has the light wording and no detail (pure builder)."""
    cat = load_catalog("stage_switch")
    q = build_review_question(cat, "beta", None)
    assert q.detail is None and q.question == cat.text("review.light_question", stage="beta")
    assert q.options[0].description == cat.text("review.light_approve_description")


def test_tool_never_claims_a_switch_that_does_not_happen() -> None:
    """Anchor (RooCodeInc/Roo-Code #1446, 'tells the assistant it switched but didn't'): every approved
    goto_stage is recorded at the very next accepted pre-step."""
    for stage in ("beta", "gamma"):
        h = Harness()
        h.open_turn()
        h.review.approve()
        result = h.goto(stage, H)
        assert not result.is_error and "approved" in result.text
        h.boundary()
        assert h.fold() == stage


def test_review_carries_the_calls_cancel_signal_S52() -> None:
    """S52 / §1.12: the review is addressed to the calling agent with the tool call's signal."""
    from fsm_stage.runtime.abort import AbortSignal

    h = Harness()
    h.open_turn()
    h.review.approve()
    signal = AbortSignal()
    run(h.controller.goto_stage({"stage": "beta", "handoff": H}, h.agent, signal))
    (request,) = h.review.requests
    assert request.agent is h.agent and request.signal is signal


def test_the_review_question_carries_a_ui_only_context_with_the_move() -> None:
    """Issue 16: the channel can show from → to (handoff: PATH); S53's intent stays absent."""
    h = Harness()
    h.open_turn()
    h.review.approve()  # type: ignore[union-attr]
    assert not h.goto("beta", H).is_error
    q = h.review.requests[0].questions[0]  # type: ignore[union-attr]
    assert q.intent is None
    assert q.context == {"from": "alpha", "to": "beta", "handoff_path": PATH}
