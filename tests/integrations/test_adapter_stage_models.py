"""Per-stage models through every host (issue 29): the same scenario — ``model-per-stage.yaml``,
design on ``thinker`` (openai:o3) with high effort, implement on ``fast`` (openai:gpt-5-mini)
with ``temperature: 0.2``, verify on ``fast`` with no settings — through the reference loop and
each adapter with its framework's offline test model. Each fake model records what it received:
each stage's requests reach that stage's model with that stage's settings, nothing else reaches
the host's default model, and a host without ``models=`` keeps its own model and settings with
one warning per missing model (never an error)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from sdk_check import sdk

from fsm_stage import ModelReply, load_config
from fsm_stage.driver import Loop, ScriptedModel, open_session
from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.reviews import ScriptedReviewChannel

GRAPH = Path(__file__).resolve().parents[2] / "stage_graphs" / "model-per-stage.yaml"
HANDOFF = "# Handoff\nDo it."
MODELS = ("o3", "mini")
#: (model that got the request, stage) of the scenario's three requests
ROUTE = [("o3", "design"), ("mini", "implement"), ("mini", "verify")]
WARNINGS = ["stage:design asks for model openai:o3; {where} has no such model (models=…), so the "
            "framework's own model answers",
            "stage:implement asks for model openai:gpt-5-mini; {where} has no such model (models=…), so "
            "the framework's own model answers"]


def make_host(tmp_path: Path) -> StageHost:
    return StageHost.open(MemoryLog(SessionHeader("s", cwd=str(tmp_path))), graph=GRAPH, plan_mode=False,
                          review=ScriptedReviewChannel().approve().approve())


def move(host: StageHost) -> tuple[str, dict[str, str]] | None:
    """design → implement → verify, then the answer."""
    target = {"design": "implement", "implement": "verify"}.get(host.current_stage() or "")
    return None if target is None else ("goto_stage", {"stage": target, "handoff": HANDOFF})


def sources(host: StageHost) -> list[Any]:
    return [e.data["message"]["source"].get("model") for e in host.session.events
            if e.type == "assistant/message"]


def headers(host: StageHost) -> list[dict[str, Any]]:
    return [e.data["header"]["config"] for e in host.session.events if e.type == "request/header"]


def assert_logged(host: StageHost, switched: bool) -> None:
    """The headers say what each request asked for; the messages which model answered."""
    assert host.current_stage() == "verify"
    mini = {"provider": "openai", "model": "gpt-5-mini"}
    assert headers(host) == [{"provider": "openai", "model": "o3", "reasoningEffort": "high"},
                             {**mini, "modelSettings": {"temperature": 0.2}}, mini]
    assert sources(host) == (["o3", "gpt-5-mini", "gpt-5-mini"] if switched else [None, None, None])


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "fsm_stage.integrations"]


# --- the reference loop ---------------------------------------------------------------------------


def test_reference_loop(tmp_path: Path) -> None:
    host = open_session(load_config(GRAPH), MemoryLog(SessionHeader("s", cwd=str(tmp_path))),
                        review=ScriptedReviewChannel().approve().approve(), plan_mode=False, guidance=False,
                        repair=False)
    goto = [ModelReply.call("goto_stage", {"stage": s, "handoff": HANDOFF}) for s in ("implement", "verify")]
    o3 = ScriptedModel([goto[0]], provider="openai", name="o3")
    mini = ScriptedModel([goto[1], ModelReply.say("Verified.")], provider="openai", name="gpt-5-mini")
    default = ScriptedModel([], provider="x", name="default")
    asyncio.run(Loop(host.runtime, host.agent, default, models={"openai:o3": o3, "fast": mini}).prompt("go"))
    got = [(r.model.model, r.model.reasoning_effort, dict(r.model.settings))
           for r in (*o3.requests, *mini.requests)]
    assert got == [("openai:o3", "high", {}), ("openai:gpt-5-mini", None, {"temperature": 0.2}),
                   ("openai:gpt-5-mini", None, {})]
    assert default.requests == []


# --- pydantic-ai ----------------------------------------------------------------------------------


Seen = list[tuple[str, str | None, dict[str, Any], Any]]


def pydantic_agent(host: StageHost, models: bool) -> tuple[Any, Seen]:
    sdk("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.profiles import ModelProfile

    from fsm_stage.integrations.pydantic_ai import StageCapability

    seen: Seen = []

    def fake(label: str) -> FunctionModel:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append((label, host.current_stage(), dict(info.model_settings or {}),
                         info.model_request_parameters.thinking))
            nxt = move(host)
            if nxt is None:
                return ModelResponse(parts=[TextPart("Verified.")])
            return ModelResponse(parts=[ToolCallPart(nxt[0], json.dumps(nxt[1]), f"call_{len(seen)}")])
        return FunctionModel(answer, model_name=label, profile=ModelProfile(supports_thinking=True))

    chosen = {"openai:o3": fake("o3"), "fast": fake("mini")} if models else None
    agent = Agent(fake("default"), model_settings={"max_tokens": 64},
                  capabilities=[StageCapability(host, models=chosen)])
    return agent, seen


def test_pydantic_ai_sends_each_stage_to_its_model_with_its_settings(tmp_path: Path) -> None:
    host = make_host(tmp_path)
    agent, seen = pydantic_agent(host, models=True)
    assert agent.run_sync("go").output == "Verified."
    assert seen == [("o3", "design", {"max_tokens": 64}, "high"),
                    ("mini", "implement", {"max_tokens": 64, "temperature": 0.2}, None),
                    ("mini", "verify", {"max_tokens": 64}, None)]
    assert_logged(host, switched=True)


def test_pydantic_ai_without_models_keeps_its_own(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    host = make_host(tmp_path)
    agent, seen = pydantic_agent(host, models=False)
    with caplog.at_level(logging.WARNING, logger="fsm_stage.integrations"):
        assert agent.run_sync("go").output == "Verified."
    assert [s[0] for s in seen] == ["default"] * 3
    assert all(s[2] == {"max_tokens": 64} and s[3] is None for s in seen)
    assert warnings(caplog) == [w.format(where="StageCapability") for w in WARNINGS]
    assert_logged(host, switched=False)


# --- LangGraph ------------------------------------------------------------------------------------


def langgraph_run(host: StageHost, models: bool) -> list[tuple[str, str | None, dict[str, Any]]]:
    sdk("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from fsm_stage.integrations.langgraph import stage_graph

    seen: list[tuple[str, str | None, dict[str, Any]]] = []

    class Fake(FakeMessagesListChatModel):
        label: str = ""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            seen.append((self.label, host.current_stage(), kwargs))
            nxt = move(host)
            reply = AIMessage("Verified.") if nxt is None else AIMessage(
                "", tool_calls=[{"name": nxt[0], "args": nxt[1], "id": f"call_{len(seen)}"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    chosen = {"openai:o3": Fake(responses=[], label="o3"), "fast": Fake(responses=[], label="mini")}
    graph = stage_graph(host, Fake(responses=[], label="default"), models=chosen if models else None)
    asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "go"},
                              {"configurable": {"thread_id": "t"}}))
    return seen


def test_langgraph_sends_each_stage_to_its_model_with_its_settings(tmp_path: Path) -> None:
    host = make_host(tmp_path)
    seen = langgraph_run(host, models=True)
    assert seen == [("o3", "design", {"reasoning_effort": "high"}),
                    ("mini", "implement", {"temperature": 0.2}), ("mini", "verify", {})]
    assert_logged(host, switched=True)


def test_langgraph_without_models_keeps_its_own(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    host = make_host(tmp_path)
    with caplog.at_level(logging.WARNING, logger="fsm_stage.integrations"):
        seen = langgraph_run(host, models=False)
    assert seen == [("default", stage, {}) for _m, stage in ROUTE]
    assert warnings(caplog) == [w.format(where="stage_graph") for w in WARNINGS]
    assert_logged(host, switched=False)


# --- OpenAI Agents SDK ----------------------------------------------------------------------------


def agents_run(host: StageHost, models: bool) -> dict[str, Any]:
    sdk("agents")
    from agents import Agent, ModelSettings, Runner, set_tracing_disabled
    from oa_fake import FakeModel

    from fsm_stage.integrations.openai_agents import StagedModel, stage_tools

    set_tracing_disabled(True)
    fakes = {label: FakeModel(host, move) for label in ("default", *MODELS)}
    chosen = {"openai:o3": fakes["o3"], "fast": fakes["mini"]} if models else None
    agent: Agent[Any] = Agent(name="dev", model=StagedModel(fakes["default"], host, models=chosen),
                              model_settings=ModelSettings(max_tokens=64), tools=stage_tools(host))
    assert asyncio.run(Runner.run(agent, "go")).final_output == "Verified."
    return fakes


def effort(settings: Any) -> str | None:
    return None if settings.reasoning is None else settings.reasoning.effort


def test_openai_agents_sends_each_stage_to_its_model_with_its_settings(tmp_path: Path) -> None:
    host = make_host(tmp_path)
    fakes = agents_run(host, models=True)
    assert fakes["default"].settings == []
    o3, mini = fakes["o3"].settings, fakes["mini"].settings
    assert [(s.max_tokens, s.temperature, effort(s)) for s in o3] == [(64, None, "high")]
    assert [(s.max_tokens, s.temperature, effort(s)) for s in mini] == [(64, 0.2, None), (64, None, None)]
    assert_logged(host, switched=True)


def test_openai_agents_without_models_keeps_its_own(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    host = make_host(tmp_path)
    with caplog.at_level(logging.WARNING, logger="fsm_stage.integrations"):
        fakes = agents_run(host, models=False)
    got = [(s.max_tokens, s.temperature, effort(s)) for s in fakes["default"].settings]
    assert got == [(64, None, None)] * 3
    assert warnings(caplog) == [w.format(where="StagedModel") for w in WARNINGS]
    assert_logged(host, switched=False)


# --- the translation and bad input -------------------------------------------------------------------


def test_settings_in_each_framework_words() -> None:
    from fsm_stage.integrations._models import agents_settings, langchain_kwargs, pydantic_ai_settings
    from fsm_stage.runtime.stage_models import ModelChoice

    choice = ModelChoice("openai:o3", None, "none", {"temperature": 0.1, "seed": 7}, "stage:a")
    assert pydantic_ai_settings(choice) == {"temperature": 0.1, "seed": 7, "thinking": False}
    assert langchain_kwargs(choice) == {"temperature": 0.1, "seed": 7, "reasoning_effort": "none"}
    sdk("agents")
    out = agents_settings(choice)
    assert out["temperature"] == 0.1 and out["extra_args"] == {"seed": 7}
    assert out["reasoning"].effort == "none"


def test_bad_models_argument_is_a_one_line_type_error(tmp_path: Path) -> None:
    sdk("pydantic_ai")
    from fsm_stage.integrations.pydantic_ai import StageCapability

    host = make_host(tmp_path)
    with pytest.raises(TypeError, match=r"^StageCapability\(models=\) must be a mapping"):
        StageCapability(host, models=["openai:o3"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^StageCapability\(models=\): 'fast' must map a model name to a "
                                        r"Model or str, got int$"):
        StageCapability(host, models={"fast": 3})  # type: ignore[dict-item]


# --- a budget stop through an adapter -----------------------------------------------------------------

BUDGET_GRAPH = """
name: budgeted
section: Work.
models: {fast: "openai:gpt-5-mini"}
stages:
  - name: start
    instruction: Start.
    targets: [work]
  - name: work
    instruction: Work.
    model: fast
    budget: {turns: 1}
"""


def test_budget_stop_ends_an_adapter_turn_with_its_reason(tmp_path: Path) -> None:
    sdk("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from fsm_stage.config import load_config_text
    from fsm_stage.integrations.pydantic_ai import StageCapability

    log = MemoryLog(SessionHeader("s", cwd=str(tmp_path)))
    host = StageHost.open(log, graph=load_config_text(BUDGET_GRAPH), plan_mode=False,
                          review=ScriptedReviewChannel().approve())
    answered: list[str] = []

    def fake(label: str) -> FunctionModel:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            answered.append(label)
            if host.current_stage() == "start":
                goto = json.dumps({"stage": "work", "handoff": HANDOFF})
                return ModelResponse(parts=[ToolCallPart("goto_stage", goto, "c1")])
            return ModelResponse(parts=[TextPart("ok")])
        return FunctionModel(answer)

    agent = Agent(fake("default"), capabilities=[StageCapability(host, models={"fast": fake("fast")})])
    assert agent.run_sync("one").output == "ok"
    with pytest.raises(RuntimeError, match=r"^budget of stage work ran out: turns 1/1$"):
        agent.run_sync("two")
    assert answered == ["default", "fast"]  # the second turn never reached a model
    ends = [e.data["reason"] for e in host.session.events if e.type == "turn/end"]
    assert ends == [{"kind": "completed"},
                    {"kind": "blocked", "message": "budget of stage work ran out: turns 1/1"}]


# --- token budgets through an adapter: the framework's usage is logged and counted ----------------------

#: what every fake reply reports: 1,200 input tokens (200 read from the cache, 100 written to it)
#: and 500 output tokens, in each framework's own words
LOGGED_USAGE = {"inputTokens": 900, "outputTokens": 500, "cacheReadTokens": 200, "cacheWriteTokens": 100}
STOPPED = r"^budget of stage work ran out: tokens_out 500/100$"


def token_host(tmp_path: Path) -> StageHost:
    from two_stages import TOKEN_BUDGET

    from fsm_stage.config import load_config_text

    log = MemoryLog(SessionHeader("s", cwd=str(tmp_path)))
    return StageHost.open(log, graph=load_config_text(TOKEN_BUDGET), plan_mode=False)


def assert_counted(host: StageHost, usage: dict[str, int]) -> None:
    """One reply logged with ``usage``; the second turn was stopped by the budget before a step."""
    logged = [e.data.get("usage") for e in host.session.events if e.type == "assistant/message"]
    assert logged == [usage]
    ends = [e.data["reason"]["kind"] for e in host.session.events if e.type == "turn/end"]
    assert ends == ["completed", "blocked"]


def test_pydantic_ai_usage_is_logged_and_a_token_budget_stops_the_next_turn(tmp_path: Path) -> None:
    sdk("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    from fsm_stage.integrations.pydantic_ai import StageCapability

    host = token_host(tmp_path)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        usage = RequestUsage(input_tokens=1200, output_tokens=500, cache_read_tokens=200,
                             cache_write_tokens=100)
        return ModelResponse(parts=[TextPart("ok")], usage=usage)

    agent = Agent(FunctionModel(answer), capabilities=[StageCapability(host)])
    assert agent.run_sync("one").output == "ok"
    with pytest.raises(RuntimeError, match=STOPPED):
        agent.run_sync("two")
    assert_counted(host, LOGGED_USAGE)


def test_langgraph_usage_is_logged_and_a_token_budget_stops_the_next_turn(tmp_path: Path) -> None:
    sdk("langgraph")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    from fsm_stage.integrations.langgraph import stage_graph

    class Fake(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    usage = {"input_tokens": 1200, "output_tokens": 500, "total_tokens": 1700,
             "input_token_details": {"cache_read": 200, "cache_creation": 100}}
    host = token_host(tmp_path)
    graph = stage_graph(host, Fake(responses=[AIMessage("ok", usage_metadata=usage)] * 2))
    config = {"configurable": {"thread_id": "t"}}
    asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "one"}, config))
    with pytest.raises(RuntimeError, match=STOPPED.rstrip("$")):  # LangGraph adds a note naming its task
        asyncio.run(graph.ainvoke({"session": host.session.id, "prompt": "two"}, config))
    assert_counted(host, LOGGED_USAGE)


def test_openai_agents_usage_is_logged_and_a_token_budget_stops_the_next_turn(tmp_path: Path) -> None:
    sdk("agents")
    from agents import Agent, Runner, Usage, set_tracing_disabled
    from oa_fake import FakeModel
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    from fsm_stage.integrations.openai_agents import StagedModel

    set_tracing_disabled(True)
    host = token_host(tmp_path)

    class Counted(FakeModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            response = await super().get_response(*args, **kwargs)
            response.usage = Usage(requests=1, input_tokens=1200, output_tokens=500,
                                   input_tokens_details=InputTokensDetails(cached_tokens=200,
                                                                           cache_write_tokens=100),
                                   output_tokens_details=OutputTokensDetails(reasoning_tokens=40))
            return response

    agent: Agent[Any] = Agent(name="dev", model=StagedModel(Counted(host, lambda _h: None), host))
    assert asyncio.run(Runner.run(agent, "one")).final_output == "Verified."
    with pytest.raises(RuntimeError, match=STOPPED):
        asyncio.run(Runner.run(agent, "two"))
    assert_counted(host, {**LOGGED_USAGE, "reasoningTokens": 40})


def test_usage_from_totals_keeps_every_input_token_once() -> None:
    from fsm_stage.integrations.convert import usage_from_totals

    assert usage_from_totals(0, 0) is None and usage_from_totals(None, "7") is None
    assert usage_from_totals(100, 5, cache_read=30, cache_write=20, reasoning=2) == {
        "inputTokens": 50, "outputTokens": 5, "cacheReadTokens": 30, "cacheWriteTokens": 20,
        "reasoningTokens": 2}
    # counts that do not add up are clamped, never negative: every input token counted once
    odd = usage_from_totals(10, 1, cache_read=8, cache_write=8)
    assert odd is not None and odd["inputTokens"] >= 0
    assert odd["inputTokens"] + odd.get("cacheReadTokens", 0) + odd.get("cacheWriteTokens", 0) == 10
    assert usage_from_totals(True, -3) is None  # not counts
