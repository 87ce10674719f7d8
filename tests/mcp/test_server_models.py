"""``get_stage`` reports the stage's model choice and its budget spend (issue 29): the graph's
model, alias, reasoning effort and settings of the next request, and each budget in force with
the current visit's spend folded from the log; graphs without model keys report neither."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mcp.client import Client
from mcp_helpers import ROOT, approve, text_of

from fsm_stage import ModelReply, SessionHeader, open_log, open_session
from fsm_stage.config import load_config
from fsm_stage.driver import Loop, ScriptedModel
from fsm_stage.mcp.server import GET_STAGE_OUTPUT, StageServer, build_server
from fsm_stage.mcp.sessions import SessionRegistry
from fsm_stage.reviews import ScriptedReviewChannel

pytestmark = pytest.mark.anyio
GRAPH = ROOT / "stage_graphs" / "model-per-stage.yaml"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make(tmp_path: Path) -> StageServer:
    """A server over ``tmp_path/s.jsonl`` (created or reopened) with the model-per-stage graph."""
    return build_server(SessionRegistry(load_config(GRAPH), {"default": str(tmp_path / "s.jsonl")},
                                        cwd=tmp_path))


async def test_get_stage_reports_each_stage_model_and_budget(tmp_path: Path) -> None:
    app = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["get_stage"].output_schema == GET_STAGE_OUTPUT
        design = await c.call_tool("get_stage", {})
        r = await c.call_tool("goto_stage", {"stage": "implement", "handoff": "# Handoff\nBuild it."})
        assert not r.is_error, text_of(r)
        implement = await c.call_tool("get_stage", {})
    status = json.loads(text_of(design))
    assert design.structured_content == status
    assert status["stage"] == "design"
    assert status["model"] == {"model": "openai:o3", "alias": "thinker", "reasoningEffort": "high",
                               "source": "stage:design"}
    assert "budgets" not in status  # design declares no budget
    status = json.loads(text_of(implement))
    assert status["stage"] == "implement"
    assert status["model"] == {"model": "openai:gpt-5-mini", "alias": "fast",
                               "settings": {"temperature": 0.2}, "source": "stage:implement"}
    assert status["budgets"] == [{
        "scope": "stage", "label": "implement", "limits": {"tokens_out": 200000, "steps": 60},
        "onBudget": "stop", "spent": {"tokens_in": 0, "tokens_out": 0, "turns": 0, "steps": 0}}]


async def test_get_stage_reports_plan_mode_choice_while_it_is_on(tmp_path: Path) -> None:
    app = make(tmp_path)
    ms = next(iter(app.registry))
    assert ms.plan is not None
    ms.plan.set(ms.agent, True)
    async with Client(app.server) as c:
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
    assert status["planMode"]["active"] is True
    assert status["model"] == {"model": "openai:o3", "alias": "thinker", "reasoningEffort": "high",
                               "source": "stage:design+plan_mode"}


def test_get_stage_spend_is_folded_from_a_log_another_process_wrote(tmp_path: Path) -> None:
    # a reference loop runs design (o3) → implement (mini, 5 tokens in / 7 out) and exits
    log = open_log(tmp_path / "s.jsonl", create=SessionHeader("s", cwd=str(tmp_path)))
    host = open_session(load_config(GRAPH), log, review=ScriptedReviewChannel().approve(), plan_mode=False,
                        guidance=False, repair=False)
    o3 = ScriptedModel([ModelReply.call("goto_stage", {"stage": "implement", "handoff": "# Handoff\nGo."})],
                       provider="openai", name="o3")
    mini = ScriptedModel([ModelReply("built", usage={"inputTokens": 5, "outputTokens": 7})],
                         provider="openai", name="gpt-5-mini")
    asyncio.run(Loop(host.runtime, host.agent, o3, models={"fast": mini}).prompt("go"))
    log.close()

    async def read() -> dict[str, object]:
        async with Client(make(tmp_path).server) as c:
            return dict(json.loads(text_of(await c.call_tool("get_stage", {}))))

    status = asyncio.run(read())
    assert status["stage"] == "implement"
    assert status["budgets"] == [{
        "scope": "stage", "label": "implement", "limits": {"tokens_out": 200000, "steps": 60},
        "onBudget": "stop", "spent": {"tokens_in": 5, "tokens_out": 7, "turns": 1, "steps": 1}}]
