"""The stage reaches each framework's own record of a model request: LangChain's chat-model run
metadata (what LangSmith and LangChain's OpenTelemetry bridges record) in the LangGraph adapter,
and an ``fsm_stage.step`` custom span around the model call in the OpenAI Agents SDK's tracing."""

from __future__ import annotations

import asyncio
from typing import Any

import obs_rig  # noqa: F401 - puts tests/integrations on sys.path
from adapter_rig import make_host
from sdk_check import sdk

EXPECTED = [("explore", True), ("explore", False), ("implement", False), ("implement", False),
            ("verify", False)]


def test_langgraph_chat_runs_carry_the_stage_in_their_metadata() -> None:
    sdk("langgraph")
    from langchain_core.callbacks import BaseCallbackHandler
    from test_adapter_langgraph import FakeChat

    from fsm_stage.integrations.langgraph import stage_graph

    seen: list[dict[str, Any]] = []

    class Recorder(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, *, metadata: Any = None,
                                **kwargs: Any) -> None:
            seen.append(dict(metadata or {}))

    host = make_host(approve_all=True)
    graph = stage_graph(host, FakeChat(host=host, requests=[]))
    asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "Add a --greeting flag."},
                              {"callbacks": [Recorder()]}))
    assert [(m["fsm_stage.stage"], m["fsm_stage.plan_mode"]) for m in seen] == EXPECTED
    assert {m["fsm_stage.session.id"] for m in seen} == {"s1"}
    assert all("langgraph_node" in m for m in seen)  # merged with LangGraph's own run metadata


def test_agents_sdk_trace_has_a_step_span_with_the_stage_around_each_request() -> None:
    sdk("agents")
    from agents import Agent, Runner, set_trace_processors, set_tracing_disabled
    from agents.tracing import TracingProcessor
    from test_adapter_openai_agents import FakeModel, edit_file

    from fsm_stage.integrations.openai_agents import StagedModel, host_tools, stage_tools

    spans: list[Any] = []

    class Collect(TracingProcessor):
        def on_trace_start(self, trace: Any) -> None: ...
        def on_trace_end(self, trace: Any) -> None: ...
        def on_span_start(self, span: Any) -> None: ...
        def on_span_end(self, span: Any) -> None:
            spans.append(span)
        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    host = make_host(approve_all=True)
    agent: Agent[Any] = Agent(name="dev", model=StagedModel(FakeModel(host), host),
                              tools=[*stage_tools(host), *host_tools(host, [edit_file])])
    set_trace_processors([Collect()])  # the SDK's tracing is global: only ours, and only here
    set_tracing_disabled(False)
    try:
        assert asyncio.run(Runner.run(agent, "Add a --greeting flag.")).final_output == "Verified."
    finally:
        set_tracing_disabled(True)
        set_trace_processors([])
    steps = [s for s in spans if s.span_data.type == "custom" and s.span_data.name == "fsm_stage.step"]
    data = [s.span_data.data for s in steps]
    assert [(d["fsm_stage.stage"], d["fsm_stage.plan_mode"]) for d in data] == EXPECTED
    assert len({s.trace_id for s in steps}) == 1
