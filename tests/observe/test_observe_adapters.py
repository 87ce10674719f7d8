"""The stage reaches each framework's own record of a model request: LangChain's chat-model run
metadata (what LangSmith and LangChain's OpenTelemetry bridges record) in the LangGraph adapter,
and an ``fsm_stage.step`` custom span around the model call in the OpenAI Agents SDK's tracing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import obs_rig  # noqa: F401 - puts tests/integrations on sys.path
from adapter_rig import edit_file_result, make_host, next_move
from sdk_check import sdk

EXPECTED = [("explore", True), ("explore", False), ("implement", False), ("implement", False),
            ("verify", False)]


def test_langgraph_chat_runs_carry_the_stage_in_their_metadata() -> None:
    sdk("langgraph")
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from fsm_stage.integrations.langgraph import stage_graph

    host = make_host(approve_all=True)

    class Chat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            move, n = next_move(host), len(host.session.events)
            reply = AIMessage("Verified.") if move is None else AIMessage(
                "", tool_calls=[{"name": move[0], "args": move[1], "id": f"call_{n}"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    seen: list[dict[str, Any]] = []

    class Recorder(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, *, metadata: Any = None,
                                **kwargs: Any) -> None:
            seen.append(dict(metadata or {}))

    graph = stage_graph(host, Chat(responses=[]))
    asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."},
                              {"callbacks": [Recorder()]}))
    assert [(m["fsm_stage.stage"], m["fsm_stage.plan_mode"]) for m in seen] == EXPECTED
    assert {m["fsm_stage.session.id"] for m in seen} == {"s1"}
    assert all("langgraph_node" in m for m in seen)  # merged with LangGraph's own run metadata


def test_agents_sdk_trace_has_a_step_span_with_the_stage_around_each_request() -> None:
    sdk("agents")
    from agents import (
        Agent,
        Model,
        ModelResponse,
        Runner,
        Usage,
        function_tool,
        set_trace_processors,
        set_tracing_disabled,
    )
    from agents.tracing import TracingProcessor
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from fsm_stage.integrations.openai_agents import StagedModel, host_tools, stage_tools

    host = make_host(approve_all=True)

    class Fake(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            move, n = next_move(host), len(host.session.events)
            if move is None:
                text = ResponseOutputText(type="output_text", text="Verified.", annotations=[])
                out: list[Any] = [ResponseOutputMessage(id=f"m{n}", type="message", role="assistant",
                                                        status="completed", content=[text])]
            else:
                out = [ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name=move[0],
                                                arguments=json.dumps(move[1]))]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    spans: list[Any] = []

    class Collect(TracingProcessor):
        def on_trace_start(self, trace: Any) -> None: ...
        def on_trace_end(self, trace: Any) -> None: ...
        def on_span_start(self, span: Any) -> None: ...
        def on_span_end(self, span: Any) -> None:
            spans.append(span)
        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    set_trace_processors([Collect()])
    set_tracing_disabled(False)
    try:
        @function_tool
        def edit_file(path: str, text: str) -> str:
            """Write a file."""
            return edit_file_result(path, text)

        agent: Agent[Any] = Agent(name="dev", model=StagedModel(Fake(), host),
                                  tools=[*stage_tools(host), *host_tools(host, [edit_file])])
        assert asyncio.run(Runner.run(agent, "Add a --greeting flag.")).final_output == "Verified."
    finally:
        set_tracing_disabled(True)
        set_trace_processors([])
    steps = [s for s in spans if s.span_data.type == "custom" and s.span_data.name == "fsm_stage.step"]
    got = [(s.span_data.data["fsm_stage.stage"], s.span_data.data["fsm_stage.plan_mode"]) for s in steps]
    assert got == EXPECTED
    assert len({s.trace_id for s in steps}) == 1
