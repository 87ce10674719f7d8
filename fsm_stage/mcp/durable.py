"""The MCP server's seam to durable reviews (design B §3/§4), kept small on purpose.

With the durable-review API present (``fsm_stage.reviews._answer``: ``open_reviews``,
``answer_review``), an ``input_required`` answer is recorded with ``answer_review(..., by="mcp")``
before the suspended call is resumed, and ``get_stage`` lists the open ``fsm/review/request``s.
Without it (older trees), the answer reaches the controller through the review channel and the
open reviews are the reviewed tool calls that have no ``tool/result`` yet.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from fsm_stage.constants import EXIT_PLAN_MODE, GOTO_STAGE, TOOL_CALL, TOOL_RESULT
from fsm_stage.mcp.sessions import McpSession

__all__ = ["open_reviews", "record_answer", "reviews_api"]


def reviews_api() -> Any | None:
    """``fsm_stage.reviews._answer`` when the durable-review API is installed, else None."""
    try:
        module = importlib.import_module("fsm_stage.reviews._answer")
    except ImportError:
        return None
    return module if hasattr(module, "answer_review") and hasattr(module, "open_reviews") else None


def open_reviews(ms: McpSession) -> list[dict[str, Any]]:
    """The session's open reviews as JSON: ``{id?, callId, kind, target?}``."""
    api = reviews_api()
    if api is not None:
        return [{"id": r.id, "callId": r.call_id, "kind": r.kind, "target": r.target}
                for r in api.open_reviews(ms.session)]
    settled: set[str] = set()
    out: list[dict[str, Any]] = []
    for ev in ms.session.events:
        data = ev.data if isinstance(ev.data, Mapping) else {}
        if ev.type == TOOL_RESULT:
            source = (data.get("message") or {}).get("source") or {}
            if isinstance(source, Mapping) and isinstance(source.get("callId"), str):
                settled.add(source["callId"])
        elif ev.type == TOOL_CALL and data.get("name") in (GOTO_STAGE, EXIT_PLAN_MODE):
            kind = "stage" if data.get("name") == GOTO_STAGE else "plan"
            out.append({"callId": data.get("callId"), "kind": kind})
    return [r for r in out if r["callId"] not in settled]


def record_answer(ms: McpSession, call_id: str, action: str, content: Mapping[str, Any] | None) -> bool:
    """Log the client's answer to the open review of ``call_id`` (``by: "mcp"``); False when the
    durable API is absent or no review of that call is open (the channel answers instead).
    Raises the API's ``ReviewError``s (answered already, payload changed)."""
    api = reviews_api()
    if api is None:
        return False
    record = next((r for r in api.open_reviews(ms.session) if r.call_id == call_id), None)
    if record is None:
        return False
    if action == "cancel":
        api.answer_review(ms.session, record.id, "dismiss", by="mcp")
        return True
    decision = content.get("decision") if content is not None and action == "accept" else None
    feedback = content.get("feedback") if content is not None else None
    feedback = feedback.strip() or None if isinstance(feedback, str) else None
    if isinstance(decision, str) and decision in record.options[:-1]:
        api.answer_review(ms.session, record.id, "approve", option=decision, by="mcp")
    else:
        api.answer_review(ms.session, record.id, "keep", feedback=feedback, by="mcp")
    return True
