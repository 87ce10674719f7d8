"""The recorded DSH plan-review session, replayed through the reference loop.

Inputs taken from the recording: the ``/plan`` command with its message, one model step
calling ``exit_plan_mode`` with the recorded plan, an approving review, a second step
answering ``DONE``. The log we write must put ``plan/mode`` where DSH put it.
"""

from __future__ import annotations

import json

import pytest
from plan_helpers import PLAN_REVIEW, SECTION, run

from fsm_stage.constants import (
    COMMAND_DONE,
    COMMAND_RUN,
    EXIT_PLAN_MODE,
    PLAN_MODE_EVENT,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TURN_END,
    TURN_START,
)
from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event, MemoryLog, SessionHeader
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session

MARKERS = (COMMAND_RUN, COMMAND_DONE, PLAN_MODE_EVENT, STEP_START, STEP_END, TURN_START, TURN_END)


def skeleton(events: list[Event] | tuple[Event, ...]) -> list[str]:
    out = []
    for e in events:
        if e.type == PLAN_MODE_EVENT:
            out.append(f"plan/mode:{e.data['active']}")
        elif e.type in (STEP_START, STEP_END):
            out.append(f"{e.type}:{e.data['turn']}.{e.data['step']}")
        elif e.type in MARKERS:
            out.append(e.type)
    return out


def test_recorded_plan_review_session_positions_B24_B56_B62_B76() -> None:
    """B24/B56/B62/B76: replaying the recording's inputs puts ``plan/mode`` true between the
    command's run/done and ``plan/mode`` false between step 1's end and step 2's start."""
    if not PLAN_REVIEW.is_file():
        pytest.skip(f"DSH corpus not found at {PLAN_REVIEW.parent} (expected <repo>/../shared/data)")
    recorded = read_log(PLAN_REVIEW)
    rec_events = list(recorded.events)
    run_args = next(e.data["args"] for e in rec_events if e.type == COMMAND_RUN)
    call = next(e for e in rec_events if e.type == TOOL_CALL and e.data["name"] == EXIT_PLAN_MODE)
    recorded_plan = json.loads(call.data["arguments"])["plan"]

    review = ScriptedReviewChannel().approve()
    runtime = Runtime(review=review)
    PlanModeController({"section": SECTION}).attach(runtime)
    session = Session(MemoryLog(SessionHeader("replay")))
    agent = InboxAgent(session)
    model = ScriptedModel([ModelReply.call(EXIT_PLAN_MODE, {"plan": recorded_plan}), ModelReply.say("DONE")])
    loop = Loop(runtime, agent, model)

    async def drive() -> None:
        reply = await loop.command("/plan" + run_args)
        assert reply is not None and reply.kind == "success"
        await loop.run_until_idle()

    run(drive())
    ours = list(session.events)
    (our_run,) = [e for e in ours if e.type == COMMAND_RUN]
    assert our_run.data["name"] == "plan" and our_run.data["args"] == run_args  # raw input verbatim
    assert skeleton(ours) == skeleton(rec_events)
    # the two anchors the issue names, checked directly as well
    for events in (ours, rec_events):
        types = [e.type for e in events]
        on = next(i for i, e in enumerate(events) if e.type == PLAN_MODE_EVENT and e.data["active"] is True)
        off = next(i for i, e in enumerate(events) if e.type == PLAN_MODE_EVENT and e.data["active"] is False)
        assert types.index(COMMAND_RUN) < on < types.index(COMMAND_DONE)
        step1_end = next(i for i, e in enumerate(events) if e.type == STEP_END and e.data["step"] == 1)
        step2_start = next(i for i, e in enumerate(events) if e.type == STEP_START and e.data["step"] == 2)
        assert step1_end < off < step2_start
    # the reviewer saw the recorded plan verbatim; the model was asked twice, the second time
    # without the plan section (the header changed)
    assert review.requests[0].questions[0].detail == recorded_plan
    assert SECTION in model.requests[0].system and SECTION not in model.requests[1].system
    reasons = [e.data["reason"] for e in ours if e.type == "request/header"]
    assert reasons == ["initial", "change"]
