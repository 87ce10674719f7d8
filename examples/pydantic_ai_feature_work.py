"""pydantic-ai + fsm_stage, offline (a FunctionModel plays the LLM; no API key).

Plan mode → exit_plan_mode (approved) → goto_stage implement, a *full* switch: the model's
first call is refused with the handoff template, it calls again with a handoff document, and
that review waits while the process restarts → edit_file → goto_stage verify (full, approved)
→ done, on a JsonlLog. The model decides only from the messages it is sent
(``scripted_llm.next_move``). Reviews are pydantic-ai deferred tool approvals. Run:
``python examples/pydantic_ai_feature_work.py [LOG]``; it re-executes itself with ``--resume
LOG`` to continue from the log.
"""

import json
import os
import subprocess
import sys
import tempfile
import uuid

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scripted_llm import FINAL, example_graph, next_move

from fsm_stage.integrations.pydantic_ai import StageCapability, StageHost
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog


def texts_of(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    """What the model was sent, as ``(kind, text)`` pairs (see ``scripted_llm.next_move``)."""
    out: list[tuple[str, str]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                out.append(("user", part.content))
            elif isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_name:
                out.append((f"tool:{part.tool_name}", part.model_response() if isinstance(
                    part, RetryPromptPart) else str(part.content)))
            elif isinstance(part, TextPart):
                out.append(("assistant", part.content))
    return out


def build_agent(host: StageHost) -> tuple[Agent[None, str | DeferredToolRequests], StageCapability]:
    """The framework's own agent definition, with fsm_stage's capability."""
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        move = next_move(info.instructions or "", texts_of(messages))
        if move is None:
            return ModelResponse(parts=[TextPart(FINAL)])
        call_id = f"call_{uuid.uuid4().hex[:12]}"  # a real model makes each id unique too
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
        host = StageHost.open(log, graph=example_graph(), guards={"tests_written": True})
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
        sys.stdout.flush()  # our lines before the restarted process's (stdout may be a pipe)
        sys.exit(subprocess.run([sys.executable, __file__, "--resume", log_path]).returncode)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    main(args[0] if args else os.path.join(tempfile.mkdtemp(), "session.jsonl"), "--resume" in sys.argv)
