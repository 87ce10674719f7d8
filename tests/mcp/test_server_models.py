"""``get_stage`` reports the stage's model choice and its budget spend (issue 29): the graph's
model, alias, reasoning effort and settings of the next request, and each budget in force with
the current visit's spend folded from the log; graphs without model keys report neither."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.client import Client
from mcp_helpers import ROOT, approve, text_of

from fsm_stage.config import load_config
from fsm_stage.mcp.server import GET_STAGE_OUTPUT, StageServer, build_server
from fsm_stage.mcp.sessions import SessionRegistry

pytestmark = pytest.mark.anyio
GRAPH = ROOT / "stage_graphs" / "model-per-stage.yaml"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make(tmp_path: Path) -> StageServer:
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
