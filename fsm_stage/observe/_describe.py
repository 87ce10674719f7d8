"""What each logged event means to an operator: one vocabulary for logs, live spans and traces.

``describe(event, context)`` turns one committed event into zero or more ``Observation``s
(name, logger, level, message, fields). The live seam (``Session`` appends), the OpenTelemetry
span events and ``fsm-stage trace`` all read the same observations, so a record, a span event
and a rebuilt trace say the same thing in the same words.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from fsm_stage.constants import (
    COMMAND_RUN,
    GRAPH_EVENT,
    PLAN_MODE_EVENT,
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
    USER_MESSAGE,
)
from fsm_stage.log.events import Event
from fsm_stage.log.projections.stage import fold_stage, stage_from_event
from fsm_stage.text import review_route

__all__ = ["LOGGERS", "WATCHED", "Context", "Observation", "ScanContext", "describe"]

TOOL_REFUSED: Final = "fsm/tool/refused"
"""The policy's refusal record (written by the tool policy; read here only)."""

#: logger name -> what it reports (docs/observability.md lists the same table).
LOGGERS: Final[Mapping[str, str]] = {
    "fsm_stage.reviews": "review requested / answered / expired / redeemed (INFO)",
    "fsm_stage.transitions": "stage and plan-mode transitions applied (INFO)",
    "fsm_stage.policy": "tool calls refused or asked for review (INFO)",
    "fsm_stage.repair": "crash repair closed an interrupted turn (INFO)",
    "fsm_stage.graph": "the session's graph recorded or changed (INFO)",
    "fsm_stage.steps": "turns, steps, request headers, tool calls and results, commands (DEBUG)",
}

#: Event types ``describe`` reads; every other type costs one set lookup at the seam.
WATCHED: Final = frozenset({
    REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED, GRAPH_EVENT, PLAN_MODE_EVENT, TOOL_REFUSED,
    USER_MESSAGE, TURN_START, TURN_END, STEP_START, STEP_END, TOOL_CALL, TOOL_RESULT,
    REQUEST_HEADER, COMMAND_RUN,
})
_EXPIRED_OUTCOMES: Final = frozenset({"expired", "expire", "deadline"})


@attrs.frozen
class Observation:
    """One thing worth telling an operator about one event.

    ``name`` is the stable dotted name (``review.answered``, ``transition.applied``…; the
    table in docs/observability.md), ``logger`` the ``fsm_stage.*`` logger it is logged on,
    ``level`` a ``logging`` level (INFO or DEBUG: nothing in normal operation is louder),
    ``message`` one human line, ``fields`` the structured ``extra`` (JSON values: ``observation``
    (= ``name``), ``session``, ``seq``, ``event_type`` always; ``review_id``, ``kind``,
    ``from_stage``, ``to_stage``,
    ``outcome``, ``reviewer``, ``wait_seconds`` (float seconds), ``payload_sha256``, ``tool``,
    ``call_id``, ``rule``, ``turn``, ``step``… when they apply)."""

    name: str
    logger: str
    level: int
    message: str
    fields: Mapping[str, Any]


class Context(Protocol):
    """What ``describe`` may need beyond the event: the log before it."""

    def request(self, review_id: str, before: int) -> Event | None:
        """The ``fsm/review/request`` event of ``review_id`` with a seq below ``before``."""

    def stage_before(self, seq: int) -> str | None:
        """The logged stage just before event ``seq`` (None when no stage record precedes it)."""


class ScanContext:
    """``Context`` over an event sequence by backward scans (the live seam: only the rare
    review answers and transitions ask, and only when someone listens)."""

    def __init__(self, events: Sequence[Event]) -> None:
        self._events = events

    def request(self, review_id: str, before: int) -> Event | None:
        """The request event, scanning back from ``before`` (O(distance))."""
        events = self._events
        for i in range(min(before, len(events)) - 1, -1, -1):
            ev = events[i]
            if ev.type == REVIEW_REQUEST and isinstance(ev.data, Mapping) and ev.data.get("id") == review_id:
                return ev
        return None

    def stage_before(self, seq: int) -> str | None:
        """``fold_stage(events, seq)`` (scans back to the previous stage record)."""
        return fold_stage(self._events, seq)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _obs(session: str, ev: Event, name: str, logger: str, level: int, message: str,
         **fields: Any) -> Observation:
    base: dict[str, Any] = {"observation": name, "session": session, "seq": ev.seq, "event_type": ev.type}
    base.update((k, v) for k, v in fields.items() if v is not None)
    return Observation(name, logger, level, message, base)


def _request_fields(req: Event | None) -> dict[str, Any]:
    d = req.data if req is not None and isinstance(req.data, Mapping) else {}
    return {"kind": _str(d.get("kind")), "from_stage": _str(d.get("from")),
            "to_stage": _str(d.get("target")) or None,  # a budget review moves nowhere by itself
            "payload_sha256": _str(d.get("payloadSha256")), "call_id": _str(d.get("callId"))}


def _review(session: str, ev: Event, d: Mapping[str, Any], ctx: Context) -> list[Observation]:
    rid = _str(d.get("id"))
    if rid is None:
        return []
    if ev.type == REVIEW_REQUEST:
        f = _request_fields(ev)
        out = [_obs(session, ev, "review.requested", "fsm_stage.reviews", logging.INFO,
                    f"review {rid} requested: {f['kind']} "
                    + review_route(f["kind"] or "", f["from_stage"] or "", f["to_stage"] or "", arrow="->"),
                    review_id=rid, turn=_int(d.get("turn")), step=_int(d.get("step")), **f)]
        if f["kind"] == "tool":
            out.append(_obs(session, ev, "tool.asked", "fsm_stage.policy", logging.INFO,
                            f"tool call {f['call_id']} asked for review {rid}", review_id=rid,
                            call_id=f["call_id"], tool=f["to_stage"]))
        return out
    req = ctx.request(rid, ev.seq)
    f = _request_fields(req)
    if ev.type == REVIEW_ANSWER:
        outcome = _str(d.get("outcome")) or "dismiss"
        wait = None if req is None else max(0, ev.time - req.time) / 1000.0
        by = _str(d.get("by"))
        expired = d.get("expired") is True or outcome in _EXPIRED_OUTCOMES or by == REVIEW_EXPIRED_BY
        name = "review.expired" if expired else "review.answered"
        verb = "expired" if expired else f"answered {outcome}"
        names = d.get("reviewers")
        voters = ",".join(n for n in names if isinstance(n, str)) if isinstance(names, list) else ""
        return [_obs(session, ev, name, "fsm_stage.reviews", logging.INFO,
                     f"review {rid} {verb}" + (f" by {by}" if by else "")
                     + (f" (reviewers {voters})" if voters else "")
                     + ("" if wait is None else f" after {wait:.3f}s"),
                     review_id=rid, outcome=outcome, reviewer=by, wait_seconds=wait,
                     option=_str(d.get("option")), reviewers=voters or None, **f)]
    applied = d.get("applied") is True
    reason = _str(d.get("reason"))
    return [_obs(session, ev, "review.redeemed", "fsm_stage.reviews", logging.INFO,
                 f"review {rid} redeemed: " + ("applied" if applied else f"closed ({reason})"),
                 review_id=rid, applied=applied, reason=reason, **f)]


def _stage_notice(session: str, ev: Event, ctx: Context) -> list[Observation]:
    to = stage_from_event(ev)
    if to is None:
        return []
    before = ctx.stage_before(ev.seq)
    if before is None or before == to:
        return [_obs(session, ev, "stage.announced", "fsm_stage.steps", logging.DEBUG,
                     f"current stage {to}", kind="stage", to_stage=to)]
    return [_obs(session, ev, "transition.applied", "fsm_stage.transitions", logging.INFO,
                 f"stage transition {before} -> {to}", kind="stage", from_stage=before, to_stage=to)]


def _debug(session: str, ev: Event, d: Mapping[str, Any]) -> list[Observation]:
    t = ev.type
    fields: dict[str, Any] = {"turn": _int(d.get("turn")), "step": _int(d.get("step"))}
    if t in (TOOL_CALL, TOOL_RESULT):
        fields["call_id"] = _str(d.get("callId"))
        fields["tool"] = _str(d.get("name"))
    if t == REQUEST_HEADER:
        fields["reason"] = _str(d.get("reason"))
    if t == COMMAND_RUN:
        fields["command"] = _str(d.get("name")) or _str(d.get("command"))
    shown = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
    return [_obs(session, ev, t.replace("/", "."), "fsm_stage.steps", logging.DEBUG,
                 f"{t} {shown}".rstrip(), **fields)]


def describe(session: str, event: Event, context: Context) -> list[Observation]:
    """The observations of ``event`` (committed to ``session``'s log), in the order to emit them.

    Pure: reads ``event`` and what ``context`` returns about the events before it. Malformed
    data (not a mapping, missing ids) gives fewer fields or nothing, never an error."""
    t = event.type
    if t not in WATCHED:
        return []
    d = event.data if isinstance(event.data, Mapping) else {}
    if t in (REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED):
        return _review(session, event, d, context)
    if t == USER_MESSAGE:
        return _stage_notice(session, event, context)
    if t == PLAN_MODE_EVENT:
        active = d.get("active")
        if not isinstance(active, bool):
            return []
        src, dst = ("default", "plan") if active else ("plan", "default")
        return [_obs(session, event, "transition.applied", "fsm_stage.transitions", logging.INFO,
                     f"plan mode {'entered' if active else 'left'}", kind="plan", from_stage=src,
                     to_stage=dst, plan_mode=active)]
    if t == TOOL_REFUSED:
        tool, rule = _str(d.get("name")), _str(d.get("rule"))
        return [_obs(session, event, "tool.refused", "fsm_stage.policy", logging.INFO,
                     f"tool call {tool} refused in stage {_str(d.get('stage'))} by {rule}",
                     call_id=_str(d.get("callId")), tool=tool, stage=_str(d.get("stage")), rule=rule,
                     plan_mode=d.get("planMode") is True)]
    if t == GRAPH_EVENT:
        name, fp = _str(d.get("name")), _str(d.get("fingerprint"))
        return [_obs(session, event, "graph.changed", "fsm_stage.graph", logging.INFO,
                     f"graph {name} recorded ({fp})", graph=name, fingerprint=fp)]
    if t == TURN_END:
        reason = d.get("reason")
        kind = _str(reason.get("kind")) if isinstance(reason, Mapping) else _str(reason)
        if kind == "interrupted":
            return [_obs(session, event, "repair", "fsm_stage.repair", logging.INFO,
                         f"turn {_int(d.get('turn'))} closed as interrupted by crash repair",
                         turn=_int(d.get("turn")), reason=kind)]
    return _debug(session, event, d)
