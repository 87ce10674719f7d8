"""What the step driver writes besides the events of a well-run step: the shape checks of what a
host records (``RecordShapeError`` before anything is written), the closers of a cancelled call
(DSH's ``AbortError`` results), the ``turn/end`` reasons, the process-wide sharing of
logged header JSON and the header digests. ``StagedSession`` (``driver._step``) uses them;
nothing here writes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from fsm_stage.constants import REQUEST_HEADER, TOOL_CALL, TOOL_RESULT
from fsm_stage.driver._openstep import REVIEW_ANSWER, CallState
from fsm_stage.errors import RecordShapeError
from fsm_stage.log.events import Event, NewEvent
from fsm_stage.runtime.tools import ToolCall, step_position, tool_result_message
from fsm_stage.text import lone_surrogate

ABORTED = {"name": "AbortError", "code": "ABORTED"}
"""``tool/result.data.error`` of a call cancelled while running or suspended (DSH's shape)."""
ABORTED_BEFORE_DISPATCH = {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
"""``tool/result.data.error`` of a requested call the cancellation kept from running."""
ABORTED_TEXT = "Error: tool call aborted"  # DSH's texts verbatim (cancel-tool-calls recording)
NOT_DISPATCHED_TEXT = "Error: tool call aborted before dispatch"
TURN_END_KINDS = ("completed", "aborted", "error", "blocked")
"""The ``turn/end`` reason kinds a host may write (``interrupted`` is crash repair's)."""


_SHARED: dict[str, Any] = {}
_SHARED_MAX = 256


def shared_json(text: str) -> Any:
    """The value of the JSON ``text``, one object per distinct text (tool specs, system texts,
    configs) for the whole process, so 10,000 sessions with the same tools hold one copy of
    them in their logged headers. Logged event data is never mutated; at most ``_SHARED_MAX``
    values are kept (the oldest dropped)."""
    hit = _SHARED.get(text)
    if hit is not None:
        return hit
    if len(_SHARED) >= _SHARED_MAX:
        _SHARED.pop(next(iter(_SHARED)))
    value = _SHARED[text] = json.loads(text)
    return value


def shape(cond: bool, what: str) -> None:
    if not cond:
        raise RecordShapeError(what)


def utf8(text: str, what: str) -> None:
    """Refuse text the log cannot hold: a lone surrogate has no UTF-8 encoding."""
    at = lone_surrogate(text)
    if at is not None:
        raise RecordShapeError(f"{what} holds a lone surrogate (U+{ord(text[at]):04X}) at "
                               f"index {at}: it cannot be written as UTF-8")


def json_value(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise RecordShapeError(f"{what} must be JSON-serialisable: {exc}") from None


def check_call(call: Any, where: str) -> ToolCall:
    shape(isinstance(call, ToolCall), f"{where}: expected a ToolCall, got {type(call).__name__}")
    shape(isinstance(call.id, str) and bool(call.id), f"{where}: the call id must be a non-empty string")
    shape(isinstance(call.name, str) and bool(call.name),
           f"{where} {call.id!r}: the tool name must be a non-empty string")
    shape(isinstance(call.arguments, str),
           f"{where} {call.id!r}: arguments must be the JSON text (str), got {type(call.arguments).__name__}")
    for part, value in (("id", call.id), ("name", call.name), ("arguments", call.arguments)):
        utf8(value, f"{where} {part}")
    return call  # type: ignore[no-any-return]


def dismiss(review_id: str) -> NewEvent:
    """The ``fsm/review/answer`` a cancellation writes for an open review (docs/reviews.md)."""
    return NewEvent(REVIEW_ANSWER, {"id": review_id, "outcome": "dismiss", "option": None,
                                    "shape": None, "feedback": None, "by": "cancel"}, ignorable=True)


def abort_result(state: CallState, *, dispatched: bool, at: int | None = None) -> list[NewEvent]:
    """Closers of one unsettled call: its aborted ``tool/result`` (after a ``tool/call`` when it
    was never dispatched; ``at`` is then the seq that ``tool/call`` gets)."""
    where = step_position(state.turn, state.step)
    out: list[NewEvent] = []
    if dispatched:
        call_seq = state.call_seq
        text, error = ABORTED_TEXT, ABORTED
    else:
        call_seq = at
        out.append(NewEvent(TOOL_CALL, {**where, "callId": state.call.id, "name": state.call.name,
                                        "arguments": state.call.arguments}))
        text, error = NOT_DISPATCHED_TEXT, ABORTED_BEFORE_DISPATCH
    data = {**where, "message": tool_result_message(state.call, text, True), "error": dict(error)}
    out.append(NewEvent(TOOL_RESULT, data, "append", [call_seq] if call_seq is not None else None))
    return out


def reason(kind: str, message: str | None, cause: str | None) -> dict[str, Any]:
    """The ``turn/end`` ``reason`` of ``kind`` (``StagedSession.end_turn``); raises
    ``RecordShapeError`` for a ``message`` or ``cause`` that is not a str or None."""
    for name, value in (("message", message), ("cause", cause)):
        if value is not None and not isinstance(value, str):
            raise RecordShapeError(f"end_turn: {name} must be a str or None, got {type(value).__name__}")
    if kind == "error":
        return {"kind": "error", "error": {"message": message or "error"}}
    if kind == "aborted":
        return {"kind": "aborted", "reason": {"kind": cause or "user"}}
    if kind == "blocked" and message:
        return {"kind": "blocked", "message": message}
    return {"kind": kind}


def header_tools(runtime_tools: Sequence[Any], host_tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``tools`` of a ``request/header``: the runtime's ``ToolSpec``s, then the host's whose
    names the runtime does not have (each ``to_json()``)."""
    names = {t.name for t in runtime_tools}
    return [t.to_json() for t in (*runtime_tools, *(h for h in host_tools if h.name not in names))]


def header_digest(header: Mapping[str, Any]) -> bytes:
    """16 bytes identifying a request header (``{config, system, tools}``): blake2b of its
    canonical JSON. Raises ``TypeError`` / ``ValueError`` for what JSON cannot hold."""
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def last_header_digest(events: Sequence[Event]) -> bytes | None:
    """``header_digest`` of the last logged ``request/header`` (walking back from the end;
    None: none, or one whose header is not readable)."""
    for i in range(len(events) - 1, -1, -1):
        if events[i].type == REQUEST_HEADER:
            data = events[i].data
            logged = data.get("header") if isinstance(data, dict) else None
            try:
                return header_digest(logged) if isinstance(logged, dict) else None
            except (TypeError, ValueError):
                return None
    return None
