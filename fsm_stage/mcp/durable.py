"""The MCP server's seam to durable reviews (docs/reviews.md), kept small on purpose.

An ``input_required`` answer is recorded with ``answer_review(..., by="mcp")`` before the
suspended call is resumed, and ``get_stage`` lists the open ``fsm/review/request``s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fsm_stage.mcp.sessions import McpSession
from fsm_stage.reviews import answer_review
from fsm_stage.reviews import open_reviews as _open_reviews

__all__ = ["open_reviews", "record_answer"]


def open_reviews(ms: McpSession) -> list[dict[str, Any]]:
    """The session's open reviews as JSON: ``{id, callId, kind, target}``."""
    return [{"id": r.id, "callId": r.call_id, "kind": r.kind, "target": r.target}
            for r in _open_reviews(ms.session)]


def record_answer(ms: McpSession, call_id: str, action: str, content: Mapping[str, Any] | None) -> bool:
    """Log the client's answer to the open review of ``call_id`` (``by: "mcp"``); False when no
    review of that call is open (the channel answers instead). Raises the ``ReviewError``s of
    ``answer_review`` (answered already, payload changed)."""
    record = next((r for r in _open_reviews(ms.session) if r.call_id == call_id), None)
    if record is None:
        return False
    if action == "cancel":
        answer_review(ms.session, record.id, "dismiss", by="mcp")
        return True
    decision = content.get("decision") if content is not None and action == "accept" else None
    feedback = content.get("feedback") if content is not None else None
    feedback = feedback.strip() or None if isinstance(feedback, str) else None
    if isinstance(decision, str) and decision in record.options[:-1]:
        answer_review(ms.session, record.id, "approve", option=decision, by="mcp")
    else:
        answer_review(ms.session, record.id, "keep", feedback=feedback, by="mcp")
    return True
