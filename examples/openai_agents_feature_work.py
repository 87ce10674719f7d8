"""OpenAI Agents SDK + fsm_stage, offline (a scripted ``Model`` plays the LLM; no API key).

Plan mode → exit_plan_mode (approved) → goto_stage implement (its review waits while the
process restarts) → edit_file → goto_stage verify (approved) → done, on a JsonlLog. Reviews
are tool approvals (``needs_approval``) surfacing as ``RunState`` interruptions. Run:
``python examples/openai_agents_feature_work.py [LOG]``; it re-executes itself with
``--resume LOG`` to continue from the log.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from fsm_stage.integrations.openai_agents import StagedModel, StageHost, approve, host_tools, stage_tools
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


class ScriptedModel(Model):
    """The framework's ``Model`` interface, answered by ``next_move``."""

    def __init__(self, host: StageHost) -> None:
        self.host = host

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        move, n = next_move(self.host), len(self.host.session.events)
        if move is None:
            text = ResponseOutputText(type="output_text", text="Verified: the tests pass.", annotations=[])
            out: list[Any] = [ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant",
                                                    status="completed", content=[text])]
        else:
            out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name=move[0],
                                            arguments=json.dumps(move[1]))]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def edit_file(path: str, text: str) -> str:
    """Write ``text`` to ``path`` (pretend)."""
    return f"wrote {len(text)} characters to {path}"


def kill_point(resume: bool) -> None:
    if os.environ.get("FSM_EXAMPLE_KILL") == "after-approval" and resume:
        os._exit(3)  # the kill test: die between the approval and the next step


async def main(log_path: str, resume: bool) -> None:
    set_tracing_disabled(True)
    with JsonlLog(log_path, header=SessionHeader("feature", cwd=os.path.dirname(log_path))) as log:
        host = StageHost.open(log, guards={"tests_written": True})
        agent = Agent(name="dev", model=StagedModel(ScriptedModel(host), host),
                      tools=[*stage_tools(host), *host_tools(host, [edit_file])])
        if not resume:
            assert host.plan is not None
            host.plan.set(host.agent, True)  # start in plan mode
            result = await Runner.run(agent, "Add a --greeting flag.")
        while host.pending_reviews():  # the log says what waits
            if not resume and host.pending_reviews()[0][0].name == "goto_stage":
                print("review pending: restarting the process")
                break
            if not resume:  # in process: answer through the RunState interruption
                state = result.to_state()
                for item in result.interruptions:
                    approve(host, state, item)
                result = await Runner.run(agent, state)
                continue
            for _call, review_id, _answered in host.pending_reviews():  # a new process: log only
                host.answer(review_id, True)
            kill_point(resume)
            result = await Runner.run(agent, "")
        print("stage:", host.current_stage())
    if not resume:
        sys.exit(subprocess.run([sys.executable, __file__, "--resume", log_path]).returncode)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    asyncio.run(main(args[0] if args else os.path.join(tempfile.mkdtemp(), "session.jsonl"),
                     "--resume" in sys.argv))
