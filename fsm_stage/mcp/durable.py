"""The MCP server's seam to durable reviews (docs/reviews.md), kept small on purpose.

A client's answer is recorded before the reviewed call goes on: ``answer_review(..., by="mcp")``
for an unnamed reviewer, ``vote_review(..., reviewer=NAME, by="mcp")`` when the server answers as
an authenticated reviewer (``fsm-stage mcp --as NAME``), so the review's logged rules (approvers,
quorum, not_requester, deadline) decide exactly as for the API and the CLI; an approval may carry
the reviewer's edited document (the form's ``edited`` field), recorded by the same call.
``get_stage`` lists the open ``fsm/review/request``s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from fsm_stage.mcp.sessions import McpSession
from fsm_stage.reviews import Reviewers, VoteResult, answer_review, vote_review
from fsm_stage.reviews import open_reviews as _open_reviews

__all__ = ["McpReviewer", "is_open", "open_reviews", "record_answer"]


@attrs.frozen
class McpReviewer:
    """Who answers the reviews of this server: the authenticated reviewer ``name`` and the
    ``reviewers`` file that resolves ``@group`` approvers (``fsm-stage mcp --as NAME``)."""

    name: str
    reviewers: Reviewers


def open_reviews(ms: McpSession) -> list[dict[str, Any]]:
    """The session's open reviews as JSON: ``{id, callId, kind, target}``."""
    return [{"id": r.id, "callId": r.call_id, "kind": r.kind, "target": r.target}
            for r in _open_reviews(ms.session)]


def open_of(ms: McpSession, call_id: str) -> list[Any]:
    """The open reviews of tool call ``call_id`` (``ReviewRecord``s; at most one unless a
    racing writer logged two)."""
    return [r for r in _open_reviews(ms.session) if r.call_id == call_id]


def is_open(ms: McpSession, review_id: str | None) -> bool:
    """Whether review ``review_id`` is still open (asked, not answered nor closed)."""
    return any(r.id == review_id for r in _open_reviews(ms.session))


def _edited(content: Mapping[str, Any] | None) -> str | None:
    """The form's ``edited`` document (None when absent or left empty)."""
    value = content.get("edited") if content is not None else None
    return value if isinstance(value, str) and value.strip() else None


def record_answer(ms: McpSession, call_id: str, action: str, content: Mapping[str, Any] | None,
                  reviewer: McpReviewer | None = None) -> VoteResult | None:
    """Log the client's answer to the open review of ``call_id`` (``by: "mcp"``; as ``reviewer``
    when given, through ``vote_review``); None when no review of that call is open (the channel
    answers instead). Returns the ``VoteResult`` (its ``answer`` None while a quorum is not
    reached). Raises the ``ReviewError``s of ``answer_review`` / ``vote_review`` (answered already,
    payload changed, ``ReviewRefusedError`` when the rules refuse) and ``RecordShapeError`` for
    edits that cannot apply; a refusal writes nothing (an expiry excepted: it is logged)."""
    record = next((r for r in _open_reviews(ms.session) if r.call_id == call_id), None)
    if record is None:
        return None
    feedback = content.get("feedback") if content is not None else None
    feedback = feedback.strip() or None if isinstance(feedback, str) else None
    decision = content.get("decision") if content is not None and action == "accept" else None
    option: str | None = None
    edited: str | None = None
    if action == "cancel":
        outcome, feedback = "dismiss", None
    elif isinstance(decision, str) and decision in record.options[:-1]:
        outcome, option, feedback, edited = "approve", decision, None, _edited(content)
    else:
        outcome = "keep"
    if reviewer is None:
        return VoteResult(answer_review(ms.session, record.id, outcome, feedback=feedback, option=option,
                                        by="mcp", edited=edited))
    return vote_review(ms.session, record.id, outcome, reviewer=reviewer.name, reviewers=reviewer.reviewers,
                       feedback=feedback, option=option, by="mcp", edited=edited)
