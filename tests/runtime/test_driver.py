"""``StagedSession``: the public step driver — event order, copies, shape checks, misuse."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from driver_helpers import unanswered_calls
from runtime_helpers import Echo, new_agent, run

from fsm_stage.driver._step import DriverStateError, RecordShapeError, StagedSession
from fsm_stage.errors import UserError
from fsm_stage.log.dsh import read_log
from fsm_stage.runtime.assembly import ContextEntry, SystemSection
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall


def _driver(accept: Any = None) -> tuple[StagedSession, Echo]:
    rt = Runtime()
    echo = Echo()
    rt.add_tool(echo)
    rt.add_section(SystemSection("intro", 10, lambda a: "You are staged."))
    rt.add_context(ContextEntry("policy", 116, lambda a: "Stage: explore"))
    agent = new_agent()
    return StagedSession(rt, agent, config={"provider": "p", "model": "m"}, accept=accept), echo


def _types(driver: StagedSession) -> list[str]:
    return [e.type for e in driver.session.events]


def test_a_host_loop_writes_the_reference_event_order() -> None:
    driver, echo = _driver()
    driver.agent.steer(user_message("hello"))
    assert driver.start_turn() == 1
    req = driver.begin_step()
    assert req is not None and (req.turn, req.step, req.header_reason) == (1, 1, "initial")
    assert req.system == "You are staged." and [t.name for t in req.tools] == ["echo"]
    # the context snapshot comes first, then the user's message
    assert [m["source"]["kind"] for m in req.messages] == ["plugin", "user"]
    mine, theirs = ToolCall.of("echo", {"x": "hi"}, id="c1"), ToolCall.of("web", {"q": "x"}, id="c2")
    driver.record_reply("calling", [mine, theirs], usage={"inputTokens": 3})
    result = run(driver.run_tool(mine))
    assert (result.text, result.is_error) == ("echo hi", False) and echo.calls[0][0] == {"x": "hi"}
    host = driver.record_tool_result(theirs, "3 hits")
    assert host.message is not None and host.message["content"][0]["content"][0]["text"] == "3 hits"
    assert driver.end_step() is True  # the reply called tools: run another step
    req2 = driver.begin_step()
    assert req2 is not None and req2.step == 2 and req2.header_reason is None  # header unchanged
    assert unanswered_calls(req2.messages) == []
    driver.record_reply("done")
    assert driver.end_step() is False
    driver.end_turn("completed")
    assert _types(driver) == [
        "turn/start", "step/start", "user/message", "user/message", "request/header",
        "assistant/message", "tool/call", "tool/result", "tool/call", "tool/result", "step/end",
        "step/start", "assistant/message", "step/end", "turn/end"]
    events = driver.session.events
    results = [e for e in events if e.type == "tool/result"]
    calls = [e for e in events if e.type == "tool/call"]
    assert [r.source_event_seqs for r in results] == [(calls[0].seq,), (calls[1].seq,)]
    assert events[5].data["usage"] == {"inputTokens": 3}
    assert events[5].data["message"]["source"] == {"kind": "model", "provider": "p", "model": "m"}
    assert events[-1].data == {"turn": 1, "reason": {"kind": "completed"}}


def test_the_log_reads_back_through_the_dsh_reader(tmp_path: Any) -> None:
    from fsm_stage.log.events import SessionHeader
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.session import Session

    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=SessionHeader("s", created_at=1, cwd=str(tmp_path))) as log:
        driver = StagedSession(Runtime(), InboxAgent(Session(log)), config={"provider": "p", "model": "m"})
        driver.agent.steer(user_message("hi"))
        driver.start_turn()
        driver.begin_step()
        driver.record_reply("hello", reasoning="think")
        driver.end_step()
        driver.end_turn()
    parsed = read_log(path)
    assert [e.type for e in parsed.events][-2:] == ["step/end", "turn/end"]
    assistant = next(e for e in parsed.events if e.type == "assistant/message")
    assert [b["type"] for b in assistant.data["message"]["content"]] == ["reasoning", "text"]


def test_messages_handed_to_the_host_are_deep_copies() -> None:
    driver, _ = _driver()
    driver.agent.steer(user_message("original"))
    driver.start_turn()
    req = driver.begin_step()
    assert req is not None
    before = json.dumps(driver.session.messages())
    req.messages[1]["content"][0]["text"] = "tampered"
    req.messages[1]["content"].append({"type": "text", "text": "extra"})
    req.request.messages[1]["source"]["kind"] = "tampered"
    assert json.dumps(driver.session.messages()) == before
    properties: dict[str, Any] = req.tools[0].parameters["properties"]
    properties.clear()
    assert driver.runtime.tools["echo"].spec.parameters["properties"] == {"x": {"type": "string"}}
    assert req.messages[1]["content"][0]["text"] == "tampered"  # the host's copy is its own
    assert req.request.messages[1]["content"][0]["text"] == "tampered"  # ...and request copies it
    driver.record_reply("ok")
    driver.end_step()
    driver.agent.steer(user_message("again"))
    assert driver.end_turn() is not None
    driver.start_turn()
    req2 = driver.begin_step()
    assert req2 is not None and req2.messages[1]["content"] == [{"type": "text", "text": "original"}]


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"text": 5}, "text must be a str"),
    ({"tool_calls": [{"id": "c", "name": "echo", "arguments": "{}"}]}, "expected a ToolCall"),
    ({"tool_calls": [ToolCall("c", "echo", cast(Any, {"x": 1}))]}, "arguments must be the JSON text"),
    ({"tool_calls": [ToolCall("", "echo")]}, "call id must be a non-empty string"),
    ({"tool_calls": [ToolCall("c", "")]}, "tool name must be a non-empty string"),
    ({"tool_calls": [ToolCall("c", "echo"), ToolCall("c", "echo")]}, "duplicate tool call ids"),
    ({"tool_calls": ToolCall("c", "echo")}, "sequence of ToolCall"),
    ({"usage": {"t": object()}}, "usage must be JSON-serialisable"),
    ({"usage": [1]}, "usage must be a mapping"),
    ({"reasoning": 3}, "reasoning must be a str"),
])
def test_a_malformed_reply_raises_a_user_error_before_anything_is_written(kwargs: dict[str, Any],
                                                                          needle: str) -> None:
    driver, _ = _driver()
    driver.start_turn()
    driver.begin_step()
    n = len(driver.session)
    with pytest.raises(RecordShapeError, match=needle) as info:
        driver.record_reply(**kwargs)
    assert isinstance(info.value, UserError) and len(driver.session) == n
    driver.record_reply("fine")  # the step still takes its reply


def test_a_malformed_tool_result_raises_before_anything_is_written() -> None:
    driver, _ = _driver()
    driver.start_turn()
    driver.begin_step()
    call = ToolCall.of("web", id="c1")
    driver.record_reply("", [call])
    n = len(driver.session)
    with pytest.raises(RecordShapeError, match="text must be a str"):
        driver.record_tool_result(call, cast(Any, None))
    with pytest.raises(RecordShapeError, match="is_error must be a bool"):
        driver.record_tool_result(call, "x", cast(Any, "yes"))
    with pytest.raises(RecordShapeError, match="differs from the one in the reply"):
        driver.record_tool_result(ToolCall("c1", "other"), "x")
    assert len(driver.session) == n
    driver.record_tool_result(call, "x", True)
    assert driver.session.events[-1].data["message"]["content"][0]["isError"] is True


def test_misuse_raises_clear_errors_and_writes_nothing() -> None:
    driver, _ = _driver()
    with pytest.raises(DriverStateError, match="no turn is open; call start_turn"):
        driver.begin_step()
    with pytest.raises(DriverStateError, match="no turn is open"):
        driver.end_turn()
    driver.start_turn()
    with pytest.raises(DriverStateError, match="turn 1 is still open"):
        driver.start_turn()
    with pytest.raises(DriverStateError, match="no step is open; call begin_step"):
        driver.record_reply("x")
    driver.begin_step()
    with pytest.raises(DriverStateError, match="step 1 is still open"):
        driver.begin_step()
    call = ToolCall.of("echo", {"x": "a"}, id="c1")
    with pytest.raises(DriverStateError, match="not in this step's reply"):
        run(driver.run_tool(call))
    driver.record_reply("", [call])
    with pytest.raises(DriverStateError, match="already has its reply"):
        driver.record_reply("again")
    with pytest.raises(DriverStateError, match="c1 have no result"):
        driver.end_step()
    with pytest.raises(DriverStateError, match="step 1 is open; call end_step"):
        driver.end_turn()
    run(driver.run_tool(call))
    with pytest.raises(DriverStateError, match="already ran"):
        run(driver.run_tool(call))
    with pytest.raises(RecordShapeError, match="reason must be one of"):
        driver.end_turn("interrupted")
    driver.end_step()
    n = len(driver.session)
    with pytest.raises(RecordShapeError, match="message must be a str or None, got dict"):
        driver.end_turn("error", message=cast(Any, {"x": ["\x1b[2J"]}))
    with pytest.raises(RecordShapeError, match="cause must be a str or None, got int"):
        driver.end_turn("aborted", cause=cast(Any, 12345))
    assert _types(driver)[-1] == "step/end" and len(driver.session) == n  # nothing written
    with pytest.raises(TypeError, match="config must be a mapping"):
        StagedSession(Runtime(), new_agent(), config=cast(Any, "p/m"))


def test_a_rejected_or_aborted_step_opens_nothing() -> None:
    calls: list[int] = []
    driver, _ = _driver(accept=lambda agent, batch: False)
    driver.runtime.add_pre_step(lambda a, msgs, aborted: (calls.append(1), msgs)[1])
    driver.agent.steer(user_message("x"))
    driver.start_turn()
    assert driver.begin_step() is None and calls == [] and _types(driver) == ["turn/start"]
    driver.end_turn("blocked")
    driver.accept = None
    driver.start_turn()
    driver.signal.abort("user")
    assert driver.begin_step() is None and calls == []
    driver.end_turn("aborted", cause=driver.signal.reason)
    assert driver.session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


def test_error_turn_end_has_dsh_shape_and_header_changes_are_logged() -> None:
    driver, _ = _driver()
    driver.start_turn()
    driver.begin_step()
    driver.end_step()
    driver.end_turn("error", message="boom")
    assert driver.session.events[-1].data["reason"] == {"kind": "error", "error": {"message": "boom"}}
    driver.runtime.add_section(SystemSection("more", 20, lambda a: "More."))
    driver.start_turn()
    req = driver.begin_step()
    assert req is not None and req.header_reason == "change" and req.system.endswith("More.")
    again = StagedSession(driver.runtime, driver.agent, config=driver.config)
    again.end_step()
    again.end_turn()
    again.start_turn()
    req2 = again.begin_step()
    assert req2 is not None and req2.header_reason == "resume"  # a new driver over a log with headers


def test_a_tool_call_id_reused_later_in_the_turn_is_refused_at_record_reply() -> None:
    driver, _ = _driver()
    driver.start_turn()
    driver.begin_step()
    call = ToolCall.of("web", id="c2")
    driver.record_reply("", [call])
    driver.record_tool_result(call, "done")
    assert driver.end_step() is True
    driver.begin_step()
    n = len(driver.session)
    with pytest.raises(RecordShapeError, match=r"\['c2'\] were used earlier in this turn"):
        driver.record_reply("", [ToolCall.of("web", id="c2")])
    assert len(driver.session) == n
    driver.record_reply("", [ToolCall.of("web", id="c3")])


def test_tool_arguments_nested_too_deep_are_an_error_result() -> None:
    driver, _ = _driver()
    driver.start_turn()
    driver.begin_step()
    call = ToolCall("deep", "echo", "[" * 100_000 + "]" * 100_000)
    driver.record_reply("", [call])
    result = asyncio.run(driver.run_tool(call))
    assert result.is_error and "nested too deeply" in result.text
    assert driver.end_step() is True


@pytest.mark.parametrize("where", ["text", "call id", "arguments", "result"])
def test_a_lone_surrogate_is_a_shape_error_and_nothing_is_written(where: str) -> None:
    driver, _ = _driver()
    driver.start_turn()
    driver.begin_step()
    n = len(driver.session)
    bad = "x\ud800"
    with pytest.raises(RecordShapeError, match="lone surrogate"):
        if where == "text":
            driver.record_reply(bad)
        elif where == "call id":
            driver.record_reply("", [ToolCall(bad, "echo", "{}")])
        elif where == "arguments":
            driver.record_reply("", [ToolCall("c", "echo", '{"x": "' + bad + '"}')])
        else:
            call = ToolCall.of("web", id="c1")
            driver.record_reply("", [call])
            n = len(driver.session)
            driver.record_tool_result(call, bad)
    assert len(driver.session) == n
