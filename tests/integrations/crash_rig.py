"""A process that dies mid-turn (a plain module, also run as a script): ``python crash_rig.py
FRAMEWORK LOG`` runs the scripted feature-work session on a ``JsonlLog`` with every review
approved and calls ``os._exit(3)`` in the model request right after the switch to
``implement`` (its stage notice is the log's last message): the log keeps an open turn for
crash repair."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from adapter_rig import HOST_SECTION, edit_file_result, next_move

from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import Answer, ScriptedReviewChannel
from fsm_stage.runtime.assembly import SystemSection

CRASH_EXIT = 3


def open_host(path: Path, *, plan: bool, approve_all: bool = True) -> StageHost:
    """A host over the JSONL log at ``path``: its reviewer approves everything (``approve_all``)
    or every review is answered through the framework."""
    channel = ScriptedReviewChannel(default=lambda qs: [Answer(q.id, ("Approve",)) for q in qs]
                                    ) if approve_all else None
    header = SessionHeader(f"crash-{path.parent.name}", cwd=str(path.parent))
    host = StageHost.open(JsonlLog(path, header=header),
                          review=channel, guards={"tests_written": True})
    host.runtime.add_section(SystemSection("host", 10, lambda _agent: HOST_SECTION))
    if plan and host.plan is not None:
        host.plan.set(host.agent, True)
    return host


def crashed_in_implement(host: StageHost) -> bool:
    """Crash repair closed the turn right after the switch to ``implement``, before any edit."""
    events = host.session.events
    cut = max(i for i, e in enumerate(events)
              if e.type == "turn/end" and e.data["reason"]["kind"] == "interrupted")
    notices = [e.data["source"].get("summary") for e in events[:cut] if e.type == "user/message"]
    return "Current stage: implement" in notices and not any(
        e.type == "tool/call" and e.data["name"] == "edit_file" for e in events[:cut])


def user_texts_after_repair(host: StageHost) -> list[str]:
    """The text of every user-typed message logged after crash repair's ``turn/end``."""
    events = host.session.events
    cut = max(i for i, e in enumerate(events)
              if e.type == "turn/end" and e.data["reason"]["kind"] == "interrupted")
    return ["".join(b.get("text", "") for b in e.data["content"])
            for e in events[cut:] if e.type == "user/message" and e.data["source"]["kind"] == "user"]


def _pydantic_ai(path: Path, crash: bool) -> Any:
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from fsm_stage.integrations.pydantic_ai import StageCapability

    host = open_host(path, plan=crash)

    def model(_messages: Any, _info: Any) -> ModelResponse:
        move = next_move(host)
        if crash and move is not None and move[0] == "edit_file":
            os._exit(CRASH_EXIT)
        if move is None:
            return ModelResponse(parts=[TextPart("Verified.")])
        return ModelResponse(parts=[ToolCallPart(move[0], json.dumps(move[1]),
                                                 f"call_{len(host.session.events)}")])

    cap = StageCapability(host)
    agent: Agent[None, Any] = Agent(FunctionModel(model), capabilities=[cap],
                                    output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def edit_file(path: str, text: str) -> str:
        """Write a file."""
        return edit_file_result(path, text)

    if crash:
        return agent.run_sync("Add a --greeting flag.").output
    return host, agent.run_sync(message_history=cap.message_history()).output


def _agents_build(path: Path, crash: bool) -> tuple[StageHost, Any]:
    from agents import Agent, function_tool, set_tracing_disabled
    from oa_fake import FakeModel

    from fsm_stage.integrations.openai_agents import StagedModel, host_tools, stage_tools

    set_tracing_disabled(True)
    host = open_host(path, plan=crash, approve_all=False)

    class CrashingModel(FakeModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            move = next_move(host)
            if crash and move is not None and move[0] == "edit_file":
                os._exit(CRASH_EXIT)
            return await super().get_response(*args, **kwargs)

    @function_tool
    def edit_file(path: str, text: str) -> str:
        """Write a file."""
        return edit_file_result(path, text)

    return host, Agent(name="dev", model=StagedModel(CrashingModel(host), host),
                       tools=[*stage_tools(host), *host_tools(host, [edit_file])])


async def _approve_until_done(host: StageHost, agent: Any, result: Any) -> Any:
    from agents import Runner

    from fsm_stage.integrations.openai_agents import approve
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            approve(host, state, item)
        result = await Runner.run(agent, state)
    return result


def _openai_agents(path: Path, crash: bool) -> Any:
    """The SDK's HITL pattern: the first interruption's ``RunState`` is saved as JSON next to
    the log (``LOG.state.json``), then every review is approved until the crash."""
    from agents import Runner
    host, agent = _agents_build(path, crash)

    async def run() -> Any:
        result = await Runner.run(agent, "Add a --greeting flag.")
        path.with_suffix(".state.json").write_text(result.to_state().to_string())
        return await _approve_until_done(host, agent, result)
    return asyncio.run(run())


async def resume_saved_state(path: Path) -> tuple[StageHost, Any]:
    """A new process resumes the crashed session from the ``RunState`` saved before the crash
    (approving its interruption again, as the saved state asks) and approves until done."""
    from agents import Runner, RunState

    from fsm_stage.integrations.openai_agents import approve
    host, agent = _agents_build(path, False)
    state = await RunState.from_string(agent, path.with_suffix(".state.json").read_text())
    for item in state.get_interruptions():
        approve(host, state, item)
    result = await _approve_until_done(host, agent, await Runner.run(agent, state))
    return host, result.final_output


def _langgraph(path: Path, crash: bool) -> Any:
    """``graph.invoke`` with an in-memory checkpointer; after the crash a new graph on a new
    thread continues with a new prompt (repair closed the turn)."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from fsm_stage.integrations.langgraph import stage_graph

    host = open_host(path, plan=crash)

    class Chat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatResult:
            move = next_move(host)
            if crash and move is not None and move[0] == "edit_file":
                os._exit(CRASH_EXIT)
            reply = AIMessage("Verified.") if move is None else AIMessage(
                "", tool_calls=[{"name": move[0], "args": move[1], "id": f"call_{len(host.session.events)}"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def edit_file(path: str, text: str) -> str:
        """Write a file."""
        return edit_file_result(path, text)

    graph = stage_graph(host, Chat(responses=[]), [edit_file], checkpointer=InMemorySaver())
    prompt = "Add a --greeting flag." if crash else "Continue where you stopped."
    out = graph.invoke({"session": host.session.id, "prompt": prompt}, {"configurable": {"thread_id": "t"}})
    return host, host.session.messages()[-1]["content"][0]["text"] if "__interrupt__" not in out else out


RUNNERS = {"pydantic_ai": _pydantic_ai, "openai_agents": _openai_agents, "langgraph": _langgraph}


def continue_after_crash(framework: str, path: Path) -> tuple[StageHost, Any]:
    """In this process: open the crashed log (repair closes the turn) and continue the session
    the documented way; returns the host and the run's final output."""
    result: tuple[StageHost, Any] = RUNNERS[framework](path, False)
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    RUNNERS[sys.argv[1]](Path(sys.argv[2]), True)
    sys.exit(0)
