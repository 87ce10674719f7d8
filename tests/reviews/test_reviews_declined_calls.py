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


def _suspended_in_plan_mode(tmp_path: Path, *, runtime_tool: bool = False) -> tuple[Any, str]:
    """A session in plan mode whose call ``CALL`` plan mode's ``ask`` rule suspended: a host
    tool's (``authorize``), or with ``runtime_tool`` one registered on the runtime (``run_tool``;
    its runs counted in ``tmp_path / "runs"``). Returns the host and the review id."""
    from tool_rig import CountingTool

    assert "ask: [apply_patch]" in PLAN_ONLY
    log = JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(f"s-{tmp_path.name}", cwd=str(tmp_path)))
    host = open_session(load_config_text(PLAN_ONLY), log, review=SuspendingReviewChannel())
    if runtime_tool:
        host.runtime.add_tool(CountingTool(tmp_path / "runs"))
    assert host.plan is not None
    host.plan.set(host.agent, True)
    host.agent.steer(user_message("patch it"))
    host.driver.start_turn()
    host.driver.begin_step()
    host.driver.record_reply("", [CALL])
    with pytest.raises(ReviewPending) as pending:
        asyncio.run(host.driver.run_tool(CALL) if runtime_tool else host.driver.authorize(CALL))
    return host, pending.value.review_id


def _declined_then_plan_off(tmp_path: Path, outcome: str) -> tuple[Any, str]:
    """A host call plan mode's ``ask`` rule suspended, answered ``outcome`` with feedback, then
    ``/plan off`` (no rule asks before the tool any more)."""
    host, rid = _suspended_in_plan_mode(tmp_path)
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
    for _ in range(2):  # logged refusals: the call settled, still in its step, is still refused
        logged = asyncio.run(relaxed.runtime.call_tool(relaxed.agent, call))
        assert logged.is_error and f"the reviewer {said}" in logged.text
    assert runs(tmp_path / "runs") == 0
    fresh = relaxed.resume(relaxed.call(call_id="c_other"))  # a new call runs by the graph in force
    assert not fresh.is_error and runs(tmp_path / "runs") == 1


def _approved_then(tmp_path: Path, relax: str) -> tuple[Any, Path, str]:
    """A runtime tool's call (``run_tool``) plan mode's ``ask`` rule suspended, approved, then
    resumed by ``driver.resume()`` after ``relax``: ``/plan off`` (the tool is allowed) or a graph
    that denies the tool (``strict``)."""
    from tool_rig import CountingTool

    graph = PLAN_ONLY if relax == "plan off" else PLAN_ONLY.replace(
        "  - name: explore\n    instruction: Explore.\n", "  - name: explore\n    instruction: Explore.\n"
        "    tools:\n      allow: [read_file]\n", 1)
    host, rid = _suspended_in_plan_mode(tmp_path, runtime_tool=True)
    answer_review(host.session, rid, "approve")
    if relax == "plan off":
        asyncio.run(host.runtime.run_command(host.agent, "/plan off"))
    else:
        host.session.log.close()
        host = open_session(load_config_text(graph), JsonlLog(tmp_path / "s.jsonl"),
                            review=SuspendingReviewChannel(), plan_mode=False, accept_graph_change=True)
        host.runtime.add_tool(CountingTool(tmp_path / "runs"))
    asyncio.run(host.driver.resume())
    return host, tmp_path / "runs", rid


@pytest.mark.parametrize(("relax", "ran"), [("plan off", 1), ("strict", 0)])
def test_an_approval_its_call_did_not_use_is_closed_with_the_calls_result(
        tmp_path: Path, relax: str, ran: int) -> None:
    """The call ran by a relaxed policy (or was refused by a stricter one) without redeeming its
    approval: the result closes the review, so the approval neither blocks the next tool review
    nor serves a later call that reuses the id."""
    host, counter, rid = _approved_then(tmp_path, relax)
    assert runs(counter) == ran
    refusals = [e.data["callId"] for e in host.session.events if e.type == "fsm/tool/refused"]
    assert refusals == ([] if ran else ["h1"])  # resume() logs a refusal as run_tool does
    state = review_state(host.session)
    assert state.redeemed[rid].reason == "call-closed" and state.approved == ()
    host.driver.end_step()
    host.driver.end_turn()
    if host.plan is not None:
        host.plan.set(host.agent, True)
    host.agent.steer(user_message("again"))
    host.driver.start_turn()
    host.driver.begin_step()
    again = ToolCall("h1", "apply_patch", '{"p": "one"}')  # a provider numbering call ids per turn
    host.driver.record_reply("", [again])
    if relax == "plan off":
        with pytest.raises(ReviewPending):  # asked afresh, not run on the old approval
            asyncio.run(host.driver.run_tool(again))
    else:
        assert asyncio.run(host.driver.run_tool(again)).is_error
    assert runs(counter) == ran
