"""``fsm_stage.*`` log records, derived from the events a ``Session`` commits: one INFO record per
review requested / answered / expired / redeemed, transition applied, tool call refused or asked,
crash repair and graph record, with structured ``extra``; DEBUG for per-step detail; nothing
louder than INFO (tests/observe/obs_rig.py drives a real pydantic-ai run)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from obs_rig import run_pydantic
from sdk_check import sdk

from fsm_stage.driver import repair_open_turn
from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.observe import LOGGERS
from fsm_stage.runtime.session import Session

sdk("pydantic_ai")


def _clock(times: list[int]) -> Any:
    return lambda: times.pop(0) if len(times) > 1 else times[0]


def _host(tmp_path: Any) -> StageHost:
    host = StageHost.open(MemoryLog(SessionHeader("log-s", cwd=str(tmp_path))),
                          guards={"tests_written": True})
    assert host.plan is not None
    host.plan.set(host.agent, True)
    return host


def _ours(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("fsm_stage")]


def test_a_reviewed_session_logs_each_review_and_transition_once_at_info(
        caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    host = _host(tmp_path)
    with caplog.at_level(logging.INFO, logger="fsm_stage"):
        assert run_pydantic(host) == "Verified."
    records = _ours(caplog)
    assert {r.levelno for r in records} == {logging.INFO}  # nothing louder, no DEBUG at INFO
    reviews = [r for r in records if r.name == "fsm_stage.reviews"]
    by_id: dict[str, list[str]] = {}
    for r in reviews:
        by_id.setdefault(r.review_id, []).append(r.observation)  # type: ignore[attr-defined]
    assert list(by_id.values()) == [["review.requested", "review.answered", "review.redeemed"]] * 3
    answered = [r for r in reviews if r.observation == "review.answered"]  # type: ignore[attr-defined]
    assert [(r.kind, r.from_stage, r.to_stage, r.outcome, r.reviewer)  # type: ignore[attr-defined]
            for r in answered] == [("plan", "plan", "default", "approve", "api"),
                                   ("stage", "explore", "implement", "approve", "api"),
                                   ("stage", "implement", "verify", "approve", "api")]
    for r in answered:
        assert r.session == "log-s" and isinstance(r.wait_seconds, float) and r.wait_seconds >= 0  # type: ignore[attr-defined]
        assert len(r.payload_sha256) == 64  # type: ignore[attr-defined]
    moves = [(r.kind, r.from_stage, r.to_stage) for r in records  # type: ignore[attr-defined]
             if r.name == "fsm_stage.transitions"]
    assert moves == [("plan", "plan", "default"),
                     ("stage", "explore", "implement"), ("stage", "implement", "verify")]
    assert [r.graph for r in records if r.name == "fsm_stage.graph"] == ["feature-work"]  # type: ignore[attr-defined]


def test_per_step_detail_is_debug_only(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    host = _host(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="fsm_stage"):
        run_pydantic(host)
    steps = [r for r in _ours(caplog) if r.name == "fsm_stage.steps"]
    assert steps and {r.levelno for r in steps} == {logging.DEBUG}
    assert [r.step for r in steps if r.event_type == "step/start"] == [1, 2, 3, 4, 5]  # type: ignore[attr-defined]
    assert {r.tool for r in steps if r.event_type == "tool/call"} == {  # type: ignore[attr-defined]
        "exit_plan_mode", "goto_stage", "edit_file"}


def test_at_warning_fsm_stage_says_nothing(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    with caplog.at_level(logging.WARNING):
        run_pydantic(_host(tmp_path))
    assert _ours(caplog) == []


def test_one_logger_switched_on_alone_is_heard(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    logging.getLogger("fsm_stage").setLevel(logging.WARNING)
    try:
        with caplog.at_level(logging.INFO, logger="fsm_stage.transitions"):
            run_pydantic(_host(tmp_path))
    finally:
        logging.getLogger("fsm_stage").setLevel(logging.NOTSET)
    assert {r.name for r in _ours(caplog)} == {"fsm_stage.transitions"}


def test_refusal_ask_expiry_repair_and_wait_come_from_the_events(caplog: pytest.LogCaptureFixture) -> None:
    session = Session(MemoryLog(SessionHeader("raw"), clock=_clock([1_000, 1_000, 1_000, 61_500, 61_500])))
    with caplog.at_level(logging.DEBUG, logger="fsm_stage"):
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("fsm/review/request", {"id": "r1", "callId": "c1", "kind": "tool", "from": "implement",
                                              "target": "rm_rf", "payloadSha256": "ab" * 32}, ignorable=True)
        session.append("fsm/review/answer", {"id": "r1", "outcome": "expired", "by": "deadline"},
                       ignorable=True)
        session.append("fsm/tool/refused", {"callId": "c2", "name": "deploy", "stage": "explore",
                                            "rule": "stage explore: deny deploy", "planMode": False},
                       ignorable=True)
        repair_open_turn(session)
    info = [(r.name, r.message) for r in _ours(caplog) if r.levelno == logging.INFO]
    assert info == [
        ("fsm_stage.reviews", "review r1 requested: tool implement -> rm_rf"),
        ("fsm_stage.policy", "tool call c1 asked for review r1"),
        ("fsm_stage.reviews", "review r1 expired by deadline after 60.500s"),
        ("fsm_stage.policy", "tool call deploy refused in stage explore by stage explore: deny deploy"),
        ("fsm_stage.repair", "turn 1 closed as interrupted by crash repair"),
    ]
    expired = next(r for r in caplog.records if "expired" in r.message)
    assert (expired.wait_seconds, expired.outcome, expired.review_id) == (60.5, "expired", "r1")  # type: ignore[attr-defined]


def test_the_logger_table_names_every_logger_used(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    with caplog.at_level(logging.DEBUG, logger="fsm_stage"):
        run_pydantic(_host(tmp_path))
    assert {r.name for r in _ours(caplog)} <= set(LOGGERS)


def test_a_failing_observer_never_fails_the_append(caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from fsm_stage.observe import _live

    def boom(*_args: Any) -> list[Any]:
        raise RuntimeError("observer bug")

    monkeypatch.setattr(_live, "describe", boom)
    session = Session(MemoryLog(SessionHeader("raw")))
    with caplog.at_level(logging.DEBUG, logger="fsm_stage"):
        event = session.append("turn/start", {"turn": 1})
    assert event.seq == 0 and len(session) == 1
    assert any("observing session raw failed" in r.message for r in caplog.records)


def test_a_failing_listener_does_not_silence_later_records(tmp_path: Any) -> None:
    """A listener that raises is logged at DEBUG on ``fsm_stage.steps``; that record used to
    leave the logger's level cache filled, which the quiet-path check took for "nothing changed
    since the last look", so after the host switched INFO on, every later record was lost."""
    from fsm_stage.observe import add_listener
    from fsm_stage.observe._live import appended

    session = Session(MemoryLog(SessionHeader("quiet", cwd=str(tmp_path))))
    session.append("turn/start", {"turn": 1})  # logging unconfigured: looked once, nobody listens
    failed: list[int] = []

    def listener(_session: Any, _events: Any) -> None:
        if not failed:
            failed.append(1)
            raise RuntimeError("exporter hiccup")

    remove = add_listener(listener)
    heard: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            heard.append(record.getMessage())

    graph = logging.getLogger("fsm_stage.graph")
    handler, level = Keep(), graph.level
    graph.addHandler(handler)
    try:
        graph.setLevel(logging.INFO)  # the host switches a logger on: every level cache is cleared
        appended(session, [])  # the listener fails here and logs its DEBUG record
        session.append("fsm/graph", {"name": "g", "fingerprint": "sha256:" + "0" * 64}, ignorable=True)
    finally:
        remove()
        graph.removeHandler(handler)
        graph.setLevel(level)
    assert failed == [1]
    assert [m for m in heard if "graph g recorded" in m], heard
