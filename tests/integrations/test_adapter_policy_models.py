"""The tool-policy rows of the issue's attacks, end to end through each framework's own offline
test model (pydantic-ai ``FunctionModel``, LangChain's fake chat model, an Agents SDK ``Model``):
the model calls ``write_file`` with the row's arguments, the framework dispatches it through the
adapter, and the log shows the verdict (``ask``: reviewed, then run once; ``deny``: never run)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from policy_rules import ROWS, approving, config, verdict_in, workspace_at
from sdk_check import sdk

from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import MemoryLog, SessionHeader

CASES = ["ask-dotdot", "ask-absolute", "ask-list", "ask-second-arg", "ask-harmless", "allow-outside",
         "allow-double-slash", "allow-match"]


def _host(graph: str, cwd: str) -> StageHost:
    host = StageHost.open(MemoryLog(SessionHeader("rules", cwd=cwd)), graph=config(graph), review=approving(),
                          plan_mode=False)
    assert host.current_stage() == "work"
    return host


def _args(row_id: str, cwd: str) -> dict[str, Any]:
    args = ROWS[row_id].args(cwd)
    assert isinstance(args, dict)
    return args


def _called(host: StageHost) -> bool:
    return any(e.type == "tool/call" and e.data["name"] == "write_file" for e in host.session.events)


def _call_id(host: StageHost) -> str:
    return next(e.data["callId"] for e in host.session.events
                if e.type == "tool/call" and e.data["name"] == "write_file")


@pytest.mark.parametrize("row_id", CASES)
def test_pydantic_ai_function_model(row_id: str, tmp_path: Path) -> None:
    sdk("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from fsm_stage.integrations.pydantic_ai import StageCapability

    cwd = workspace_at(tmp_path)
    host, ran = _host(ROWS[row_id].graph, cwd), []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _called(host):
            return ModelResponse(parts=[TextPart("Done.")])
        return ModelResponse(parts=[ToolCallPart("write_file", json.dumps(_args(row_id, cwd)), "call_w")])

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[StageCapability(host)])

    @agent.tool_plain
    def write_file(path: Any = None, file: Any = None, paths: Any = None) -> str:
        """Write a file."""
        ran.append(True)
        return "written"

    assert agent.run_sync("Write it.").output == "Done."
    assert verdict_in(host.session.events, _call_id(host), len(ran)) == ROWS[row_id].verdict


@pytest.mark.parametrize("row_id", CASES)
def test_langgraph_fake_chat_model(row_id: str, tmp_path: Path) -> None:
    sdk("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from fsm_stage.integrations.langgraph import stage_graph

    cwd = workspace_at(tmp_path)
    host, ran = _host(ROWS[row_id].graph, cwd), []

    class Fake(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            reply = AIMessage("Done.") if _called(host) else AIMessage(
                "", tool_calls=[{"name": "write_file", "args": _args(row_id, cwd), "id": "call_w"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    @tool
    def write_file(path: Any = None, file: Any = None, paths: Any = None) -> str:
        """Write a file."""
        ran.append(True)
        return "written"

    graph = stage_graph(host, Fake(responses=[]), [write_file], checkpointer=InMemorySaver())
    asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "Write it."},
                              {"configurable": {"thread_id": "t"}}))
    assert verdict_in(host.session.events, _call_id(host), len(ran)) == ROWS[row_id].verdict


@pytest.mark.parametrize("row_id", CASES)
def test_openai_agents_model(row_id: str, tmp_path: Path) -> None:
    sdk("agents")
    from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from fsm_stage.integrations.openai_agents import StagedModel, host_tools, stage_tools

    set_tracing_disabled(True)
    cwd = workspace_at(tmp_path)
    host, ran = _host(ROWS[row_id].graph, cwd), []

    class Fake(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            if _called(host):
                text = ResponseOutputText(type="output_text", text="Done.", annotations=[])
                out: list[Any] = [ResponseOutputMessage(id="m", type="message", role="assistant",
                                                        status="completed", content=[text])]
            else:
                out = [ResponseFunctionToolCall(type="function_call", call_id="call_w", name="write_file",
                                                arguments=json.dumps(_args(row_id, cwd)))]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool(strict_mode=False)
    def write_file(path: Any = None, file: Any = None, paths: Any = None) -> str:
        """Write a file."""
        ran.append(True)
        return "written"

    agent = Agent(name="dev", model=StagedModel(Fake(), host),
                  tools=[*stage_tools(host), *host_tools(host, [write_file])])
    asyncio.run(Runner.run(agent, "Write it.", max_turns=4))
    assert verdict_in(host.session.events, _call_id(host), len(ran)) == ROWS[row_id].verdict
