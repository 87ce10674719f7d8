"""The MCP server in-process, driven by the SDK's own ``Client`` (modern and legacy eras)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_helpers import GRAPH, approve, events, resource_text, stages, text_of

from fsm_stage.config import load_config
from fsm_stage.mcp.server import StageServer, build_server
from fsm_stage.mcp.sessions import SessionRegistry

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make(tmp_path: Path, **logs: str) -> tuple[StageServer, Path]:
    log = tmp_path / "s.jsonl"
    table = {"default": str(log), **{k: str(tmp_path / v) for k, v in logs.items()}}
    return build_server(SessionRegistry(load_config(GRAPH), table, cwd=tmp_path)), log


async def test_tools_fixed_order_and_schemas(tmp_path: Path) -> None:
    app, _ = make(tmp_path)
    async with Client(app.server) as c:
        before = (await c.list_tools()).tools
    names = [t.name for t in before]
    assert names == ["exit_plan_mode", "get_stage", "goto_stage"]
    goto = before[2].input_schema
    assert goto["required"] == ["stage"] and set(goto["properties"]) == {"stage", "handoff", "session",
                                                                     "context_tokens"}
    assert goto["additionalProperties"] is False
    assert before[0].input_schema["required"] == ["plan"]
    out = before[2].output_schema
    assert out is not None and out["required"] == ["approved", "stage"]
    assert all(t.output_schema is not None for t in before)
    # after a transition the catalog is byte-identical (prompt-cache safe)
    async with Client(app.server, elicitation_callback=approve()) as c:
        await c.call_tool("goto_stage", {"stage": "implement"})
        after = (await c.list_tools()).tools
    assert [t.model_dump() for t in after] == [t.model_dump() for t in before]


async def test_input_required_approve_changes_stage(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    cb = approve()
    async with Client(app.server, elicitation_callback=cb) as c:
        assert c.protocol_version == "2026-07-28"
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status == {"session": "default", "stage": "explore", "pending": None,
                          "planMode": {"active": False}, "openReviews": []}
        r = await c.call_tool("goto_stage", {"stage": "implement"})
        assert not r.is_error and "Current stage: implement" in text_of(r)
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
    assert status["stage"] == "implement" and status["pending"] is None
    assert len(cb.asked) == 1 and "implement" in cb.asked[0].message
    assert stages(log) == ["implement"]
    assert [e["type"] for e in events(log) if e["type"].startswith("tool/")] == ["tool/call", "tool/result"]
    answers = [e["data"] for e in events(log) if e["type"] == "fsm/review/answer"]
    assert [(a["outcome"], a["by"]) for a in answers] == [("approve", "mcp")]
    assert [e["data"]["applied"] for e in events(log) if e["type"] == "fsm/review/redeemed"] == [True]


async def test_keep_with_feedback_and_cancel(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve("Keep current stage", "not yet")) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert r.is_error and "not yet" in text_of(r)
    assert stages(log) == []

    async def cancel(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    async def decline(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with Client(app.server, elicitation_callback=decline) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert r.is_error and "kept the current stage" in text_of(r) and stages(log) == []

    async with Client(app.server, elicitation_callback=cancel) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert r.is_error and "closed the stage review" in text_of(r)
    assert stages(log) == []


async def test_replayed_and_edited_request_state_refused(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        first = await c.session.call_tool("goto_stage", {"stage": "implement"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state and "callId" not in first.request_state  # sealed, opaque
        answer: dict[str, types.InputResponse] = {
            "review": types.ElicitResult(action="accept", content={"decision": "Approve"})}
        # edited arguments: the sealed state is bound to the call's arguments
        with pytest.raises(MCPError):
            await c.session.call_tool("goto_stage", {"stage": "verify"}, input_responses=answer,
                                      request_state=first.request_state, allow_input_required=True)
        before = len(events(log))
        done = await c.session.call_tool("goto_stage", {"stage": "implement"}, input_responses=answer,
                                         request_state=first.request_state, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and not done.is_error
        after = len(events(log))
        assert after > before
        with pytest.raises(MCPError, match="single use"):
            await c.session.call_tool("goto_stage", {"stage": "implement"}, input_responses=answer,
                                      request_state=first.request_state, allow_input_required=True)
        with pytest.raises(MCPError, match="Invalid or expired requestState"):  # not minted here
            await c.session.call_tool("goto_stage", {"stage": "implement"}, input_responses=answer,
                                      request_state="v1.forged", allow_input_required=True)
    assert len(events(log)) == after
    assert stages(log) == ["implement"]


async def test_bad_input_is_an_mcp_error_and_writes_nothing(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"stage": "implement", "session": "nope"}, "unknown session 'nope'"),
            ({"stage": 3}, "must be a string"),
            ({"stage": "implement", "extra": 1}, "unknown argument"),
            ({}, "missing required argument 'stage'"),
            ({"stage": "nowhere"}, "unknown stage 'nowhere'"),
            ({"stage": "implement\ud800"}, "lone surrogate"),
            ({"stage": "implement", "handoff": "# H\udfff"}, "lone surrogate")]
        for args, text in cases:
            with pytest.raises(MCPError, match=text):
                await c.call_tool("goto_stage", args)
        with pytest.raises(MCPError, match="unknown session"):
            await c.call_tool("get_stage", {"session": "nope"})
        with pytest.raises(MCPError, match="unknown resource"):
            await c.read_resource("fsm-stage://session/nope/diagram")
    assert events(log) == []


async def test_legacy_client_uses_elicitation(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    cb = approve()
    async with Client(app.server, mode="legacy", elicitation_callback=cb) as c:
        assert c.protocol_version != "2026-07-28"
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert not r.is_error and len(cb.asked) == 1
    assert stages(log) == ["implement"]
    answers = [e["data"] for e in events(log) if e["type"] == "fsm/review/answer"]
    assert [(a["outcome"], a["by"]) for a in answers] == [("approve", "mcp")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_without_elicitation_gets_review_unavailable(tmp_path: Path, mode: str) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, mode=mode) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert r.is_error and text_of(r).startswith("review unavailable")
    assert events(log) == []


async def test_sessions_by_handle(tmp_path: Path) -> None:
    app, log = make(tmp_path, b="b.jsonl")
    async with Client(app.server, elicitation_callback=approve()) as c:
        await c.call_tool("goto_stage", {"stage": "implement", "session": "b"})
        a = json.loads(text_of(await c.call_tool("get_stage", {})))
        b = json.loads(text_of(await c.call_tool("get_stage", {"session": "b"})))
    assert (a["session"], a["stage"]) == ("default", "explore")
    assert (b["session"], b["stage"]) == ("b", "implement")
    assert stages(tmp_path / "b.jsonl") == ["implement"] and stages(log) == []


async def test_resources_diagram_and_instructions(tmp_path: Path) -> None:
    app, _ = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        uris = [str(r.uri) for r in (await c.list_resources()).resources]
        assert uris == ["fsm-stage://session/default/diagram", "fsm-stage://session/default/instructions"]
        text = resource_text(await c.read_resource(uris[1]))
        assert text.startswith("Current stage: explore")
        await c.call_tool("goto_stage", {"stage": "implement"})
        mermaid = resource_text(await c.read_resource(uris[0]))
        text = resource_text(await c.read_resource(uris[1]))
    assert mermaid.startswith("---") and "stateDiagram-v2" in mermaid
    assert "class implement current" in mermaid.replace("  ", " ") or "current" in mermaid.splitlines()[-1] \
        or any(line.strip().startswith("class ") and "current" in line for line in mermaid.splitlines())
    assert text == "Current stage: implement\n\nImplement the approved plan."


async def test_exit_plan_mode_reviewed_over_mcp(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        r = await c.call_tool("exit_plan_mode", {"plan": "# Plan\n\nDo it."})
        assert r.is_error and "plan mode" in text_of(r).lower()  # not in plan mode: refused
        ms = app.registry.get(None)
        assert ms.plan is not None
        ms.plan.set(ms.agent, True)  # the user's /plan, applied at a boundary
        ms.runtime.pre_step(ms.agent, [])
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["planMode"]["active"] is True
        cb = approve()
    async with Client(app.server, elicitation_callback=cb) as c:
        r = await c.call_tool("exit_plan_mode", {"plan": "# Plan\n\nDo it."})
        assert not r.is_error, text_of(r)
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
    assert status["planMode"]["active"] is False
    assert cb.asked and "# Plan" in cb.asked[0].message
    assert [e["data"]["active"] for e in events(log) if e["type"] == "plan/mode"] == [True, False]


async def test_an_edited_handoff_document_closes_the_review_with_a_clear_result(tmp_path: Path) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text("name: g\nsection: 'Move on with goto_stage: << stage_targets >>'\nstages:\n"
                     "  - {name: explore, instruction: Look.}\n  - {name: implement, instruction: Build.}\n",
                     encoding="utf-8")
    log = tmp_path / "s.jsonl"
    app = build_server(SessionRegistry(load_config(graph), {"default": str(log)}, cwd=tmp_path))

    async def edit_then_approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        for doc in tmp_path.rglob("implement.md"):
            doc.write_text("# Handoff\nedited behind the reviewer's back", encoding="utf-8")
        return types.ElicitResult(action="accept", content={"decision": "Approve"})

    async with Client(app.server, elicitation_callback=edit_then_approve) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement", "handoff": "# Handoff\nwhat was done"})
        assert r.is_error and "changed" in text_of(r), text_of(r)
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
    assert status["stage"] == "explore" and status["openReviews"] == []
    answers = [e["data"]["outcome"] for e in events(log) if e["type"] == "fsm/review/answer"]
    assert answers == ["keep"]


async def test_instructions_of_a_stage_the_served_graph_does_not_have(tmp_path: Path) -> None:
    """A log whose current stage the served graph no longer has (renamed since): the
    instructions resource says so instead of failing with an internal error."""
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        await c.call_tool("goto_stage", {"stage": "implement"})
    app.registry.close()
    assert stages(log)[-1] == "implement"
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(GRAPH.read_text(encoding="utf-8").replace("implement", "build"), encoding="utf-8")
    again = build_server(SessionRegistry(load_config(renamed), {"default": str(log)}, cwd=tmp_path))
    async with Client(again.server, elicitation_callback=approve()) as c:
        text = resource_text(await c.read_resource("fsm-stage://session/default/instructions"))
    assert text.startswith("Current stage: implement\n\n")
    assert "has no stage `implement`: this session was recorded under another graph" in text


async def test_a_call_that_failed_after_its_review_was_asked_closes_the_review(tmp_path: Path) -> None:
    """A second round of an open goto_stage whose switch changed shape (``context_tokens`` grew
    past the graph's threshold, so the payload no longer matches) tells the model the call
    failed: its review is closed with it (``call-closed``), so it neither blocks every later
    goto_stage nor can a late approval move the session the model was told did not move."""
    args = {"stage": "implement", "handoff": "# Handoff\nDo X."}
    app, log = make(tmp_path)
    async with Client(app.server, elicitation_callback=approve()) as c:
        first = await c.session.call_tool("goto_stage", {**args, "context_tokens": 3900},
                                          allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
    app.registry.close()
    app, _ = make(tmp_path)  # the server restarted; the context grew past 4,000 tokens
    async with Client(app.server, mode="legacy", elicitation_callback=approve()) as c:
        failed = await c.call_tool("goto_stage", {**args, "context_tokens": 4100})
        assert failed.is_error and "changed since the review was asked" in text_of(failed)
        status = json.loads(text_of(await c.call_tool("get_stage", {})))
        assert status["openReviews"] == [] and status["stage"] == "explore"
    from fsm_stage.log.dsh import read_log
    from fsm_stage.reviews import REVIEW_FOLD

    state = REVIEW_FOLD.init()
    for ev in read_log(log).events:
        state = REVIEW_FOLD.apply(state, ev)
    (rid,) = state.records
    assert state.redeemed[rid].reason == "call-closed" and not state.open
    async with Client(app.server, mode="legacy", elicitation_callback=approve()) as c:
        again = await c.call_tool("goto_stage", args)  # asked anew, not "a stage review is already open"
    app.registry.close()
    assert not again.is_error and stages(log) == ["implement"]
