"""The port's decisions on the reference quirks Q1–Q9 (plan-mode spec §2.N; plan_mode docstring).

Q1 is tested in test_plan_exit_tool (heading levels), Q2 in test_plan_command (entry wording),
Q7/Q8 in test_plan_boundary (B31, B34), Q9 in test_plan_set (B20).
"""

from __future__ import annotations

from typing import Any

import pytest
from plan_helpers import CAT, PLAN, SECTION, Harness, notice_text, run

from fsm_stage.constants import PLAN_MODE_EVENT
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.tools import ToolFailure


def test_Q3_net_zero_boundary_never_duplicates_an_injected_notice() -> None:
    """Q3: an idle commit injects one notice; a flip-flop before the next boundary nets out and
    the boundary adds no second notice (B25/B26 with the Q3 decision)."""
    h = Harness()
    h.header()  # the model was told: default
    assert h.plan.set(h.agent, True) == "committed"
    assert [notice_text(m) for m in h.injected()] == [CAT.text("notice.to_plan")]
    h.open_turn(2)
    assert h.plan.set(h.agent, False) == "queued"
    assert h.plan.set(h.agent, True) == "cancelled"
    assert h.boundary([]) == []
    assert h.plan_events() == [True]


def test_Q5_second_exit_in_the_same_batch_is_refused_while_the_first_is_approved() -> None:
    """Q5 (durable reviews replace the seeds' "asks again"): a second call after an approval is
    refused at once, telling the model the exit was approved already; nobody is asked twice and
    the boundary applies the one silent exit."""
    review = ScriptedReviewChannel().approve().approve()
    h = Harness(review=review, events=[(PLAN_MODE_EVENT, {"active": True})])
    h.open_turn()
    run(h.plan.exit_plan_mode({"plan": PLAN}, h.agent))
    with pytest.raises(ToolFailure, match="already approved"):
        run(h.plan.exit_plan_mode({"plan": "# Another plan\n"}, h.agent))
    assert [r.questions[0].detail for r in review.requests] == [PLAN]
    h.boundary()
    assert h.plan_events() == [True, False] and h.notices() == []


def test_Q6_failed_flush_request_carries_new_guidance_until_logged() -> None:
    """Q6: when the flush append fails, the step was already assembled from the effective state
    (section present) while the log still says default; the next step's boundary logs it."""
    h = Harness(attach=False)

    broken: list[bool] = []

    def break_next_append(agent: object, messages: list[Any], aborted: bool) -> list[Any]:
        if h.plan.get(h.agent).pending is not None and not broken:
            broken.append(True)
            h.log.fail_next = OSError("disk hiccup")  # the plan/mode flush is the next append
        return messages

    h.runtime.add_pre_step(break_next_append)
    h.plan.attach(h.runtime)

    def select(_request: object) -> ModelReply:
        h.plan.set(h.agent, True)
        return ModelReply.call("unknown_tool")

    model = ScriptedModel([select, ModelReply.call("unknown_tool"), ModelReply.say("done")])
    run(Loop(h.runtime, h.agent, model).prompt("go"))
    assert SECTION in model.requests[1].system  # step 2: effective state, flush failed
    mode_seq = next(e.seq for e in h.log.events if e.type == PLAN_MODE_EVENT)
    step3 = next(e.seq for e in h.log.events if e.type == "step/start" and e.data["step"] == 3)
    step2 = next(e.seq for e in h.log.events if e.type == "step/start" and e.data["step"] == 2)
    assert broken and step2 < mode_seq < step3 and h.plan_events() == [True]


def test_Q4_projection_keeps_dsh_semantics_for_error_settled_commands() -> None:
    """Q4 (kept): the `plan` unit is DSH's state version 2: an error-settled `/plan off` clears
    even an earlier successful selection, although the controller still holds the entry."""
    h = Harness()
    h.open_turn()
    image = {"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png",
                                             "bytes": 1, "width": 1, "height": 1}}
    run(h.runtime.run_command(h.agent, "/plan"))
    assert h.runtime.projections is not None
    assert h.runtime.projections.view(h.session, "plan") == {"active": False, "pending": True}
    reply = run(h.runtime.run_command(h.agent, "/plan off", (image,)))
    assert reply is not None and reply.kind == "error"
    assert h.runtime.projections.view(h.session, "plan") == {"active": False, "pending": False}
    assert h.get == {"active": False, "pending": True}


def test_check_log_lists_every_problem() -> None:
    """The invariant over a whole log (S10 validate_log): every bad plan/mode, in order."""
    from fsm_stage.log.events import MemoryLog, SessionHeader
    from fsm_stage.plan_mode import PlanModeController

    log = MemoryLog(SessionHeader("s"))
    for data in ({"active": True}, {"active": 1}, {}, {"active": False}):
        log.append(PLAN_MODE_EVENT, data)
    problems = PlanModeController.check_log(log.events)
    assert len(problems) == 2 and problems[0].endswith("got 1") and problems[1].endswith("undefined")
