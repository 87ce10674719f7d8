"""A stage budget that stops a framework adapter's step: ``BudgetStoppedError`` names the
budget review it waits for (``on_budget: review``), ``StageHost.answer`` answers that review
(a fresh budget or a move), and under ``on_budget: stop`` the user's own ``/stage`` moves on.
pydantic-ai's ``FunctionModel`` stands for the model (docs/stage-models.md, "Budgets")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sdk_check import sdk

from fsm_stage.config import load_config_text
from fsm_stage.errors import BudgetStoppedError, ReviewNotFoundError
from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.reviews import SuspendingReviewChannel, review_state

GRAPH = """
name: budgeted
section: Work.
stages:
  - name: work
    instruction: Work.
    budget: {turns: 1}
    on_budget: ON_BUDGET
    targets: [done]
  - name: done
    instruction: Done.
"""


def _agent(tmp_path: Path, on_budget: str) -> tuple[StageHost, object, list[str | None]]:
    """A pydantic-ai agent over a StageHost whose stage ``work`` allows one turn; the fake
    model notes the stage each request was sent in."""
    sdk("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from fsm_stage.integrations.pydantic_ai import StageCapability

    host = StageHost.open(MemoryLog(SessionHeader("s", cwd=str(tmp_path))),
                          graph=load_config_text(GRAPH.replace("ON_BUDGET", on_budget)), plan_mode=False,
                          review=SuspendingReviewChannel())
    asked: list[str | None] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append(host.current_stage())
        return ModelResponse(parts=[TextPart("ok")])

    return host, Agent(FunctionModel(answer), capabilities=[StageCapability(host)]), asked


def _stopped(agent: object, prompt: str) -> BudgetStoppedError:
    with pytest.raises(BudgetStoppedError) as err:
        agent.run_sync(prompt)  # type: ignore[attr-defined]
    assert isinstance(err.value, RuntimeError)  # what the adapters raised before the class existed
    return err.value


@pytest.mark.parametrize(("option", "stage"),
                         [("Continue with a fresh budget", "work"), ("Move to done", "done")])
def test_the_budget_review_a_stop_names_is_answered_through_the_host(tmp_path: Path, option: str,
                                                                      stage: str) -> None:
    host, agent, asked = _agent(tmp_path, "review")
    assert agent.run_sync("one").output == "ok"  # type: ignore[attr-defined]
    err = _stopped(agent, "two")
    (open_review,) = review_state(host.session).open
    assert err.review_id == open_review.id and open_review.kind == "budget"
    assert str(err).startswith("budget of stage work ran out: turns 1/1")
    host.answer(err.review_id, True, option=option)  # it was silently ignored: no suspended call
    assert not review_state(host.session).open
    assert agent.run_sync("three").output == "ok"  # type: ignore[attr-defined]
    assert asked == ["work", stage]
    host.answer(err.review_id, True, option=option)  # answered already: left as it is
    with pytest.raises(ReviewNotFoundError):
        host.answer("rv_never_asked", True)


def test_after_a_budget_stop_the_users_stage_command_moves_on(tmp_path: Path) -> None:
    host, agent, asked = _agent(tmp_path, "stop")
    agent.run_sync("one")  # type: ignore[attr-defined]
    err = _stopped(agent, "two")
    assert err.review_id is None and str(err) == "budget of stage work ran out: turns 1/1"
    _stopped(agent, "again")  # nothing changes by itself
    reply = asyncio.run(host.runtime.run_command(host.agent, "/stage done"))
    assert reply is not None and host.current_stage() == "done"
    assert agent.run_sync("three").output == "ok"  # type: ignore[attr-defined]
    assert asked == ["work", "done"]


def test_answering_a_review_closed_without_an_answer_is_left_as_it_is(tmp_path: Path) -> None:
    """A review whose call was cancelled (closed ``call-closed``) is no longer open: answering it
    again through the host, as a framework's stale resume would, changes nothing and raises
    nothing."""
    from fsm_stage.errors import ReviewPending
    from fsm_stage.runtime import ToolCall

    host = StageHost.open(MemoryLog(SessionHeader("s", cwd=str(tmp_path))),
                          graph=load_config_text(GRAPH.replace("ON_BUDGET", "stop")), plan_mode=False,
                          review=SuspendingReviewChannel())
    host.step("go")
    call = ToolCall("c1", "goto_stage", '{"stage": "done", "handoff": "# Handoff\\nDone."}')
    host.reply("", [call])
    with pytest.raises(ReviewPending) as pending:
        asyncio.run(host.driver.run_tool(call))
    rid = pending.value.review_id
    block = {"type": "tool-result", "toolCallId": "c1", "content": [], "isError": True}
    host.session.append("tool/result", {  # the call closed without running (a crash repair's shape)
        "message": {"role": "user", "source": {"kind": "tool", "callId": "c1"}, "content": [block]},
        "error": {"code": "TOOL_NOT_STARTED"}})
    assert review_state(host.session).redeemed[rid].reason == "call-closed"
    assert rid not in review_state(host.session).answered
    before = len(host.session.events)
    host.answer(rid, True)
    assert len(host.session.events) == before and host.current_stage() == "work"
