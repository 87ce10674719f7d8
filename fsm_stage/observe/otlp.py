"""A rebuilt ``Trace`` as OTLP: the JSON encoding, the protobuf encoding, and an OTLP/HTTP post.

``otlp_json(trace)`` is the OTLP/JSON ``ExportTraceServiceRequest`` (hex ids, nanosecond times
as strings, as the OTLP specification's JSON encoding). ``otlp_protobuf(trace)`` is the binary
form; it needs ``opentelemetry-proto`` and is only imported when called. ``post_otlp(trace,
url)`` sends protobuf when ``opentelemetry-proto`` is installed and OTLP/JSON otherwise (an
OTLP/HTTP collector accepts both) to ``url`` (the full traces endpoint, e.g.
``http://127.0.0.1:4318/v1/traces``).
"""

from __future__ import annotations

import base64
import http.client
import importlib.util
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from importlib import metadata
from typing import Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

from fsm_stage._http import no_redirect_opener
from fsm_stage.errors import UserError
from fsm_stage.observe._trace import Span, Trace
from fsm_stage.text import hide_url_password

__all__ = ["otlp_json", "otlp_protobuf", "post_otlp", "shown_endpoint"]

_SPAN_KIND_INTERNAL: Final = 1
_STATUS_ERROR: Final = 2
_MAX_RESPONSE: Final = 64 * 1024
_U64: Final = 2**64 - 1


def _ns(value: int) -> int:
    """A time in nanoseconds as OTLP's fixed64 holds it: a damaged log's negative or huge event
    time is clamped to 0 or the largest value, never an encoder error."""
    return min(max(value, 0), _U64)


def _int64(value: int) -> bool:
    """Whether ``value`` fits OTLP's int64 attribute value (a larger one is sent as a string)."""
    return -(2**63) <= value < 2**63


def _version() -> str:
    try:
        return metadata.version("fsm_stage")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int) and _int64(v):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _kvs(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attributes.items()]


def _span_json(trace_id: str, span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": trace_id, "spanId": span.span_id, "name": span.name,
                           "kind": _SPAN_KIND_INTERNAL, "startTimeUnixNano": str(_ns(span.start_ns)),
                           "endTimeUnixNano": str(_ns(span.end_ns)), "attributes": _kvs(span.attributes)}
    if span.parent_id is not None:
        out["parentSpanId"] = span.parent_id
    if span.events:
        out["events"] = [{"timeUnixNano": str(_ns(e.time_ns)), "name": e.name,
                          "attributes": _kvs(e.attributes)} for e in span.events]
    if span.error is not None:
        out["status"] = {"code": _STATUS_ERROR, "message": span.error}
    return out


def _resource(trace: Trace) -> dict[str, Any]:
    return {"service.name": "fsm_stage", "gen_ai.conversation.id": trace.session_id}


def otlp_json(trace: Trace) -> dict[str, Any]:
    """``trace`` as one OTLP/JSON ``ExportTraceServiceRequest`` (a JSON-ready dict)."""
    return {"resourceSpans": [{
        "resource": {"attributes": _kvs(_resource(trace))},
        "scopeSpans": [{"scope": {"name": "fsm_stage", "version": _version()},
                        "spans": [_span_json(trace.trace_id, s) for s in trace.spans]}],
    }]}


def _proto_value(v: Any) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int) and _int64(v):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=str(v))


def _proto_kvs(attributes: Mapping[str, Any]) -> list[Any]:
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    return [KeyValue(key=k, value=_proto_value(v)) for k, v in attributes.items()]


def otlp_protobuf(trace: Trace) -> bytes:
    """``trace`` as a serialised protobuf ``ExportTraceServiceRequest``. Raises ``UserError``
    when ``opentelemetry-proto`` is not installed."""
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
        from opentelemetry.proto.resource.v1.resource_pb2 import Resource
        from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status
        from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
    except ImportError as err:
        raise UserError("OTLP protobuf needs opentelemetry-proto (pip install opentelemetry-proto)") from err
    tid = bytes.fromhex(trace.trace_id)
    spans = []
    for s in trace.spans:
        pb = PbSpan(trace_id=tid, span_id=bytes.fromhex(s.span_id), name=s.name,
                    kind=PbSpan.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=_ns(s.start_ns), end_time_unix_nano=_ns(s.end_ns),
                    attributes=_proto_kvs(s.attributes),
                    events=[PbSpan.Event(time_unix_nano=_ns(e.time_ns), name=e.name,
                                         attributes=_proto_kvs(e.attributes)) for e in s.events])
        if s.parent_id is not None:
            pb.parent_span_id = bytes.fromhex(s.parent_id)
        if s.error is not None:
            pb.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=s.error))
        spans.append(pb)
    scope = InstrumentationScope(name="fsm_stage", version=_version())
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=_proto_kvs(_resource(trace))),
        scope_spans=[ScopeSpans(scope=scope, spans=spans)])])
    data: bytes = request.SerializeToString()
    return data


def _endpoint(url: str) -> tuple[str, dict[str, str], str]:
    """``(url without its user:password@, headers, url as shown)``: credentials in the URL become
    an HTTP Basic ``Authorization`` header (urllib would take them for a host name) and are never
    shown. Raises ``UserError`` (one line) for a URL that is not http(s) with a host, or that
    cannot be parsed (an unclosed ``[``, a port that is no number from 0 to 65535)."""
    try:
        parts = urlsplit(url)
        _ = parts.port
        user, password = parts.username, parts.password
    except ValueError as err:
        raise UserError(f"--otlp: not a valid URL ({err}); expected e.g. "
                        "http://127.0.0.1:4318/v1/traces") from None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    shown = hide_url_password(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--otlp needs an http:// or https:// URL with a host, got {shown!r}")
    headers: dict[str, str] = {}
    if user is not None:
        creds = f"{unquote(user)}:{unquote(password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(creds).decode("ascii")
    return bare, headers, shown


def shown_endpoint(url: str) -> str:
    """``url`` as messages show it: its password as ``***`` (``post_otlp`` raises for a bad URL)."""
    return _endpoint(url)[2]


def post_otlp(trace: Trace, url: str, *, timeout: float = 10.0) -> str:
    """POST ``trace`` to the OTLP/HTTP traces endpoint ``url``; returns the encoding sent
    (``"protobuf"`` or ``"json"``). A ``user:password@`` in ``url`` is sent as HTTP Basic
    authentication, and never shown. Raises ``UserError`` (one line) for a URL that is not
    http(s) with a host or cannot be parsed, an unreachable endpoint or a non-2xx answer (a
    redirect included: none is followed); nothing is retried."""
    target, headers, shown = _endpoint(url)
    if importlib.util.find_spec("opentelemetry.proto") is not None:
        body, ctype, encoding = otlp_protobuf(trace), "application/x-protobuf", "protobuf"
    else:
        body, ctype, encoding = json.dumps(otlp_json(trace)).encode("utf-8"), "application/json", "json"
    request = urllib.request.Request(target, data=body, method="POST",
                                     headers={"Content-Type": ctype, **headers})
    try:
        with no_redirect_opener().open(request, timeout=timeout) as response:
            response.read(_MAX_RESPONSE)
    except urllib.error.HTTPError as err:
        moved = " (redirects are not followed: give the endpoint itself)" if 300 <= err.code < 400 else ""
        raise UserError(f"OTLP export to {shown} refused: HTTP {err.code} {err.reason}{moved}") from err
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise UserError(f"OTLP export to {shown} failed: {reason}") from err
    return encoding
