"""Observability: ``fsm_stage.*`` log records, OpenTelemetry spans, a session rebuilt as one trace.

Every committed event is described once (``describe``: ``Observation``s with a name, logger,
level and structured fields); ``Session`` appends call ``appended`` (the live seam: log records,
and span events and review spans when ``opentelemetry.trace`` is loaded); ``build_trace``
rebuilds a whole session log as one trace with ids derived from the session id. Nothing here
imports OpenTelemetry: the live part uses it only when the host already loaded it, and the OTLP
export (``fsm_stage.observe.otlp``) imports ``opentelemetry-proto`` only when it is asked to
post protobuf. docs/observability.md lists the names.
"""

from __future__ import annotations

from fsm_stage.observe._attributes import (
    ATTRIBUTES,
    REVIEW_SPAN,
    SESSION_SPAN,
    STEP_BOUNDARY_SPAN,
    STEP_SPAN,
    TURN_SPAN,
    span_attributes,
)
from fsm_stage.observe._describe import LOGGERS, Observation, ScanContext, describe
from fsm_stage.observe._live import add_listener, appended, boundary, tag_request
from fsm_stage.observe._trace import Span, SpanEvent, Trace, build_trace, span_id, trace_id

__all__ = [
    "ATTRIBUTES",
    "LOGGERS",
    "REVIEW_SPAN",
    "SESSION_SPAN",
    "STEP_BOUNDARY_SPAN",
    "STEP_SPAN",
    "TURN_SPAN",
    "Observation",
    "ScanContext",
    "Span",
    "SpanEvent",
    "Trace",
    "add_listener",
    "appended",
    "boundary",
    "build_trace",
    "describe",
    "span_attributes",
    "span_id",
    "tag_request",
    "trace_id",
]
