"""Span, span-event and attribute names (OpenTelemetry GenAI conventions where they exist).

``span_attributes(fields)`` maps an ``Observation``'s fields to attribute names: the GenAI
semantic conventions' ``gen_ai.*`` names where one exists (``gen_ai.conversation.id``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.operation.name``), fsm_stage's own
``fsm_stage.*`` namespace elsewhere. Spans fsm_stage starts carry ``gen_ai.conversation.id``
(the session id); a host's spans get only ``fsm_stage.*`` attributes, never a ``gen_ai.*``
one overwritten. docs/observability.md has the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ATTRIBUTES", "REVIEW_SPAN", "SESSION_SPAN", "STEP_BOUNDARY_SPAN", "STEP_SPAN", "TURN_SPAN",
           "span_attributes", "span_event_name"]

SESSION_SPAN: Final = "fsm_stage.session"
TURN_SPAN: Final = "fsm_stage.turn"
STEP_SPAN: Final = "fsm_stage.step"
STEP_BOUNDARY_SPAN: Final = "fsm_stage.step.boundary"
REVIEW_SPAN: Final = "fsm_stage.review"

#: observation field -> attribute name (fields not listed here are not exported).
ATTRIBUTES: Final[Mapping[str, str]] = {
    "session": "fsm_stage.session.id",
    "conversation": "gen_ai.conversation.id",
    "tool": "gen_ai.tool.name",
    "call_id": "gen_ai.tool.call.id",
    "operation": "gen_ai.operation.name",
    "seq": "fsm_stage.event.seq",
    "event_type": "fsm_stage.event.type",
    "turn": "fsm_stage.turn",
    "step": "fsm_stage.step",
    "stage": "fsm_stage.stage",
    "plan_mode": "fsm_stage.plan_mode",
    "review_id": "fsm_stage.review.id",
    "kind": "fsm_stage.review.kind",
    "from_stage": "fsm_stage.transition.from",
    "to_stage": "fsm_stage.transition.to",
    "outcome": "fsm_stage.review.outcome",
    "reviewer": "fsm_stage.review.reviewer",
    "option": "fsm_stage.review.option",
    "wait_seconds": "fsm_stage.review.wait_seconds",
    "payload_sha256": "fsm_stage.review.payload_sha256",
    "applied": "fsm_stage.review.applied",
    "reason": "fsm_stage.reason",
    "rule": "fsm_stage.policy.rule",
    "graph": "fsm_stage.graph.name",
    "fingerprint": "fsm_stage.graph.fingerprint",
    "command": "fsm_stage.command",
    "resumes": "fsm_stage.session.resumes",
    "open": "fsm_stage.open",
    "reviewers": "fsm_stage.review.reviewers",
    "request_model": "gen_ai.request.model",
    "response_model": "gen_ai.response.model",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
}


def span_attributes(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` as span attributes (``ATTRIBUTES`` names; None values and unknown keys dropped;
    every value a str, bool, int or float as OpenTelemetry requires, anything else as its str)."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        name = ATTRIBUTES.get(key)
        if name is None or value is None:
            continue
        out[name] = value if isinstance(value, str | bool | int | float) else str(value)
    return out


def span_event_name(observation: str) -> str:
    """The span-event name of an observation name (``transition.applied`` →
    ``fsm_stage.transition.applied``)."""
    return "fsm_stage." + observation
