"""OpenAI Agents SDK + fsm_stage, offline (a scripted ``Model`` plays the LLM; no API key).

Plan mode → exit_plan_mode (approved) → goto_stage implement, a *full* switch (the first call
is refused with the handoff template; the model calls again with a handoff document) whose
review waits while the process restarts → edit_file → goto_stage verify (full, approved) →
done, on a JsonlLog. The model decides only from the input it is sent
(``scripted_llm.next_move``). Reviews are tool approvals (``needs_approval``) surfacing as
``RunState`` interruptions.

Before restarting, the process saves the ``RunState`` as JSON (a file beside the log); the new
process loads it with ``RunState.from_json``, approves the interruption and runs on. If the
review was answered elsewhere meanwhile, ``approve`` leaves the logged answer as it is. Run:
``python examples/openai_agents_feature_work.py [LOG]``; it re-executes itself with
``--resume LOG``.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, RunState, Usage, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from scripted_llm import FINAL, example_graph, next_move

from fsm_stage.integrations.openai_agents import StagedModel, StageHost, approve, host_tools, stage_tools
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, dict))


def texts_of(items: list[Any]) -> list[tuple[str, str]]:
    """What the model was sent (Responses input items), as ``(kind, text)`` pairs."""
    items = [i if isinstance(i, dict) else i.model_dump() for i in items]
    called = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
    out: list[tuple[str, str]] = []
    for item in items:
        if item.get("type") == "function_call_output":
            out.append((f"tool:{called.get(item['call_id'])}", _text(item.get("output"))))
        elif item.get("role") in ("user", "assistant"):
            out.append((item["role"], _text(item.get("content"))))
    return out


class ScriptedModel(Model):
    """The framework's ``Model`` interface, answered by ``next_move`` from its input alone."""

    async def get_response(self, system_instructions: str | None, input: str | list[Any],
                           *args: Any, **kwargs: Any) -> ModelResponse:
        sent = [{"role": "user", "content": input}] if isinstance(input, str) else input
        move = next_move(system_instructions or "", texts_of(sent))
        if move is None:
            text = ResponseOutputText(type="output_text", text=FINAL, annotations=[])
            out: list[Any] = [ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex[:12]}", type="message",
                                                    role="assistant", status="completed", content=[text])]
        else:
            out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{uuid.uuid4().hex[:12]}",
                                            name=move[0], arguments=json.dumps(move[1]))]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def edit_file(path: str, text: str) -> str:
    """Write ``text`` to ``path`` (pretend)."""
    return f"wrote {len(text)} characters to {path}"


async def main(log_path: str, resume: bool) -> None:
    set_tracing_disabled(True)
    saved = Path(log_path + ".runstate.json")
    with JsonlLog(log_path, header=SessionHeader("feature", cwd=os.path.dirname(log_path))) as log:
        host = StageHost.open(log, graph=example_graph(), guards={"tests_written": True})
        agent = Agent(name="dev", model=StagedModel(ScriptedModel(), host),
                      tools=[*stage_tools(host), *host_tools(host, [edit_file])])
        if not resume:
            assert host.plan is not None
            host.plan.set(host.agent, True)  # start in plan mode
            state = (await Runner.run(agent, "Add a --greeting flag.")).to_state()
        else:  # a new process: the saved RunState holds the interruption
            state = await RunState.from_json(agent, json.loads(saved.read_text(encoding="utf-8")))
        while interruptions := state.get_interruptions():
            if not resume and interruptions[0].name == "goto_stage":
                saved.write_text(json.dumps(state.to_json()), encoding="utf-8")
                print("review pending: restarting the process")
                break
            for item in interruptions:
                approve(host, state, item)  # a human approves (answer_review, then state.approve)
            if os.environ.get("FSM_EXAMPLE_KILL") == "after-approval" and resume:
                os._exit(3)  # the kill test: die between the approval and the next step
            state = (await Runner.run(agent, state)).to_state()
        print("stage:", host.current_stage())
    if not resume:
        sys.stdout.flush()  # our lines before the restarted process's (stdout may be a pipe)
        sys.exit(subprocess.run([sys.executable, __file__, "--resume", log_path]).returncode)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--resume"]
    asyncio.run(main(args[0] if args else os.path.join(tempfile.mkdtemp(), "session.jsonl"),
                     "--resume" in sys.argv))
