"""``fsm-stage trace``: a session suspended in one process, answered by a reviewer in another and
finished in a third is ONE trace, with ids derived from the session id (the same every time),
the review's wait as its span, and the same trace posted to an OTLP/HTTP receiver the test runs."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from obs_rig import SCRIPT as RIG
from sdk_check import sdk

from fsm_stage.log.dsh import read_log
from fsm_stage.observe import build_trace, span_id, trace_id

sdk("pydantic_ai")

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RIG.parents[2]), os.environ.get("PYTHONPATH", "")])}


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fsm_stage", *args], capture_output=True, text=True, env=ENV,
                          check=check, timeout=60)


@pytest.fixture(scope="module")
def resumed_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One session over three processes: run until the plan review suspends; a reviewer approves
    with ``fsm-stage review`` (after a wait); a new process resumes and finishes."""
    cwd = tmp_path_factory.mktemp("resumed")
    log = cwd / "s.jsonl"
    subprocess.run([sys.executable, str(RIG), "start", str(log), str(cwd)], env=ENV, check=True,
                   capture_output=True, timeout=60)
    (row,) = json.loads(_cli("review", str(log), "--json").stdout)["open"]
    time.sleep(0.3)  # the reviewer takes a moment: the review span must show it
    _cli("review", str(log), "--approve", row["id"])
    out = subprocess.run([sys.executable, str(RIG), "resume", str(log), str(cwd)], env=ENV, check=True,
                         capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout) == {"output": "Verified.", "stage": "verify"}
    return log


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attr(span: dict[str, Any], key: str) -> Any:
    for kv in span["attributes"]:
        if kv["key"] == key:
            return next(iter(kv["value"].values()))
    return None


def test_a_resumed_session_is_one_trace_with_deterministic_ids(resumed_log: Path) -> None:
    first = json.loads(_cli("trace", str(resumed_log), "--json").stdout)
    assert first == json.loads(_cli("trace", str(resumed_log), "--json").stdout)  # same log, same ids
    assert first["format_version"] == 1 and first["trace_id"] == trace_id("obs-session")
    spans = _spans(first["otlp"])
    assert {s["traceId"] for s in spans} == {trace_id("obs-session")}
    ids = {s["spanId"] for s in spans}
    (root,) = [s for s in spans if "parentSpanId" not in s]
    assert root["name"] == "fsm_stage.session" and root["spanId"] == span_id("obs-session", "session")
    assert all(s["parentSpanId"] in ids for s in spans if s is not root)
    assert _attr(root, "fsm_stage.session.resumes") == "1" and _attr(root, "fsm_stage.stage") == "verify"
    events = read_log(resumed_log).events
    (turn,) = [s for s in spans if s["name"] == "fsm_stage.turn"]  # one turn, across both processes
    assert int(turn["startTimeUnixNano"]) == next(e.time for e in events if e.type == "turn/start") * 10**6
    assert int(turn["endTimeUnixNano"]) == next(e.time for e in events if e.type == "turn/end") * 10**6
    steps = [s for s in spans if s["name"] == "fsm_stage.step"]
    assert [(_attr(s, "fsm_stage.stage"), _attr(s, "fsm_stage.plan_mode")) for s in steps] == [
        ("explore", True), ("explore", False), ("implement", False), ("implement", False), ("verify", False)]
    assert sorted(s["name"] for s in spans if s["name"].startswith("execute_tool")) == [
        "execute_tool edit_file", "execute_tool exit_plan_mode", "execute_tool goto_stage",
        "execute_tool goto_stage"]
    reviews = [s for s in spans if s["name"] == "fsm_stage.review"]
    assert [(_attr(s, "fsm_stage.review.kind"), _attr(s, "fsm_stage.review.reviewer")) for s in reviews] == [
        ("plan", "cli"), ("stage", "api"), ("stage", "api")]
    plan = reviews[0]
    request = next(e for e in events if e.type == "fsm/review/request")
    answer = next(e for e in events if e.type == "fsm/review/answer")
    assert int(plan["startTimeUnixNano"]) == request.time * 10**6
    assert int(plan["endTimeUnixNano"]) == answer.time * 10**6
    assert _attr(plan, "fsm_stage.review.wait_seconds") == (answer.time - request.time) / 1000 >= 0.3
    applied = [e for s in spans for e in s.get("events", ()) if e["name"] == "fsm_stage.transition.applied"]
    assert [_attr(e, "fsm_stage.transition.to") for e in applied] == [
        "plan", "default", "implement", "verify"]


def test_the_text_tree_shows_the_review_wait(resumed_log: Path) -> None:
    out = _cli("trace", str(resumed_log)).stdout
    assert out.startswith(f"trace {trace_id('obs-session')} (session obs-session, ")
    assert "  fsm_stage.turn " in out and "fsm_stage.review" in out and " by=cli wait=" in out


Received = list[tuple[str, str, bytes]]


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[Received] = []
    authorization: ClassVar[list[str | None]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.authorization.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    _Receiver.received, _Receiver.authorization = [], []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", _Receiver.received
    finally:
        server.shutdown()
        server.server_close()


def test_otlp_export_reaches_a_receiver_as_protobuf(resumed_log: Path,
                                                     receiver: tuple[str, Received]) -> None:
    sdk("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    url, received = receiver
    out = _cli("trace", str(resumed_log), "--otlp", url)
    trace = build_trace(read_log(resumed_log).header, read_log(resumed_log).events)
    assert out.stdout.strip() == (f"exported {len(trace.spans)} spans of trace {trace.trace_id} "
                                  f"to {url} (protobuf)")
    ((path, ctype, body),) = received
    assert (path, ctype) == ("/v1/traces", "application/x-protobuf")
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert {s.trace_id.hex() for s in spans} == {trace_id("obs-session")}
    assert [s.name for s in spans] == [s.name for s in trace.spans]
    review = next(s for s in spans if s.name == "fsm_stage.review")
    attrs = {kv.key: kv.value for kv in review.attributes}
    assert attrs["fsm_stage.review.reviewer"].string_value == "cli"
    assert attrs["fsm_stage.review.wait_seconds"].double_value >= 0.3
    assert (review.end_time_unix_nano - review.start_time_unix_nano) / 1e9 == pytest.approx(
        attrs["fsm_stage.review.wait_seconds"].double_value)
    resource = {kv.key: kv.value.string_value for kv in request.resource_spans[0].resource.attributes}
    assert resource == {"service.name": "fsm_stage", "gen_ai.conversation.id": "obs-session"}


def test_otlp_mistakes_are_one_line(resumed_log: Path) -> None:
    bad = _cli("trace", str(resumed_log), "--otlp", "ftp://example/v1/traces", check=False)
    assert (bad.returncode, bad.stdout) == (1, "")
    assert bad.stderr == ("fsm-stage: --otlp needs an http:// or https:// URL with a host, got "
                          "'ftp://example/v1/traces'\n")
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = _cli("trace", str(resumed_log), "--otlp", f"http://127.0.0.1:{port}/v1/traces", check=False)
    assert down.returncode == 1 and down.stderr.startswith(f"fsm-stage: OTLP export to http://127.0.0.1:{port}")
    assert len(down.stderr.splitlines()) == 1 and "Traceback" not in down.stderr
    both = _cli("trace", str(resumed_log), "--json", "--otlp", "http://x", check=False)
    assert both.returncode == 2
    missing = _cli("trace", str(resumed_log.with_name("nope.jsonl")), check=False)
    assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1


def test_without_opentelemetry_proto_the_post_is_otlp_json(resumed_log: Path, receiver: tuple[str, Received],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from fsm_stage.observe import otlp

    real = importlib.util.find_spec
    monkeypatch.setattr(otlp.importlib.util, "find_spec",
                        lambda name, *a: None if name == "opentelemetry.proto" else real(name, *a))
    url, received = receiver
    read = read_log(resumed_log)
    trace = build_trace(read.header, read.events)
    assert otlp.post_otlp(trace, url) == "json"
    ((_path, ctype, body),) = received
    assert ctype == "application/json"
    doc = json.loads(body)
    assert doc == otlp.otlp_json(trace)
    assert {s["traceId"] for s in _spans(doc)} == {trace_id("obs-session")}


@pytest.mark.parametrize(("url", "why"), [
    ("http://[::1", "--otlp: not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:abc/v1/traces", "--otlp: not a valid URL (Port could not be cast"),
    ("http://127.0.0.1:99999/v1/traces", "--otlp: not a valid URL (Port out of range"),
    ("", "--otlp needs an http:// or https:// URL with a host, got ''"),
    ("http:///v1/traces", "--otlp needs an http:// or https:// URL with a host"),
])
def test_a_malformed_otlp_url_is_one_line_before_anything_is_read(resumed_log: Path, url: str,
                                                                   why: str) -> None:
    """A URL urllib cannot parse was a traceback, and an empty one silently exported nothing."""
    out = _cli("trace", str(resumed_log), "--otlp", url, check=False)
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.startswith(f"fsm-stage: {why}") and len(out.stderr.splitlines()) == 1


def test_credentials_in_the_otlp_url_are_sent_as_basic_auth_and_never_shown(
        resumed_log: Path, receiver: tuple[str, Received]) -> None:
    import base64

    url, received = receiver
    secret = url.replace("http://", "http://alice:s3cret%40PW@")
    out = _cli("trace", str(resumed_log), "--otlp", secret)
    assert "s3cret" not in out.stdout + out.stderr
    assert f"to {url.replace('http://', 'http://alice:***@')} (" in out.stdout
    (path, _ctype, _body), = received
    assert path == "/v1/traces"
    assert _Receiver.authorization == ["Basic " + base64.b64encode(b"alice:s3cret@PW").decode()]


def test_event_times_out_of_range_are_clamped_not_an_encoder_error(resumed_log: Path) -> None:
    """A damaged log's negative or enormous event time is still exported (OTLP times are
    unsigned 64-bit nanoseconds; an int attribute past int64 goes as a string)."""
    import attrs

    from fsm_stage.observe import otlp

    read = read_log(resumed_log)
    trace = build_trace(read.header, read.events)
    first, second, *rest = trace.spans
    early = attrs.evolve(first, start_ns=-5, attributes={**first.attributes, "n": 10**30})
    odd = attrs.evolve(trace, spans=[early, attrs.evolve(second, end_ns=10**29), *rest])
    doc = otlp.otlp_json(odd)
    spans = _spans(doc)
    assert spans[0]["startTimeUnixNano"] == "0" and spans[1]["endTimeUnixNano"] == str(2**64 - 1)
    assert {"key": "n", "value": {"stringValue": str(10**30)}} in spans[0]["attributes"]
    sdk("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    decoded = ExportTraceServiceRequest.FromString(otlp.otlp_protobuf(odd))
    pb = decoded.resource_spans[0].scope_spans[0].spans
    assert (pb[0].start_time_unix_nano, pb[1].end_time_unix_nano) == (0, 2**64 - 1)


def test_a_redirect_is_refused_and_never_carries_the_credentials(resumed_log: Path,
                                                                 receiver: tuple[str, Received]) -> None:
    """urllib followed a 302 as a GET without the trace, sent the Basic credentials to the host
    it named and reported the export done: now a redirect is a one-line refusal, exit 1."""
    from http_doubles import redirecting

    target, received = receiver
    with redirecting(target) as port:
        url = f"http://collector:s3cret@127.0.0.1:{port}/v1/traces"
        out = _cli("trace", str(resumed_log), "--otlp", url, check=False)
    assert (out.returncode, out.stdout) == (1, "")
    assert "refused: HTTP 302" in out.stderr and "redirects are not followed" in out.stderr
    assert "s3cret" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert received == [] and _Receiver.authorization == []  # the other host got nothing
