"""Live OpenTelemetry spans under the SDK's in-memory exporter: a review is a span from its
request to its answer (the wait), transitions and refusals are span events on the active span,
the step's boundary work is a span, and — under pydantic-ai's own instrumentation — every
model-request span carries the stage and plan mode. Without OpenTelemetry loaded nothing of it
is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from obs_rig import exporter, run_pydantic
from sdk_check import sdk

sdk("opentelemetry.sdk")
from opentelemetry import trace  # noqa: E402

from fsm_stage.integrations._host import StageHost  # noqa: E402
from fsm_stage.log.events import SessionHeader  # noqa: E402
from fsm_stage.log.memory import MemoryLog  # noqa: E402
from fsm_stage.runtime.session import Session  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _clock(times: list[int]) -> Any:
    return lambda: times.pop(0) if len(times) > 1 else times[0]


def _attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_review_is_a_span_from_request_to_answer_with_its_wait() -> None:
    spans = exporter()
    session = Session(MemoryLog(SessionHeader("live"), clock=_clock([5_000, 95_250])))
    with trace.get_tracer("host").start_as_current_span("host turn") as parent:
        session.append("fsm/review/request", {"id": "r1", "callId": "c1", "kind": "stage", "from": "explore",
                                              "target": "implement", "payloadSha256": "cd" * 32},
                       ignorable=True)
        session.append("fsm/review/answer", {"id": "r1", "outcome": "approve", "by": "alice"}, ignorable=True)
    (review,) = [s for s in spans.get_finished_spans() if s.name == "fsm_stage.review"]
    assert (review.start_time, review.end_time) == (5_000 * 10**6, 95_250 * 10**6)
    assert review.parent is not None and review.parent.span_id == parent.get_span_context().span_id
    a = _attrs(review)
    assert a["fsm_stage.review.wait_seconds"] == 90.25
    assert (a["fsm_stage.review.outcome"], a["fsm_stage.review.reviewer"], a["fsm_stage.review.kind"]) == (
        "approve", "alice", "stage")
    assert (a["fsm_stage.transition.from"], a["fsm_stage.transition.to"]) == ("explore", "implement")
    assert a["fsm_stage.review.payload_sha256"] == "cd" * 32 and a["gen_ai.conversation.id"] == "live"
    (host_span,) = [s for s in spans.get_finished_spans() if s.name == "host turn"]
    assert [e.name for e in host_span.events] == ["fsm_stage.review.requested"]


def test_transitions_and_refusals_are_events_on_the_active_span() -> None:
    spans = exporter()
    session = Session(MemoryLog(SessionHeader("live")))
    with trace.get_tracer("host").start_as_current_span("chat model"):
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("plan/mode", {"active": False})
        session.append("fsm/tool/refused", {"callId": "c9", "name": "deploy", "stage": "explore",
                                            "rule": "deny deploy", "planMode": False}, ignorable=True)
    (chat,) = spans.get_finished_spans()
    names = [e.name for e in chat.events]
    assert names == ["fsm_stage.transition.applied", "fsm_stage.tool.refused"]
    refused = dict(chat.events[1].attributes or {})
    assert refused["gen_ai.tool.name"] == "deploy" and refused["gen_ai.tool.call.id"] == "c9"
    assert refused["fsm_stage.policy.rule"] == "deny deploy"
    assert _attrs(chat)["fsm_stage.plan_mode"] is False
    assert "gen_ai.conversation.id" not in _attrs(chat)  # a host's span keeps its own gen_ai.* names


def test_tag_request_puts_the_logged_stage_on_a_span_opened_after_the_step() -> None:
    from fsm_stage.observe import tag_request

    spans = exporter()
    session = Session(MemoryLog(SessionHeader("late")))
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("plan/mode", {"active": True})
    notice = "Stage switched to verify"
    session.append("user/message", {"role": "user", "content": [{"type": "text", "text": notice}],
                                    "source": {"kind": "stage-switch", "form": "notice", "summary": notice}},
                   surface_op="append")
    with trace.get_tracer("host").start_as_current_span("chat late-model"):
        tag_request(session)
    (chat,) = spans.get_finished_spans()
    assert (_attrs(chat)["fsm_stage.stage"], _attrs(chat)["fsm_stage.plan_mode"]) == ("verify", True)
    assert _attrs(chat)["fsm_stage.session.id"] == "late"


def test_model_request_spans_carry_the_stage_under_pydantic_ai_instrumentation(tmp_path: Path) -> None:
    sdk("pydantic_ai")
    spans = exporter()
    host = StageHost.open(MemoryLog(SessionHeader("pai", cwd=str(tmp_path))), guards={"tests_written": True})
    assert host.plan is not None
    host.plan.set(host.agent, True)
    assert run_pydantic(host, instrument=True) == "Verified."
    finished = spans.get_finished_spans()
    chats = [s for s in finished if s.name.startswith("chat ")]
    assert [(_attrs(s)["fsm_stage.stage"], _attrs(s)["fsm_stage.plan_mode"]) for s in chats] == [
        ("explore", True), ("explore", False), ("implement", False), ("implement", False), ("verify", False)]
    assert all(_attrs(s)["fsm_stage.session.id"] == "pai" for s in chats)
    assert all(_attrs(s)["gen_ai.conversation.id"] != "pai" for s in chats)  # pydantic-ai's own id stays
    reviews = [s for s in finished if s.name == "fsm_stage.review"]
    assert [(_attrs(s)["fsm_stage.review.kind"], _attrs(s)["fsm_stage.transition.to"]) for s in reviews] == [
        ("plan", "default"), ("stage", "implement"), ("stage", "verify")]
    for s in reviews:
        assert s.end_time >= s.start_time
        assert _attrs(s)["fsm_stage.review.wait_seconds"] == pytest.approx((s.end_time - s.start_time) / 1e9)
    boundaries = [s for s in finished if s.name == "fsm_stage.step.boundary"]
    assert len(boundaries) == len(chats)
    applied = [e for s in boundaries for e in s.events if e.name == "fsm_stage.transition.applied"]
    assert [dict(e.attributes or {})["fsm_stage.transition.to"] for e in applied] == [
        "default", "implement", "verify"]
    asked_on = [s for s in finished if any(e.name == "fsm_stage.review.requested" for e in s.events)]
    assert {s.name for s in asked_on} == {"execute_tool exit_plan_mode", "execute_tool goto_stage"}


def test_without_opentelemetry_loaded_nothing_imports_it(tmp_path: Path) -> None:
    code = (
        "import sys, fsm_stage\n"
        "from fsm_stage.log.events import SessionHeader\n"
        "from fsm_stage.log.jsonl import JsonlLog\n"
        "from fsm_stage.runtime.session import Session\n"
        "from fsm_stage.observe import build_trace\n"
        "import logging; logging.basicConfig(level=logging.DEBUG)\n"
        f"s = Session(JsonlLog({str(tmp_path / 'x.jsonl')!r}, header=SessionHeader('x')))\n"
        "s.append('fsm/review/request', {'id': 'r', 'kind': 'stage'}, ignorable=True)\n"
        "s.append('fsm/review/answer', {'id': 'r', 'outcome': 'approve'}, ignorable=True)\n"
        "assert len(build_trace(s.header, s.events).spans) == 2\n"
        "from fsm_stage.cli import main\n"
        "try:\n"
        f"    main([ 'trace', {str(tmp_path / 'x.jsonl')!r}, '--json'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "print('otel=' + ','.join(sorted(m for m in sys.modules if m.startswith('opentelemetry'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "otel="
    assert "review r answered approve" in out.stderr  # the records were emitted meanwhile
