"""pydantic-ai + fsm_stage, offline (a FunctionModel plays the LLM; no API key).

Plan mode → exit_plan_mode (approved) → goto_stage implement (its review waits while the
process restarts) → edit_file → goto_stage verify (approved) → done, on a JsonlLog. Reviews
are pydantic-ai deferred tool approvals. Run: ``python examples/pydantic_ai_feature_work.py
[LOG]``; it re-executes itself with ``--resume LOG`` to continue from the log.
"""

import json
import os
import subprocess
import sys
import tempfile

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from fsm_stage.integrations.pydantic_ai import StageCapability, StageHost
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog


def next_move(host: StageHost) -> tuple[str, dict[str, str]] | None:
    """The scripted LLM: what a model would do in each stage (None: the final answer)."""
    if host.plan is not None and host.plan.get(host.agent).active:
        return "exit_plan_mode", {"plan": "# Plan\n1. add --greeting\n2. test it"}
    edited = any(e.type == "tool/call" and e.data["name"] == "edit_file" for e in host.session.events)
    return {"explore": ("goto_stage", {"stage": "implement"}),
            "implement": ("goto_stage", {"stage": "verify"}) if edited
            else ("edit_file", {"path": "cli.py", "text": "--greeting"})}.get(host.current_stage() or "")


def build_agent(host: StageHost) -> tuple[Agent[None, str | DeferredToolRequests], StageCapability]:
    """The framework's own agent definition, with fsm_stage's capability."""
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        move = next_move(host)
        if move is None:
            return ModelResponse(parts=[TextPart("Verified: the tests pass.")])
        call_id = f"call_{len(host.session.events)}"
        return ModelResponse(parts=[ToolCallPart(move[0], json.dumps(move[1]), call_id)])

    capability = StageCapability(host)
    agent = Agent(FunctionModel(model), capabilities=[capability], output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def edit_file(path: str, text: str) -> str:
        """Write ``text`` to ``path`` (pretend)."""
        return f"wrote {len(text)} characters to {path}"

    return agent, capability


def main(log_path: str, resume: bool) -> None:
    with JsonlLog(log_path, header=SessionHeader("feature", cwd=os.path.dirname(log_path))) as log:
        host = StageHost.open(log, guards={"tests_written": True})
        agent, capability = build_agent(host)
        if not resume:
            assert host.plan is not None
            host.plan.set(host.agent, True)  # start in plan mode
            agent.run_sync("Add a --greeting flag.")
        while (requests := capability.pending()) is not None:  # the log says what waits
            if not resume and requests.approvals[0].tool_name == "goto_stage":
                print("review pending: restarting the process")
                break
            results = capability.results(requests, approve=True)  # a human approves
            if os.environ.get("FSM_EXAMPLE_KILL") == "after-approval" and resume:
                os._exit(3)  # the kill test: die between the approval and the next step
            agent.run_sync(message_history=capability.message_history(), deferred_tool_results=results)
        print("stage:", host.current_stage())
    if not resume:
        sys.exit(subprocess.run([sys.executable, __file__, "--resume", log_path]).returncode)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    main(args[0] if args else os.path.join(tempfile.mkdtemp(), "session.jsonl"), "--resume" in sys.argv)
