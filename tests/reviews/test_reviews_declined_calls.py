"""A call a human declined stays declined: when the policy in force later lets its tool run
(plan mode turned off, a graph that allows the tool), that call is still refused, with the
human's answer as the reason; a new call of the tool runs by the policy in force."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tool_rig import GRAPH, ToolRig, runs

from fsm_stage import ToolCall, open_session
from fsm_stage.config import load_config_text
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import SuspendingReviewChannel, answer_review, review_state
from fsm_stage.runtime import user_message

PLAN_ONLY = GRAPH.replace("    tools:\n      ask: [apply_patch]\n", "")  # plan mode's rule only
CALL = ToolCall("h1", "apply_patch", '{"p": "one"}')


def _declined_then_plan_off(tmp_path: Path, outcome: str) -> tuple[Any, str]:
    """A host call plan mode's ``ask`` rule suspended, answered ``outcome`` with feedback, then
    ``/plan off`` (no rule asks before the tool any more)."""
    assert "ask: [apply_patch]" in PLAN_ONLY
    log = JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(f"s-{tmp_path.name}", cwd=str(tmp_path)))
    host = open_session(load_config_text(PLAN_ONLY), log, review=SuspendingReviewChannel())
    assert host.plan is not None
    host.plan.set(host.agent, True)
    host.agent.steer(user_message("patch it"))
    host.driver.start_turn()
    host.driver.begin_step()
    host.driver.record_reply("", [CALL])
    with pytest.raises(ReviewPending) as pending:
        asyncio.run(host.driver.authorize(CALL))
    rid = pending.value.review_id
    answer_review(host.session, rid, outcome, feedback="not on main")
    asyncio.run(host.runtime.run_command(host.agent, "/plan off"))
    return host, rid


@pytest.mark.parametrize(("outcome", "said"), [("keep", "did not approve this call"),
                                               ("dismiss", "dismissed this call's review")])
def test_a_host_call_a_human_declined_is_refused_after_the_policy_allows_its_tool(
        tmp_path: Path, outcome: str, said: str) -> None:
    host, rid = _declined_then_plan_off(tmp_path, outcome)
    refused = asyncio.run(host.driver.authorize(CALL))
    assert refused is not None and refused.is_error
    assert refused.text == (f'Error: Tool "apply_patch" was not run: the reviewer {said} (not on main); '
                            "nothing ran.")
    events = host.session.events
    results = [e for e in events if e.type == "tool/result"]
    refusals = [e for e in events if e.type == "fsm/tool/refused"]
    assert len(results) == 1 and results[0].data["message"]["content"][0]["isError"] is True
    assert len(refusals) == 1 and refusals[0].data["callId"] == "h1"
    assert review_state(host.session).answered[rid].outcome == outcome
    assert review_state(host.session).open == ()
    # a new call of the tool is the policy's now, which allows it
    again = ToolCall("h2", "apply_patch", '{"p": "one"}')
    host.driver.end_step()
    host.driver.begin_step()
    host.driver.record_reply("", [again])
    assert asyncio.run(host.driver.authorize(again)) is None


def test_a_host_call_a_human_declined_in_another_process_is_refused_after_a_restart(tmp_path: Path) -> None:
    """The worker that asked is gone; a new one opens the log without plan mode."""
    host, _rid = _declined_then_plan_off(tmp_path, "keep")
    host.session.log.close()
    reopened = open_session(load_config_text(PLAN_ONLY), JsonlLog(tmp_path / "s.jsonl"),
                            review=SuspendingReviewChannel(), plan_mode=False)
    refused = asyncio.run(reopened.driver.authorize(CALL))
    assert refused is not None and "the reviewer did not approve this call (not on main)" in refused.text


def test_an_approved_host_call_still_runs_once_after_the_policy_allows_its_tool(tmp_path: Path) -> None:
    host, _rid = _declined_then_plan_off(tmp_path, "approve")
    assert asyncio.run(host.driver.authorize(CALL)) is None
    assert review_state(host.session).open == ()


VERIFY = "  - name: verify\n    instruction: Verify.\n    tools:\n      {}: [apply_patch]\n"
RELAXED = GRAPH.replace(VERIFY.format("ask"), VERIFY.format("allow"))


@pytest.mark.parametrize("outcome", ["keep", "dismiss"])
def test_a_runtime_tool_call_a_human_declined_is_not_run_under_a_graph_that_allows_it(
        tmp_path: Path, outcome: str) -> None:
    assert RELAXED != GRAPH
    log = MemoryLog(SessionHeader(id="tool", cwd=str(tmp_path)))
    rig = ToolRig(log, SuspendingReviewChannel(), tmp_path / "runs")
    rig.to_verify()
    call = rig.call()
    with pytest.raises(ReviewPending) as pending:
        asyncio.run(rig.runtime.call_tool(rig.agent, call))
    answer_review(rig.session, pending.value.review_id, outcome)
    relaxed = ToolRig(log, SuspendingReviewChannel(), tmp_path / "runs", graph=RELAXED)
    result = relaxed.resume(call)
    said = "did not approve this call" if outcome == "keep" else "dismissed this call's review"
    assert result.is_error and f"the reviewer {said}; nothing ran" in result.text
    assert runs(tmp_path / "runs") == 0
    fresh = relaxed.resume(relaxed.call(call_id="c_other"))  # a new call runs by the graph in force
    assert not fresh.is_error and runs(tmp_path / "runs") == 1
