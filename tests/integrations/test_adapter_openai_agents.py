"""The OpenAI Agents SDK adapter (``StagedModel``, ``stage_tools``, ``host_tools``) driven by a
fake ``agents.Model``: what the model receives at every request, host tools through
``_run_host_tool``, reviews as ``RunState`` interruptions (approve / reject), a restart."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from adapter_rig import HOST_SECTION, assert_cache_safe, edit_call, edit_file_result, make_host
from sdk_check import sdk

sdk("agents")
from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from oa_fake import FakeModel  # noqa: E402

from fsm_stage.integrations._host import StageHost  # noqa: E402
from fsm_stage.integrations.openai_agents import (  # noqa: E402
    StagedModel,
    approve,
    host_tools,
    reject,
    stage_tools,
)

set_tracing_disabled(True)


@function_tool
def edit_file(path: str, text: str) -> str:
    """Write a file."""
    return edit_file_result(path, text)


def build(host: StageHost) -> tuple[Agent[Any], FakeModel]:
    fake = FakeModel(host)
    return Agent(name="dev", model=StagedModel(fake, host),
                 tools=[*stage_tools(host), *host_tools(host, [edit_file])]), fake


def test_prompt_and_tools_stay_byte_identical_across_light_stage_switches() -> None:
    host = make_host(approve_all=True)
    agent, fake = build(host)
    result = asyncio.run(Runner.run(agent, "Add a --greeting flag."))
    assert result.final_output == "Verified." and not result.interruptions
    assert_cache_safe(host, [r[0] for r in fake.requests], [r[1] for r in fake.requests])
    spec = next(s for s in host.runtime.tool_specs if s.name == "goto_stage")
    goto = next(t for t in fake.requests[0][1] if t[0] == "goto_stage")
    assert json.loads(goto[2]) == spec.parameters
    assert any("Current stage: implement" in json.dumps(item) for item in fake.requests[2][2])
    assert host.recorded_result(edit_call(host)) == edit_file_result("cli.py", "--greeting")


def test_reviews_are_run_state_interruptions_and_survive_a_restart() -> None:
    async def run() -> None:
        host = make_host()
        agent, _fake = build(host)
        result = await Runner.run(agent, "Add a --greeting flag.")
        assert [i.raw_item.name for i in result.interruptions] == ["exit_plan_mode"]
        state = result.to_state()
        approve(host, state, result.interruptions[0])
        result = await Runner.run(agent, state)
        assert [i.raw_item.name for i in result.interruptions] == ["goto_stage"]
        # a new process: a new host over the same log, the answer through the log only
        host2 = StageHost.open(host.session.log, guards={"tests_written": True})
        agent2, _fake2 = build(host2)
        [(call, review_id, answered)] = host2.pending_reviews()
        assert call.name == "goto_stage" and not answered
        host2.answer(review_id, True)
        result = await Runner.run(agent2, "")
        state = result.to_state()
        approve(host2, state, result.interruptions[0])  # implement -> verify
        result = await Runner.run(agent2, state)
        assert result.final_output == "Verified." and host2.current_stage() == "verify"
        types = [e.type for e in host2.session.events]
        assert types.count("fsm/review/answer") == 3 and types.count("fsm/review/redeemed") == 3

    asyncio.run(run())


def test_a_rejection_is_a_kept_review_with_feedback() -> None:
    async def run() -> StageHost:
        host = make_host()
        agent, _fake = build(host)
        result = await Runner.run(agent, "Add a --greeting flag.")
        state = result.to_state()
        reject(host, state, result.interruptions[0], "write the tests first")
        try:
            await Runner.run(agent, state, max_turns=2)  # the fake keeps asking to leave plan mode
        except Exception as exc:
            assert type(exc).__name__ == "MaxTurnsExceeded"
        return host

    host = asyncio.run(run())
    answers = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert answers[0]["outcome"] == "keep" and answers[0]["feedback"] == "write the tests first"
    assert host.plan is not None and host.plan.get(host.agent).active
    first = next(e.data["callId"] for e in host.session.events if e.type == "tool/call")
    assert "write the tests first" in (host.recorded_result(first) or "")


def test_a_rejection_made_on_run_state_directly_is_recorded_as_keep() -> None:
    async def run() -> StageHost:
        host = make_host()
        agent, _fake = build(host)
        result = await Runner.run(agent, "Add a --greeting flag.")
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="not yet")
        try:
            await Runner.run(agent, state, max_turns=2)
        except Exception as exc:
            assert type(exc).__name__ == "MaxTurnsExceeded"
        return host

    host = asyncio.run(run())
    answers = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert answers[0]["outcome"] == "keep" and answers[0]["feedback"] == "not yet"
    assert answers[0]["by"] == "openai-agents"  # who denied it: the SDK's RunState


def _events(host: StageHost) -> list[tuple[str, Any]]:
    return [(e.type, e.data) for e in host.session.events]


def test_a_retry_from_the_same_run_state_returns_the_recorded_result() -> None:
    from agents import RunState

    async def run() -> None:
        host = make_host()
        agent, _fake = build(host)
        result = await Runner.run(agent, "Add a --greeting flag.")
        state = result.to_state()
        approve(host, state, result.interruptions[0])
        saved = state.to_string()  # the SDK's HITL pattern: persist the approved state
        first = await Runner.run(agent, state)
        assert [i.raw_item.name for i in first.interruptions] == ["goto_stage"]
        logged = _events(host)
        # the host retries the same approved state: exit_plan_mode is settled already
        again = await Runner.run(agent, await RunState.from_string(agent, saved))
        assert [i.raw_item.call_id for i in again.interruptions] == [first.interruptions[0].raw_item.call_id]
        assert _events(host) == logged  # nothing ran twice, nothing was added
        state = again.to_state()
        approve(host, state, again.interruptions[0])
        result = await Runner.run(agent, state)
        while result.interruptions:
            state = result.to_state()
            approve(host, state, result.interruptions[0])
            result = await Runner.run(agent, state)
        assert result.final_output == "Verified." and host.current_stage() == "verify"

    asyncio.run(run())


def test_the_agents_own_instructions_reach_the_model_in_front_of_fsm_stages() -> None:
    host = make_host(approve_all=True)
    fake = FakeModel(host)
    agent = Agent(name="dev", instructions="Answer in French.", model=StagedModel(fake, host),
                  tools=[*stage_tools(host), *host_tools(host, [edit_file])])
    assert asyncio.run(Runner.run(agent, "Add a --greeting flag.")).final_output == "Verified."
    systems = [r[0] or "" for r in fake.requests]
    assert len(systems) == 5 and all(s.startswith("Answer in French.\n\n") for s in systems)
    assert all(HOST_SECTION in s for s in systems) and "plan mode" in systems[0]


def test_resume_from_a_run_state_saved_before_a_later_crash(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from crash_rig import CRASH_EXIT, crashed_in_implement, resume_saved_state, user_texts_after_repair
    log = tmp_path / "s.jsonl"
    rig = Path(__file__).with_name("crash_rig.py")
    died = subprocess.run([sys.executable, str(rig), "openai_agents", str(log)],
                          capture_output=True, text=True)
    assert died.returncode == CRASH_EXIT, died.stderr
    host, output = asyncio.run(resume_saved_state(log))
    assert output == "Verified." and host.current_stage() == "verify"
    assert crashed_in_implement(host) and user_texts_after_repair(host) == []
    assert sum(t == "tool/call" and d["name"] == "exit_plan_mode" for t, d in _events(host)) == 1
