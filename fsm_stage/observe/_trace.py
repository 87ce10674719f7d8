"""A whole session log as one trace: ids derived from the session id, times from the events.

``build_trace(header, events)`` walks the log once and returns a ``Trace``: a root span for the
session, one span per turn, step, tool call and review (from its request to its answer, so the
wait is the span), and span events for transitions, refusals, asks, redemptions, repairs and
resumes — however many processes wrote the log. The same log always gives the same ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from fsm_stage.constants import (
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    REVIEW_ANSWER,
    REVIEW_EXPIRED_BY,
    REVIEW_REDEEMED,
    REVIEW_REQUEST,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
)
from fsm_stage.log.events import Event, SessionHeader
from fsm_stage.log.projections.plan import PlanModeFold
from fsm_stage.log.projections.stage import StageFold
from fsm_stage.observe._attributes import (
    REVIEW_SPAN,
    SESSION_SPAN,
    STEP_SPAN,
    TURN_SPAN,
    span_attributes,
    span_event_name,
)
from fsm_stage.observe._describe import describe

__all__ = ["Span", "SpanEvent", "Trace", "build_trace", "span_id", "trace_id"]

_MS: Final = 1_000_000
#: observations that become span events in a rebuilt trace (the others are spans, or DEBUG detail)
_EVENTS: Final = frozenset({"transition.applied", "tool.refused", "tool.asked", "review.redeemed",
                            "repair", "graph.changed"})


def trace_id(session_id: str) -> str:
    """The trace id of ``session_id``'s trace: 32 hex digits of sha256 (never all zero)."""
    digest = hashlib.sha256(b"fsm_stage trace\0" + session_id.encode("utf-8")).hexdigest()[:32]
    return digest if int(digest, 16) else "1".rjust(32, "0")


def span_id(session_id: str, key: str) -> str:
    """The span id of ``key`` (``session``, ``turn/<seq>``…) in ``session_id``'s trace: 16 hex digits."""
    digest = hashlib.sha256(b"fsm_stage span\0" + session_id.encode("utf-8") + b"\0"
                            + key.encode("utf-8")).hexdigest()[:16]
    return digest if int(digest, 16) else "1".rjust(16, "0")


@attrs.frozen
class SpanEvent:
    """A span event: ``name``, ``time_ns`` (epoch nanoseconds), ``attributes``."""

    name: str
    time_ns: int
    attributes: Mapping[str, Any]


@attrs.define
class Span:
    """One rebuilt span: hex ``span_id``/``parent_id`` (None for the root), epoch-ns times,
    ``attributes`` (OpenTelemetry names), ``events``, ``error`` (a status message, None = unset)."""

    name: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[SpanEvent] = attrs.field(factory=list)
    error: str | None = None
    closed: bool = attrs.field(default=False, repr=False)


@attrs.frozen
class Trace:
    """``trace_id`` (hex) and ``spans`` (root first, then in the order they started)."""

    session_id: str
    trace_id: str
    spans: tuple[Span, ...]


class _Walk:
    """The forward walk: open spans, the folded stage and plan mode, the reviews asked so far."""

    def __init__(self, header: SessionHeader, start_ms: int) -> None:
        self.sid = header.id
        self.spans: list[Span] = []
        self.root = self.open(SESSION_SPAN, "session", None, start_ms, {"session": self.sid,
                                                                        "conversation": self.sid})
        self.turn: Span | None = None
        self.step: Span | None = None
        self.tools: dict[str, Span] = {}
        self.tool_by_seq: dict[int, Span] = {}
        self.reviews: dict[str, Span] = {}
        self.requests: dict[str, Event] = {}
        self.declined: dict[str, str] = {}  # tool span id -> the outcome of its review, not an approval
        self.model: str | None = None  # provider:model of the last request/header
        self.stage: str | None = None
        self.plan = False
        self.resumes = 0
        self.stage_fold, self.plan_fold = StageFold(), PlanModeFold()

    # the describe ``Context``: what the walk has seen before the event
    def request(self, review_id: str, before: int) -> Event | None:
        return self.requests.get(review_id)

    def stage_before(self, seq: int) -> str | None:
        return self.stage

    def open(self, name: str, key: str, parent: Span | None, start_ms: int,
             fields: Mapping[str, Any]) -> Span:
        span = Span(name, span_id(self.sid, key), None if parent is None else parent.span_id,
                    start_ms * _MS, start_ms * _MS, span_attributes(fields))
        self.spans.append(span)
        return span

    def inner(self) -> Span:
        return self.step or self.turn or self.root


def _close(span: Span, time_ms: int) -> None:
    span.end_ns = max(span.start_ns, time_ms * _MS)
    span.closed = True


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _result_call(ev: Event, d: Mapping[str, Any], walk: _Walk) -> Span | None:
    for seq in ev.source_event_seqs or ():
        if seq in walk.tool_by_seq:
            return walk.tool_by_seq.pop(seq)
    message = d.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and isinstance(block.get("toolCallId"), str):
            return walk.tools.pop(block["toolCallId"], None)
    return None


def _result_error(d: Mapping[str, Any]) -> bool:
    message = d.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return any(isinstance(b, Mapping) and b.get("isError") is True for b in content or ()) \
        if isinstance(content, list) else False


def _structure(ev: Event, d: Mapping[str, Any], walk: _Walk) -> None:
    """Open and close the turn, step, tool and review spans ``ev`` starts or ends."""
    t, ms = ev.type, ev.time
    if t == TURN_START:
        walk.turn = walk.open(TURN_SPAN, f"turn/{ev.seq}", walk.root, ms, {"turn": _int(d.get("turn"))})
        walk.step = None
    elif t == TURN_END and walk.turn is not None:
        for span in (walk.step, walk.turn):
            if span is not None:
                _close(span, ms)
        reason = d.get("reason")
        kind = reason.get("kind") if isinstance(reason, Mapping) else reason
        if isinstance(kind, str):
            walk.turn.attributes.update(span_attributes({"reason": kind}))
            if kind in ("error", "interrupted"):
                walk.turn.error = f"turn ended: {kind}"
        walk.turn = walk.step = None
    elif t == STEP_START:
        walk.step = walk.open(STEP_SPAN, f"step/{ev.seq}", walk.turn or walk.root, ms,
                              {"turn": _int(d.get("turn")), "step": _int(d.get("step")),
                               "stage": walk.stage, "plan_mode": walk.plan, "request_model": walk.model})
    elif t == STEP_END and walk.step is not None:
        _close(walk.step, ms)
        walk.step = None
    elif t == TOOL_CALL:
        name, call_id = d.get("name"), d.get("callId")
        span = walk.open(f"execute_tool {name}", f"tool/{ev.seq}", walk.inner(), ms,
                         {"operation": "execute_tool", "tool": name, "call_id": call_id})
        walk.tool_by_seq[ev.seq] = span
        if isinstance(call_id, str):
            walk.tools[call_id] = span
    elif t == TOOL_RESULT:
        span = _result_call(ev, d, walk)
        if span is not None:
            _close(span, ms)
            declined = walk.declined.pop(span.span_id, None)
            if declined is not None:  # a person's (or the deadline's) decision, not a failure
                span.attributes.update(span_attributes({"outcome": declined}))
            elif _result_error(d):
                span.error = "tool error"
    elif t == REQUEST_HEADER:
        _header(d, walk)
        if d.get("reason") == "resume":
            walk.resumes += 1
            walk.inner().events.append(SpanEvent("fsm_stage.session.resumed", ms * _MS, {}))
    elif t == ASSISTANT_MESSAGE and walk.step is not None:
        walk.step.attributes.update(span_attributes(_reply_fields(d)))


def _header(d: Mapping[str, Any], walk: _Walk) -> None:
    """The model a ``request/header`` names (``provider:model``) on the open step, and on later
    steps until another header changes it."""
    header = d.get("header")
    config = header.get("config") if isinstance(header, Mapping) else None
    if not isinstance(config, Mapping):
        return
    model = config.get("model")
    walk.model = _qualified(config.get("provider"), model) if isinstance(model, str) and model else None
    if walk.step is not None:  # a header naming no model (the host's default) names none here
        walk.step.attributes.pop("gen_ai.request.model", None)
        walk.step.attributes.update(span_attributes({"request_model": walk.model}))


def _qualified(provider: object, model: str) -> str:
    """``provider:model`` (``model`` alone when it is qualified already or has no provider)."""
    return model if ":" in model or not isinstance(provider, str) or not provider else f"{provider}:{model}"


def _reply_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    """The answering model and its token usage of an ``assistant/message`` (GenAI names: input
    tokens count cache reads and writes too)."""
    message = d.get("message")
    source = message.get("source") if isinstance(message, Mapping) else None
    usage = d.get("usage")
    out: dict[str, Any] = {}
    if isinstance(source, Mapping) and isinstance(source.get("model"), str):
        out["response_model"] = _qualified(source.get("provider"), source["model"])
    if isinstance(usage, Mapping):
        counts = [_count(usage.get(k)) for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens")]
        if any(c is not None for c in counts):
            out["input_tokens"] = _count(sum(c or 0 for c in counts))
        out["output_tokens"] = _count(usage.get("outputTokens"))
    return out


def _count(v: Any) -> int | None:
    """A token count an OpenTelemetry int attribute carries (0 … 2**63 - 1), else None."""
    n = _int(v)
    return n if n is not None and 0 <= n < 2 ** 63 else None


def _review(ev: Event, d: Mapping[str, Any], walk: _Walk, observed: Mapping[str, Any] | None) -> None:
    rid = d.get("id")
    if not isinstance(rid, str):
        return
    if ev.type == REVIEW_REQUEST and rid not in walk.reviews:
        walk.requests[rid] = ev
        walk.reviews[rid] = walk.open(REVIEW_SPAN, f"review/{rid}", walk.inner(), ev.time,
                                      {"conversation": walk.sid, "review_id": rid, "kind": d.get("kind"),
                                       "from_stage": d.get("from"), "to_stage": d.get("target"),
                                       "payload_sha256": d.get("payloadSha256"), "call_id": d.get("callId"),
                                       "turn": _int(d.get("turn")), "step": _int(d.get("step"))})
    elif ev.type == REVIEW_ANSWER and rid in walk.reviews and observed is not None:
        span = walk.reviews[rid]
        if span.closed:
            return  # the first answer wins, as in the review fold
        _close(span, ev.time)
        span.attributes.update(span_attributes({k: observed.get(k) for k in
                                                ("outcome", "reviewer", "option", "wait_seconds",
                                                 "reviewers")}))
        asked = walk.requests[rid].data
        call_id = asked.get("callId") if isinstance(asked, Mapping) else None
        expired = d.get("by") == REVIEW_EXPIRED_BY
        tool = walk.tools.get(call_id) if isinstance(call_id, str) else None  # the call's open span
        if tool is not None and (expired or observed.get("outcome") != "approve"):
            walk.declined[tool.span_id] = "expired" if expired else str(observed.get("outcome"))
        if expired or observed.get("outcome") in ("expired", "expire", "deadline") or observed.get("expired"):
            span.error = "review expired"
    elif ev.type == REVIEW_REDEEMED and rid in walk.reviews:
        walk.reviews[rid].attributes.update(span_attributes({"applied": d.get("applied") is True}))


def build_trace(header: SessionHeader, events: Sequence[Event]) -> Trace:
    """The session's trace (module docstring). Pure and deterministic: ids come from
    ``header.id`` and event seqs, times from the events (epoch ms → ns); a span still open at
    the log's end (a suspended turn, an unanswered review) ends at the last event and carries
    ``fsm_stage.open = true``."""
    first = events[0].time if events else header.created_at
    start = min(first, header.created_at) if header.created_at > 0 else first
    walk = _Walk(header, start)
    last = start
    for ev in events:
        d = ev.data if isinstance(ev.data, Mapping) else {}
        observations = describe(walk.sid, ev, walk)
        answered = next((o.fields for o in observations
                         if o.name in ("review.answered", "review.expired")), None)
        _structure(ev, d, walk)
        if ev.type in (REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED):
            _review(ev, d, walk, answered)
        for obs in observations:
            if obs.name in _EVENTS:
                target = walk.reviews.get(str(obs.fields.get("review_id"))) \
                    if obs.name == "review.redeemed" else walk.inner()
                (target or walk.inner()).events.append(
                    SpanEvent(span_event_name(obs.name), ev.time * _MS, span_attributes(obs.fields)))
            if obs.name in ("transition.applied", "stage.announced") and walk.step is not None:
                plan = obs.fields.get("plan_mode")
                walk.step.attributes.update(span_attributes(
                    {"plan_mode": plan} if isinstance(plan, bool) else {"stage": obs.fields.get("to_stage")}))
        walk.stage = walk.stage_fold.apply(walk.stage, ev)
        walk.plan = walk.plan_fold.apply(walk.plan, ev)
        last = max(last, ev.time)
    _close(walk.root, last)
    walk.root.attributes.update(span_attributes({"resumes": walk.resumes, "stage": walk.stage,
                                                 "plan_mode": walk.plan}))
    for span in walk.spans:
        if not span.closed:
            _close(span, last)
            span.attributes["fsm_stage.open"] = True
    return Trace(walk.sid, trace_id(walk.sid), tuple(walk.spans))
