"""A review whose tool call was closed without running (cancel, ``close_turn``, crash repair)
is void: its approval is never used later and it never blocks the next review of its kind."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from two_stages import two_stages

from fsm_stage import MemoryLog, SessionHeader, ToolCall, ToolOutput, ToolSpec, open_session
from fsm_stage.config import load_config_text
from fsm_stage.errors import ReviewPending
from fsm_stage.reviews import SuspendingReviewChannel, answer_review, review_state
from fsm_stage.runtime import user_message

POLICY = """
name: pol
section: Call goto_stage when done.
initial: verify
stages:
  - name: verify
    instruction: Verify.
    tools:
      ask: [apply_patch]
    targets: [done]
  - name: done
    instruction: Done.
"""


class _Patch:
    spec = ToolSpec("apply_patch", "Patch.", {"type": "object", "properties": {"p": {"type": "string"}}})

    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        self.ran.append(dict(args))
        return ToolOutput({"ok": True}, "patched")


def _host(graph: str, tmp_path: Path) -> Any:
    return open_session(load_config_text(graph), MemoryLog(SessionHeader("s", cwd=str(tmp_path))),
                        review=SuspendingReviewChannel())


async def _suspend(host: Any, call: ToolCall) -> str:
    driver = host.driver
    host.agent.steer(user_message("go"))
    driver.start_turn()
    driver.begin_step()
    driver.record_reply("", [call])
    with pytest.raises(ReviewPending) as pending:
        await driver.run_tool(call)
    return pending.value.review_id


@pytest.mark.parametrize("close", ["cancel", "close_turn"])
def test_an_approved_tool_review_whose_call_was_closed_is_void(tmp_path: Path, close: str) -> None:
    host = _host(POLICY, tmp_path)
    patch = _Patch()
    host.runtime.add_tool(patch)

    async def scenario() -> None:
        rid = await _suspend(host, ToolCall("c1", "apply_patch", '{"p": "one"}'))
        answer_review(host.session, rid, "approve")
        if close == "cancel":
            await host.driver.cancel()
        else:
            host.driver.close_turn("error", message="boom")
        state = review_state(host.session)
        assert state.redeemed[rid].applied is False and state.redeemed[rid].reason == "call-closed"
        assert state.pending("tool") is None
        # the next ask call is asked about, not refused as "already approved"
        rid2 = await _suspend(host, ToolCall("c2", "apply_patch", '{"p": "two"}'))
        assert rid2 != rid
        answer_review(host.session, rid2, "approve")
        await host.driver.resume()

    asyncio.run(scenario())
    assert patch.ran == [{"p": "two"}]


def test_an_approved_stage_switch_whose_call_was_cancelled_is_never_applied(tmp_path: Path) -> None:
    host = _host(two_stages(), tmp_path)

    async def scenario() -> None:
        call = ToolCall("c1", "goto_stage", '{"stage": "implement", "handoff": "## Next\\n- x"}')
        rid = await _suspend(host, call)
        answer_review(host.session, rid, "approve")
        await host.driver.cancel()  # the model is told the call was aborted
        host.agent.steer(user_message("again"))
        host.driver.start_turn()
        host.driver.begin_step()

    asyncio.run(scenario())
    assert host.current_stage() == "explore"


async def _authorize_and_suspend(host: Any) -> str:
    driver = host.driver
    host.agent.steer(user_message("go"))
    driver.start_turn()
    driver.begin_step()
    call = ToolCall("c1", "apply_patch", '{"p": "one"}')
    driver.record_reply("", [call])
    with pytest.raises(ReviewPending) as pending:
        await driver.authorize(call)
    return pending.value.review_id


def test_a_review_of_a_call_crash_repair_closed_is_void(tmp_path: Path) -> None:
    """A log written before host tool calls were logged with their review request holds the
    request alone (no ``tool/call``); after a crash the repaired call ("did not start") leaves no
    open review behind to block the next one."""
    host = _host(POLICY, tmp_path)
    rid = asyncio.run(_authorize_and_suspend(host))
    earlier = MemoryLog(SessionHeader("s-earlier", cwd=str(tmp_path)))
    for event in host.session.events:
        if event.type != "tool/call":
            earlier.append(event.type, event.data, surface_op=event.surface_op, ignorable=event.ignorable)
    again = open_session(load_config_text(POLICY), earlier, review=SuspendingReviewChannel())
    state = review_state(again.session)
    assert rid in state.redeemed and state.redeemed[rid].reason == "call-closed"
    assert state.open == ()
