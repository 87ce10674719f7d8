"""The ``exit_plan_mode`` tool and presentation helpers (plan-mode spec §2.H, §2.I, B64–B92)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from plan_helpers import CAT, PLAN, Harness, run

from fsm_stage.constants import (
    APPROVE_LABEL,
    EXIT_PLAN_MODE,
    KEEP_PLANNING_LABEL,
    PLAN_MODE_EVENT,
    PLAN_REVIEW_ID,
)
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.plan_mode import PlanModeController, plan_heading_ok
from fsm_stage.reviews import Answer, Question, ScriptedReviewChannel
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.agent import Agent, InboxAgent
from fsm_stage.runtime.runtime import ControllerClosedError
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolFailure, ToolOutput, ToolSpec, dispatch_nested


def active(review: Any = None) -> Harness:
    h = Harness(review=review, events=[(PLAN_MODE_EVENT, {"active": True})])
    h.open_turn()
    return h


def fail_text(h: Harness, args: dict[str, Any], agent: Any = "default") -> str:
    who = h.agent if agent == "default" else agent
    with pytest.raises(ToolFailure) as err:
        run(h.plan.exit_plan_mode(args, who))
    return err.value.message


def test_schema_one_required_plan_argument_B64() -> None:
    """B64: description starts with the plan-mode-only sentence; exactly one required string
    parameter `plan` with its description."""
    spec = Harness().runtime.tools[EXIT_PLAN_MODE].spec
    assert spec.description == CAT.text("tool.description")
    assert spec.description.startswith("Use this tool only while the session is in plan mode.")
    params = spec.parameters
    assert list(params["properties"]) == ["plan"] and params["required"] == ["plan"]
    assert params["properties"]["plan"] == {"type": "string", "description": CAT.text("tool.plan_param")}
    assert spec.to_openai()["function"]["parameters"]["required"] == ["plan"]
    assert spec.to_anthropic()["input_schema"]["properties"]["plan"]["type"] == "string"


def test_advertised_outside_plan_mode_B65() -> None:
    """B65: the tool is listed for an agent that is not in plan mode."""
    h = Harness()
    assert EXIT_PLAN_MODE in h.runtime.assemble(h.agent).tool_names


def test_guard_order_B66() -> None:
    """B66: agent → logged active → plan text → channel → review → not closed → consent."""
    inactive_no_channel = Harness()
    no_agent = CAT.text("errors.no_agent", tool=EXIT_PLAN_MODE)
    assert fail_text(inactive_no_channel, {"plan": ""}, agent=None) == no_agent
    assert fail_text(inactive_no_channel, {"plan": ""}) == CAT.text("errors.not_in_plan", tool=EXIT_PLAN_MODE)
    no_channel = active()
    assert fail_text(no_channel, {"plan": "nope"}) == CAT.text("errors.bad_plan", tool=EXIT_PLAN_MODE)
    assert fail_text(no_channel, {"plan": PLAN}) == CAT.text("errors.no_channel")
    review = ScriptedReviewChannel().keep()
    h = active(review)
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.keep_planning")
    assert len(review.requests) == 1


def test_agentless_call_B67() -> None:
    """B67: a call without an agent fails with ERR_NO_AGENT (through the runtime: `Error: `)."""
    h = Harness(review=ScriptedReviewChannel())
    result = run(h.runtime.call_tool(None, ToolCall.of(EXIT_PLAN_MODE, {"plan": PLAN})))
    assert result.is_error and result.text == "Error: " + CAT.text("errors.no_agent", tool=EXIT_PLAN_MODE)


def test_refused_outside_plan_mode_without_review_B68() -> None:
    """B68: logged inactive → ERR_NOT_IN_PLAN, reviewer not asked (a pending entry does not
    count: the log decides, Q5)."""
    review = ScriptedReviewChannel().approve()
    h = Harness(review=review)
    h.open_turn()
    h.plan.set(h.agent, True)  # pending entry only
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.not_in_plan", tool=EXIT_PLAN_MODE)
    assert review.requests == []


@pytest.mark.parametrize("plan", ["", "do things", "   ", None, 7])
def test_invalid_plan_refused_before_review_B69(plan: object) -> None:
    """B69: empty or heading-less plans fail with ERR_BAD_PLAN; zero reviews; mode stays on."""
    review = ScriptedReviewChannel().approve()
    h = active(review)
    assert fail_text(h, {"plan": plan}) == CAT.text("errors.bad_plan", tool=EXIT_PLAN_MODE)
    assert review.requests == [] and h.get == {"active": True}


@pytest.mark.parametrize(("plan", "accepted"), [
    ("# P", True), ("   # T  ", True), ("#\n\nfoo", True), ("\ufeff# BOM", True),
    ("\u3000# wide space", True),
    ("## Fix", True),  # Q1 decision: levels 1-6 accepted
    ("###### Six", True), ("####### Seven", False), ("#Title", False), ("# ", False), ("text\n# late", False),
])
def test_heading_check_details_B70_Q1(plan: str, accepted: bool) -> None:
    """B70 (with the Q1 decision): the trimmed plan must start with 1–6 `#`, whitespace (newlines
    count), then a non-whitespace character."""
    assert plan_heading_ok(plan) is accepted


def test_no_review_channel_B71() -> None:
    """B71: without a review channel → ERR_NO_CHANNEL; mode stays active."""
    h = active()
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.no_channel")
    assert h.get == {"active": True}


def test_channel_without_provider_passes_through_B72() -> None:
    """B72: the channel's own "no provider" failure is the tool failure, verbatim."""
    h = active(ScriptedReviewChannel().fail(RuntimeError("no provider registered")))
    assert fail_text(h, {"plan": PLAN}) == "no provider registered"
    assert h.get == {"active": True}


class DelegationChannel:
    """A channel that refuses delegated children with its own message (policy lives here)."""

    MESSAGE = "This agent is owned by another live agent; put the open decision in your final result."

    def __init__(self) -> None:
        self.provider = ScriptedReviewChannel().approve()

    async def ask(self, questions: Sequence[Question], agent: Agent, *,
                  signal: AbortSignal | None = None) -> list[Answer]:
        if agent.session.header.is_subagent:
            raise RuntimeError(self.MESSAGE)
        return await self.provider.ask(questions, agent, signal=signal)


def test_delegated_child_refusal_passes_through_B73() -> None:
    """B73: a child owned by a live agent gets the channel's delegation message verbatim; the
    provider is never consulted; mode stays active."""
    channel = DelegationChannel()
    runtime_h = Harness(review=channel)
    log = MemoryLog(SessionHeader("child", origin="subagent", delegation_depth=1))
    log.append(PLAN_MODE_EVENT, {"active": True})
    child = InboxAgent(Session(log))
    with pytest.raises(ToolFailure) as err:
        run(runtime_h.plan.exit_plan_mode({"plan": PLAN}, child))
    assert err.value.message == DelegationChannel.MESSAGE
    assert channel.provider.requests == [] and runtime_h.plan.get(child).to_json() == {"active": True}


def test_review_request_shape_B74() -> None:
    """B74: one question: id plan-review, header, question, detail = plan untrimmed, options
    Approve then Keep planning with descriptions, single choice, intent; the caller agent and
    the signal by identity."""
    review = ScriptedReviewChannel().approve()
    h = active(review)
    signal = AbortSignal()
    plan = "  # Title\n\nbody  \n"
    run(h.plan.exit_plan_mode({"plan": plan}, h.agent, signal))
    (req,) = review.requests
    (q,) = req.questions
    assert (q.id, q.header, q.question, q.detail) == (
        PLAN_REVIEW_ID, CAT.text("review.header"), CAT.text("review.question"), plan)
    assert [(o.label, o.description) for o in q.options] == [
        (APPROVE_LABEL, CAT.text("review.approve_description")),
        (KEEP_PLANNING_LABEL, CAT.text("review.keep_description"))]
    assert q.multi_select is False and q.intent == {"kind": "plan-review", "approve": "Approve"}
    assert req.agent is h.agent and req.signal is signal


def test_intent_names_an_offered_option_B75() -> None:
    """B75: the intent's approve label is one of the question's labels; answers are read the
    same with or without the intent."""
    q = Harness().plan.review_question(PLAN)
    assert q.intent is not None and q.intent["approve"] in q.labels
    from fsm_stage.reviews import evaluate
    answers = [Answer(PLAN_REVIEW_ID, (APPROVE_LABEL,))]
    assert evaluate(answers, q.id, APPROVE_LABEL).approved is True


def test_approval_records_silent_exit_B76() -> None:
    """B76: exact single Approve → {approved: true} + TOOL_APPROVED; no plan/mode yet (durable
    reviews: only the review's request and answer are logged); a silent exit record; after the
    next boundary the fold is false; one review."""
    review = ScriptedReviewChannel().approve()
    h = active(review)
    n = len(h.log)
    call = ToolCall.of(EXIT_PLAN_MODE, {"plan": PLAN})
    result = run(h.runtime.call_tool(h.agent, call, log=False))
    assert not result.is_error and result.value == {"approved": True}
    assert result.text == CAT.text("tool.approved")
    assert [e.type for e in h.log.events[n:]] == ["fsm/review/request", "fsm/review/answer"]
    assert h.get == {"active": True, "pending": False}
    h.boundary()
    assert h.get == {"active": False} and h.notices() == []
    (req,) = review.requests
    assert req.agent is h.agent and req.questions[0].detail == PLAN
    assert req.questions[0].labels == (APPROVE_LABEL, KEEP_PLANNING_LABEL)


class CodeRunner:
    """A `run_code` tool that calls other tools programmatically (Code Mode port)."""

    spec = ToolSpec("run_code", "Run code that may call tools.", {"type": "object"})

    def __init__(self, h: Harness) -> None:
        self.h = h

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        call = ToolCall("sub-1", EXIT_PLAN_MODE, json.dumps({"plan": args["plan"]}))
        res = await dispatch_nested(self.h.runtime.tools, call, agent, parent_call_id="root-1",
                                    session=agent.session, signal=signal)
        return ToolOutput({"nested": res.value}, res.text)


def test_nested_dispatch_approval_B77() -> None:
    """B77: an exit called from inside a code runner: one review with the exact plan, success,
    the nested dispatch is logged (name, exact arguments, not an error), exit pending."""
    review = ScriptedReviewChannel().approve()
    h = active(review)
    h.runtime.add_tool(CodeRunner(h))
    result = run(h.runtime.call_tool(h.agent, ToolCall.of("run_code", {"plan": PLAN})))
    assert not result.is_error and result.value == {"nested": {"approved": True}}
    (q,) = review.requests[0].questions
    expected = (CAT.text("review.header"), CAT.text("review.question"), PLAN)
    assert (q.header, q.question, q.detail) == expected
    (nested,) = [e for e in h.log.events if e.type == "tool/code-dispatch"]
    assert nested.data["name"] == EXIT_PLAN_MODE and json.loads(nested.data["arguments"]) == {"plan": PLAN}
    assert nested.data["isError"] is False and nested.surface_op is None
    assert h.get == {"active": True, "pending": False}


def test_keep_planning_with_feedback_verbatim_B78() -> None:
    """B78: Keep planning + custom text → ERR_KEEP_PLANNING_FEEDBACK with the text verbatim."""
    h = active(ScriptedReviewChannel().keep("consider the resume path"))
    text = fail_text(h, {"plan": PLAN})
    assert text == CAT.text("errors.keep_planning_feedback", feedback="consider the resume path")
    assert text.endswith("consider the resume path") and h.get == {"active": True}


def test_keep_planning_without_feedback_B79() -> None:
    """B79: Keep planning without custom text → ERR_KEEP_PLANNING."""
    h = active(ScriptedReviewChannel().keep())
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.keep_planning")


def test_custom_text_only_is_feedback_B80() -> None:
    """B80: no selection + custom text → feedback, never consent."""
    h = active(ScriptedReviewChannel().custom("add tests first"))
    expected = CAT.text("errors.keep_planning_feedback", feedback="add tests first")
    assert fail_text(h, {"plan": PLAN}) == expected
    assert h.get == {"active": True}


def test_both_labels_is_not_consent_B81() -> None:
    """B81: selections [Approve, Keep planning] → ERR_KEEP_PLANNING."""
    h = active(ScriptedReviewChannel().answers(Answer(PLAN_REVIEW_ID, (APPROVE_LABEL, KEEP_PLANNING_LABEL))))
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.keep_planning")
    assert h.get == {"active": True}


def test_approve_with_custom_text_is_feedback_B82() -> None:
    """B82: [Approve] + custom text → feedback error carrying the text."""
    h = active(ScriptedReviewChannel().custom("change the tests", selected=(APPROVE_LABEL,)))
    expected = CAT.text("errors.keep_planning_feedback", feedback="change the tests")
    assert fail_text(h, {"plan": PLAN}) == expected


def test_duplicate_answer_items_are_not_consent_B83() -> None:
    """B83: two plan-review items (one approving) → ERR_KEEP_PLANNING, feedback ignored."""
    h = active(ScriptedReviewChannel().answers(Answer(PLAN_REVIEW_ID, (APPROVE_LABEL,)),
                                               Answer(PLAN_REVIEW_ID, (), "ignored")))
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.keep_planning")


def test_missing_answer_item_reads_as_keep_planning_B84() -> None:
    """B84: an empty answer list (or only other ids) → ERR_KEEP_PLANNING."""
    h = active(ScriptedReviewChannel().answers().answers(Answer("other", (APPROVE_LABEL,))))
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.keep_planning")
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.keep_planning")


def test_dismissal_is_the_user_taking_the_turn_back_B85() -> None:
    """B85: a dismissed review → ERR_DISMISSED; mode stays active; no record."""
    h = active(ScriptedReviewChannel().dismiss())
    assert fail_text(h, {"plan": PLAN}) == CAT.text("errors.dismissed")
    assert h.get == {"active": True}


def test_other_review_failures_keep_their_message_B86() -> None:
    """B86: any other channel failure passes its own message (e.g. aborted before answering)."""
    h = active(ScriptedReviewChannel().fail(TimeoutError("aborted before the user answered")))
    assert fail_text(h, {"plan": PLAN}) == "aborted before the user answered"
    assert h.get == {"active": True}


def test_throwing_provider_is_an_error_result_B87() -> None:
    """B87: a provider raising `review aborted` ends the call as an error with that message."""
    h = active(ScriptedReviewChannel().fail(RuntimeError("review aborted")))
    result = run(h.runtime.call_tool(h.agent, ToolCall.of(EXIT_PLAN_MODE, {"plan": PLAN})))
    assert result.is_error and result.text == "Error: review aborted"
    assert h.get == {"active": True}


@pytest.mark.parametrize("resolve", ["approve", "keep", "fail", "dismiss"])
def test_close_while_review_open_B88(resolve: str) -> None:
    """B88: closing while the review waits: any answer then fails with ERR_RELOADED (checked
    before consent); a failed review keeps its own error; no record; fold stays active."""
    review = ScriptedReviewChannel()
    gate = review.block()
    h = active(review)

    async def scenario() -> str:
        task = asyncio.ensure_future(h.plan.exit_plan_mode({"plan": PLAN}, h.agent))
        await gate.wait_open()
        h.plan.close()
        if resolve == "approve":
            gate.approve()
        elif resolve == "keep":
            gate.release(Answer(PLAN_REVIEW_ID, (KEEP_PLANNING_LABEL,), "more"))
        elif resolve == "fail":
            gate.fail(RuntimeError("provider torn down"))
        else:
            gate.dismiss()
        with pytest.raises(ToolFailure) as err:
            await task
        return err.value.message

    message = run(scenario())
    expected = {"approve": CAT.text("errors.reloaded"), "keep": CAT.text("errors.reloaded"),
                "fail": "provider torn down", "dismiss": CAT.text("errors.dismissed")}[resolve]
    assert message == expected
    # the closed controller no longer answers reads; the log still says active
    with pytest.raises(ControllerClosedError):
        h.plan.get(h.agent)
    assert PlanModeController({"section": "x"}).get(h.agent).to_json() == {"active": True}
    assert h.plan_events() == [True]


@pytest.mark.parametrize("case", ["no_agent", "inactive", "bad_plan", "no_channel", "no_provider", "keep",
                                  "custom", "both", "custom_approve", "duplicate", "missing", "dismiss",
                                  "other_failure"])
def test_every_failure_leaves_log_and_record_unchanged_B89(case: str) -> None:
    """B89: every non-consent or failure path leaves the log and the pending record as they were."""
    review = ScriptedReviewChannel()
    script = {
        "no_provider": lambda: review.fail(RuntimeError("no provider registered")),
        "keep": lambda: review.keep("x"), "custom": lambda: review.custom("y"),
        "both": lambda: review.answers(Answer(PLAN_REVIEW_ID, (APPROVE_LABEL, KEEP_PLANNING_LABEL))),
        "custom_approve": lambda: review.custom("z", selected=(APPROVE_LABEL,)),
        "duplicate": lambda: review.answers(Answer(PLAN_REVIEW_ID, (APPROVE_LABEL,)),
                                            Answer(PLAN_REVIEW_ID, (APPROVE_LABEL,))),
        "missing": lambda: review.answers(), "dismiss": review.dismiss,
        "other_failure": lambda: review.fail(ValueError("boom")),
    }
    if case in script:
        script[case]()
    h = Harness(review=None if case == "no_channel" else review,
                events=[] if case == "inactive" else [(PLAN_MODE_EVENT, {"active": True})])
    h.open_turn()
    h.plan.set(h.agent, not h.plan.logged(h.session))  # some pending record to preserve
    before_log, before_get = list(h.log.events), h.get
    with pytest.raises(ToolFailure):
        run(h.plan.exit_plan_mode({"plan": "bad" if case == "bad_plan" else PLAN},
                                  None if case == "no_agent" else h.agent))
    # durable reviews: a review that was asked logs its request and answer (fsm/review/*, ignorable);
    # nothing else changes
    added = list(h.log.events)[len(before_log):]
    assert list(h.log.events)[:len(before_log)] == before_log and h.get == before_get
    assert all(e.type.startswith("fsm/review/") for e in added)
    assert len(added) == (2 if case not in ("no_agent", "inactive", "bad_plan", "no_channel") else 0)


def test_signal_reaches_the_reviewer_B90() -> None:
    """B90: the tool execution's cancellation signal is forwarded unchanged (and aborting it is
    visible to the reviewer)."""
    review = ScriptedReviewChannel()
    gate = review.block()
    h = active(review)
    signal = AbortSignal()

    async def scenario() -> None:
        call = ToolCall.of(EXIT_PLAN_MODE, {"plan": PLAN})
        task = asyncio.ensure_future(h.runtime.call_tool(h.agent, call, signal=signal))
        await gate.wait_open()
        assert review.requests[0].signal is signal
        signal.abort("turn cancelled")
        assert review.requests[0].signal.aborted
        gate.fail(RuntimeError("aborted before the user answered"))
        result = await task
        assert result.is_error and result.text == "Error: aborted before the user answered"

    run(scenario())


@pytest.mark.parametrize(("plan", "title"), [
    ("## Fix the flake\n\nsteps", "Fix the flake"),
    ("intro\n# Real title   \nbody", "Real title"),
    ("no heading here", None), ("####### seven\n", None), ("  # indented", None), ("#nospace", None),
])
def test_call_card_title_B91(plan: str, title: str | None) -> None:
    """B91: call card {card: generic, title, kind: other, content: [text block: plan]}; title
    from the first 1–6 `#` heading line, trailing whitespace removed, else the fallback."""
    card = Harness().plan.present_call({"plan": plan})
    expected = title if title is not None else CAT.text("card.call_fallback")
    assert card == {"card": "generic", "title": expected, "kind": "other",
                    "content": [{"type": "text", "text": plan}]}


def test_result_card_B92() -> None:
    """B92: result card {card: generic, title: CARD_RESULT_TITLE, content unchanged}, the same
    for success and failure."""
    plan = Harness().plan
    ok = [{"type": "text", "text": CAT.text("tool.approved")}]
    bad = [{"type": "text", "text": "Error: nope"}]
    title = CAT.text("card.result_title")
    assert plan.present_result(ok) == {"card": "generic", "title": title, "content": ok}
    assert plan.present_result(bad)["content"] is bad
    assert PlanModeController({"section": "x"}, language="zh").present_result(ok)["title"] == "计划评审"
