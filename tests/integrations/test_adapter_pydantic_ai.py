"""The pydantic-ai adapter (``StageCapability``) driven by pydantic-ai's own ``FunctionModel``:
what the model receives at every request (instructions, tools, messages), host tools through
``_run_host_tool``, reviews as deferred tool approvals, and a restart from the log."""

from __future__ import annotations

import json
from typing import Any

import pytest
from adapter_rig import assert_cache_safe, edit_call, edit_file_result, make_host, next_move
from sdk_check import sdk

sdk("pydantic_ai")
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from fsm_stage.integrations._host import StageHost  # noqa: E402
from fsm_stage.integrations.pydantic_ai import StageCapability  # noqa: E402


class Recorder:
    """A FunctionModel body answering with ``next_move`` and recording every request."""

    def __init__(self, host: StageHost) -> None:
        self.host = host
        self.requests: list[tuple[str | None, list[Any], list[str]]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = [(t.name, t.description, json.dumps(t.parameters_json_schema)) for t in info.function_tools]
        texts = [str(getattr(p, "content", "")) for m in messages for p in m.parts]
        self.requests.append((info.instructions, tools, texts))
        move = next_move(self.host)
        if move is None:
            return ModelResponse(parts=[TextPart("Verified.")])
        call_id = f"call_{len(self.host.session.events)}"
        return ModelResponse(parts=[ToolCallPart(move[0], json.dumps(move[1]), call_id)])


def build(host: StageHost) -> tuple[Agent[None, Any], StageCapability, Recorder]:
    recorder = Recorder(host)
    capability = StageCapability(host)
    agent: Agent[None, Any] = Agent(FunctionModel(recorder), capabilities=[capability],
                                    output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def edit_file(path: str, text: str) -> str:
        """Write a file."""
        return edit_file_result(path, text)

    return agent, capability, recorder


def test_prompt_and_tools_stay_byte_identical_across_light_stage_switches() -> None:
    host = make_host(approve_all=True)
    agent, _cap, recorder = build(host)
    assert agent.run_sync("Add a --greeting flag.").output == "Verified."
    systems = [r[0] for r in recorder.requests]
    assert_cache_safe(host, systems, [r[1] for r in recorder.requests])
    names = [t[0] for t in recorder.requests[0][1]]
    assert {"goto_stage", "exit_plan_mode", "edit_file"} == set(names)
    goto = next(t for t in recorder.requests[0][1] if t[0] == "goto_stage")
    spec = next(s for s in host.runtime.tool_specs if s.name == "goto_stage")
    assert json.loads(goto[2]) == spec.parameters and goto[1] == spec.description
    # the stage guidance reaches the model as messages from the log
    assert any("Current stage: implement" in t for t in recorder.requests[2][2])
    assert host.recorded_result(edit_call(host)) == edit_file_result("cli.py", "--greeting")


def test_a_host_tool_error_is_recorded_and_the_call_id_is_the_framework_one() -> None:
    host = make_host(approve_all=True)
    recorder = Recorder(host)
    agent: Agent[None, Any] = Agent(FunctionModel(recorder), capabilities=[StageCapability(host)],
                                    output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def edit_file(path: str, text: str) -> str:
        """Write a file."""
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        agent.run_sync("Add a --greeting flag.")
    assert host.recorded_result(edit_call(host)) == "Error: disk full"


def test_reviews_are_deferred_approvals_and_survive_a_restart() -> None:
    host = make_host()
    agent, cap, _recorder = build(host)
    out = agent.run_sync("Add a --greeting flag.").output
    assert isinstance(out, DeferredToolRequests) and out.approvals[0].tool_name == "exit_plan_mode"
    assert out.metadata[out.approvals[0].tool_call_id]["kind"] == "plan"
    out = agent.run_sync(message_history=cap.message_history(), deferred_tool_results=cap.results(out)).output
    assert isinstance(out, DeferredToolRequests) and out.approvals[0].tool_name == "goto_stage"
    # a new process: a new host over the same log sees the pending approval
    host2 = StageHost.open(host.session.log, guards={"tests_written": True})
    agent2, cap2, _recorder2 = build(host2)
    pending = cap2.pending()
    assert pending is not None
    assert [p.tool_call_id for p in pending.approvals] == [out.approvals[0].tool_call_id]
    (part,) = pending.approvals  # as the run had them: the same metadata, the arguments as an object
    assert pending.metadata[part.tool_call_id]["kind"] == "stage"
    assert part.args_as_dict() == out.approvals[0].args_as_dict() and isinstance(part.args, dict)
    results = cap2.results(pending)
    while isinstance(out := agent2.run_sync(message_history=cap2.message_history(),
                                            deferred_tool_results=results).output, DeferredToolRequests):
        results = cap2.results(out)
    assert out == "Verified." and host2.current_stage() == "verify"
    types = [e.type for e in host2.session.events]
    assert types.count("fsm/review/answer") == 3 and types.count("fsm/review/redeemed") == 3


def test_a_kept_review_tells_the_model_and_the_stage_stays() -> None:
    host = make_host()
    agent, cap, _recorder = build(host)
    out = agent.run_sync("Add a --greeting flag.").output
    assert isinstance(out, DeferredToolRequests)
    agent.run_sync(message_history=cap.message_history(),
                   deferred_tool_results=cap.results(out, approve=False, feedback="add a test first"))
    answers = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert answers[0]["outcome"] == "keep" and answers[0]["feedback"] == "add a test first"
    assert host.plan is not None and host.plan.get(host.agent).active


def test_a_denial_given_to_pydantic_ai_directly_is_recorded_as_keep() -> None:
    host = make_host()
    agent, cap, _recorder = build(host)
    out = agent.run_sync("Add a --greeting flag.").output
    assert isinstance(out, DeferredToolRequests)
    call_id = out.approvals[0].tool_call_id
    agent.run_sync(message_history=cap.message_history(),
                   deferred_tool_results=DeferredToolResults(approvals={call_id: ToolDenied("no")}))
    answers = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert answers and answers[0]["outcome"] == "keep" and answers[0]["by"] == "pydantic-ai"


def test_importing_fsm_stage_and_its_integrations_loads_no_framework() -> None:
    import subprocess
    import sys
    code = ("import sys, fsm_stage, fsm_stage.integrations, fsm_stage.integrations._host; "
            "names = ('pydantic_ai', 'langgraph', 'agents', 'langchain_core'); "
            "print(sorted(m for m in names if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _events(host: StageHost) -> list[tuple[str, Any]]:
    return [(e.type, e.data) for e in host.session.events]


def test_a_retry_with_the_same_deferred_results_returns_the_recorded_result() -> None:
    host = make_host()
    agent, cap, _recorder = build(host)
    out = agent.run_sync("Add a --greeting flag.").output
    assert isinstance(out, DeferredToolRequests)
    history, results = cap.message_history(), cap.results(out)
    first = agent.run_sync(message_history=history, deferred_tool_results=results).output
    assert isinstance(first, DeferredToolRequests) and first.approvals[0].tool_name == "goto_stage"
    logged = _events(host)
    # the framework retries the same approval run: exit_plan_mode is settled, the log runs ahead
    again = agent.run_sync(message_history=history, deferred_tool_results=results)
    assert isinstance(again.output, DeferredToolRequests)
    assert [p.tool_call_id for p in again.output.approvals] == [first.approvals[0].tool_call_id]
    plan_result = next(p for m in again.new_messages() for p in m.parts
                       if getattr(p, "tool_name", "") == "exit_plan_mode" and p.part_kind == "tool-return")
    assert plan_result.content == host.recorded_result(out.approvals[0].tool_call_id)
    assert _events(host) == logged  # nothing ran twice, nothing was added
    out = again.output
    while isinstance(out := agent.run_sync(message_history=cap.message_history(),
                                           deferred_tool_results=cap.results(out)).output,
                     DeferredToolRequests):
        pass
    assert out == "Verified." and host.current_stage() == "verify"


def test_pydantic_ais_own_approval_is_recorded_as_approve() -> None:
    host = make_host()
    agent, cap, _recorder = build(host)
    out = agent.run_sync("Add a --greeting flag.").output
    for _ in range(4):  # a naive loop: approve whatever pydantic-ai asks, the framework's way
        assert isinstance(out, DeferredToolRequests)
        out = agent.run_sync(message_history=cap.message_history(), deferred_tool_results=DeferredToolResults(
            approvals={p.tool_call_id: True for p in out.approvals})).output
        if out == "Verified.":
            break
    assert out == "Verified." and host.current_stage() == "verify"
    answers = [d for t, d in _events(host) if t == "fsm/review/answer"]
    assert [a["outcome"] for a in answers] == ["approve"] * 3
    assert {a.get("by") for a in answers} == {"pydantic-ai"}


def test_a_prompt_given_while_the_turn_is_open_reaches_the_log() -> None:
    host = make_host()
    agent, cap, _recorder = build(host)
    out = agent.run_sync("Add a --greeting flag.").output
    assert isinstance(out, DeferredToolRequests)
    agent.run_sync("Also keep the old flag.", message_history=cap.message_history(),
                   deferred_tool_results=cap.results(out))
    users = [d for t, d in _events(host) if t == "user/message"
             and d["source"]["kind"] == "user"]
    assert [u["content"][0]["text"] for u in users] == ["Add a --greeting flag.", "Also keep the old flag."]


def test_continue_after_a_crash_mid_turn(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from crash_rig import CRASH_EXIT, continue_after_crash, crashed_in_implement, user_texts_after_repair
    log = tmp_path / "s.jsonl"
    rig = Path(__file__).with_name("crash_rig.py")
    died = subprocess.run([sys.executable, str(rig), "pydantic_ai", str(log)], capture_output=True, text=True)
    assert died.returncode == CRASH_EXIT, died.stderr
    host, output = continue_after_crash("pydantic_ai", log)
    assert output == "Verified." and host.current_stage() == "verify"
    assert user_texts_after_repair(host) == []  # no notice (nor old prompt) logged as typed by the user
    assert crashed_in_implement(host)
    assert sum(t == "tool/call" and d["name"] == "edit_file" for t, d in _events(host)) == 1


TEAM_GRAPH = """
name: team
section: Call goto_stage when done.
initial: explore
review: {approvers: [alice], deadline: 1s, on_deadline: keep}
stages:
  - name: explore
    instruction: Explore.
    targets: [implement]
  - name: implement
    instruction: Implement.
"""


def _team_run() -> tuple[StageHost, Agent[None, Any], StageCapability, DeferredToolRequests]:
    """A run of ``TEAM_GRAPH`` waiting on its stage review (only alice may answer, for 1 s)."""
    import tempfile

    from fsm_stage.config import load_config_text
    from fsm_stage.log.events import MemoryLog, SessionHeader

    host = StageHost.open(MemoryLog(SessionHeader("team", cwd=tempfile.mkdtemp())),
                          graph=load_config_text(TEAM_GRAPH), plan_mode=False)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if host.current_stage() == "explore" and not any(
                e.type == "fsm/review/answer" for e in host.session.events):
            goto = json.dumps({"stage": "implement", "handoff": "# Handoff\nDone exploring."})
            return ModelResponse(parts=[ToolCallPart("goto_stage", goto, "call_go")])
        return ModelResponse(parts=[TextPart(f"in {host.current_stage()}")])

    cap = StageCapability(host)
    agent = Agent(FunctionModel(answer), capabilities=[cap], output_type=[str, DeferredToolRequests])
    out = agent.run_sync("explore").output
    assert isinstance(out, DeferredToolRequests)
    return host, agent, cap, out


def test_results_answers_as_a_named_reviewer_and_the_rules_decide() -> None:
    """``results(reviewer=)`` answers reviews whose rules name approvers (without a name they
    always refused); a reviewer the rules do not name is refused, nothing written."""
    from fsm_stage.errors import ReviewRefusedError

    host, agent, cap, out = _team_run()
    n = len(host.session.events)
    for who in (None, "bob"):
        with pytest.raises(ReviewRefusedError):
            cap.results(out, reviewer=who)
        assert len(host.session.events) == n
    done = agent.run_sync(message_history=cap.message_history(),
                          deferred_tool_results=cap.results(out, reviewer="alice")).output
    assert done == "in implement" and host.current_stage() == "implement"


def test_results_after_the_deadline_resumes_with_the_deadlines_answer() -> None:
    """Past the deadline ``results()`` wrote the deadline's answer and then raised a
    ``ReviewRefusedError`` traceback (a second run went on): now the call resumes with that
    answer and the model reads that nobody decided (helper-83)."""
    import time

    host, agent, cap, out = _team_run()
    time.sleep(1.2)
    done = agent.run_sync(message_history=cap.message_history(),
                          deferred_tool_results=cap.results(out, reviewer="alice")).output
    assert done == "in explore" and host.current_stage() == "explore"
    (answer,) = [e.data for e in host.session.events if e.type == "fsm/review/answer"]
    assert answer["by"] == "deadline" and answer["outcome"] == "keep"
    told = [e for e in host.session.events if e.type == "tool/result"]
    assert told and "deadline" in json.dumps(told[-1].data)


def test_results_of_nothing_pending_is_one_line() -> None:
    from fsm_stage.errors import UserError

    cap = StageCapability(make_host())
    assert cap.pending() is None
    with pytest.raises(UserError, match=r"^results: requests must be .*got NoneType$"):
        cap.results(cap.pending())  # type: ignore[arg-type]
