"""A legacy (2025-11-25) client answers the review by elicitation during the call: the
``tool/call`` and the ``fsm/review/request`` are logged before the form is sent (``get_stage``
shows the open review while the human thinks, a restart finds it), a disconnect is a dismissal
by ``mcp``, and the form and argument messages read right."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_helpers import GRAPH, events

from fsm_stage.config import load_config
from fsm_stage.mcp.review import review_form
from fsm_stage.mcp.server import StageServer, build_server
from fsm_stage.mcp.sessions import SessionRegistry

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make(tmp_path: Path) -> tuple[StageServer, Path]:
    log = tmp_path / "s.jsonl"
    return build_server(SessionRegistry(load_config(GRAPH), {"default": str(log)}, cwd=tmp_path)), log


async def test_the_call_and_the_review_request_are_logged_before_the_form_is_sent(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    during: list[Any] = []

    async def callback(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        during.append([e["type"] for e in events(log)])
        during.append(app.status(next(iter(app.registry)))["openReviews"])
        return types.ElicitResult(action="accept", content={"decision": "Approve"})

    async with Client(app.server, mode="legacy", elicitation_callback=callback) as c:
        assert c.protocol_version == "2025-11-25"
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert not r.is_error
    types_then, open_then = during
    assert types_then[0] == "tool/call" and "fsm/review/request" in types_then
    assert [(o["callId"].startswith("call_mcp_"), o["kind"]) for o in open_then] == [(True, "stage")]


async def test_a_disconnect_during_the_review_is_a_dismissal_by_mcp(tmp_path: Path) -> None:
    app, log = make(tmp_path)

    async def callback(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")

    async with Client(app.server, mode="legacy", elicitation_callback=callback) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert r.is_error and "Connection closed" not in r.content[0].text
    evs = events(log)
    answers = [e["data"] for e in evs if e["type"] == "fsm/review/answer"]
    assert [(a["outcome"], a["by"]) for a in answers] == [("dismiss", "mcp")]
    results = [e for e in evs if e["type"] == "tool/result"]
    assert len(results) == 1 and "Connection closed" not in str(results[0]["data"])


def test_the_review_form_reads_as_sentences() -> None:
    from fsm_stage.prompts import load_catalog
    from fsm_stage.stage_switch import build_review_question
    from fsm_stage.stage_switch.controller import CATALOG_NAME

    for handoff in ("# plan", None):
        q = build_review_question(load_catalog(CATALOG_NAME, "en", None), "implement", handoff)
        text = review_form(q)["properties"]["decision"]["description"]
        assert ".;" not in text and ";;" not in text and text.endswith(".")
        assert "Keep current stage: Stay in the current stage" in text


async def test_an_unknown_argument_lists_session_among_the_expected(tmp_path: Path) -> None:
    app, _ = make(tmp_path)
    async with Client(app.server, mode="legacy") as c:
        with pytest.raises(MCPError, match=r"unknown argument\(s\) x; expected: stage, handoff, session"):
            await c.call_tool("goto_stage", {"stage": "implement", "x": 1})


def _batches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The event types of every write to a ``JsonlLog`` from now on (one list per batch)."""
    from fsm_stage.log.jsonl import JsonlLog

    seen: list[list[str]] = []
    original = JsonlLog.append_many

    def recording(self: JsonlLog, specs: Any, **kw: Any) -> Any:
        out = original(self, specs, **kw)
        seen.append([e.type for e in out])
        return out

    monkeypatch.setattr(JsonlLog, "append_many", recording)
    return seen


async def test_the_call_is_logged_in_one_write_with_its_review_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, log = make(tmp_path)
    batches = _batches(monkeypatch)
    async with Client(app.server, mode="legacy", elicitation_callback=lambda ctx, p: _accept()) as c:
        r = await c.call_tool("goto_stage", {"stage": "implement"})
    assert not r.is_error
    first = next(b for b in batches if "tool/call" in b)
    assert first[0] == "tool/call" and first[-1] == "fsm/review/request"
    written = events(log)
    call = next(e for e in written if e["type"] == "tool/call")
    result = next(e for e in written if e["type"] == "tool/result")
    assert result["sourceEventSeqs"] == [call["seq"]]
    assert sum(e["type"] == "tool/call" for e in written) == 1


async def test_a_call_refused_before_its_review_is_logged_before_its_result(tmp_path: Path) -> None:
    app, log = make(tmp_path)
    async with Client(app.server, mode="legacy", elicitation_callback=lambda ctx, p: _accept()) as c:
        r = await c.call_tool("goto_stage", {"stage": "explore"})  # the current stage
    assert r.is_error
    written = [e for e in events(log) if e["type"].startswith("tool/")]
    assert [e["type"] for e in written] == ["tool/call", "tool/result"]
    assert written[1]["sourceEventSeqs"] == [written[0]["seq"]]


async def _accept() -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"decision": "Approve"})
