"""Tool and command seams (docs/contracts.md S7/S8; docs/session-log.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from runtime_helpers import Echo, new_agent, run

from fsm_stage.constants import COMMAND_DONE, COMMAND_RUN, TOOL_CALL, TOOL_RESULT
from fsm_stage.runtime.abort import AbortSignal
from fsm_stage.runtime.commands import CommandRegistry, CommandReply, CommandSpec, parse_command
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.tools import ToolCall, dispatch_tool


def test_schema_export_shapes() -> None:
    """ToolSpec exports the OpenAI, Anthropic and DSH request-header shapes."""
    spec = Echo.spec
    assert spec.to_openai() == {"type": "function", "function": {
        "name": "echo", "description": "Echo x back.", "parameters": dict(spec.parameters)}}
    assert spec.to_anthropic() == {"name": "echo", "description": "Echo x back.",
                                   "input_schema": dict(spec.parameters)}
    assert spec.to_json()["output"] == {"type": "object"}
    exported = spec.to_openai()
    exported["function"]["parameters"]["required"].append("y")
    assert spec.parameters["required"] == ["x"]  # exports are copies


def test_dispatch_logs_call_and_result_dsh_style() -> None:
    """tool/call then tool/result (surface append, citing the call); failures get `Error: `."""
    agent, echo = new_agent(), Echo()
    signal = AbortSignal()
    ok = run(dispatch_tool({"echo": echo}, ToolCall("c1", "echo", '{"x": "hi"}'), agent,
                           session=agent.session, turn=1, step=2, signal=signal))
    assert not ok.is_error and ok.text == "echo hi" and ok.value == {"x": "hi"}
    call_ev, res_ev = agent.session.events
    assert call_ev.type == TOOL_CALL
    assert call_ev.data == {"turn": 1, "step": 2, "callId": "c1", "name": "echo", "arguments": '{"x": "hi"}'}
    assert res_ev.type == TOOL_RESULT and res_ev.surface_op == "append"
    assert res_ev.source_event_seqs == (call_ev.seq,)
    block = res_ev.data["message"]["content"][0]
    text = [{"type": "text", "text": "echo hi"}]
    assert block == {"type": "tool-result", "toolCallId": "c1", "content": text, "isError": False}
    assert res_ev.data["message"]["source"] == {"kind": "tool", "callId": "c1"}
    assert echo.calls[0][2] is signal

    failing = ToolCall("c2", "echo", '{"x": "fail"}')
    bad = run(dispatch_tool({"echo": echo}, failing, agent, session=agent.session))
    assert bad.is_error and bad.text == "Error: asked to fail"
    assert agent.session.events[-1].data["message"]["content"][0]["isError"] is True


@pytest.mark.parametrize(("name", "arguments", "needle"), [
    ("nope", "{}", "unknown tool nope"), ("echo", "{bad", "not valid JSON"),
    ("echo", "[1]", "must be a JSON object"), ("echo", '{"x": "crash"}', "bug"),
])
def test_dispatch_failures_never_crash(name: str, arguments: str, needle: str) -> None:
    """Unknown tools, bad arguments and tool bugs become error results."""
    res = run(dispatch_tool({"echo": Echo()}, ToolCall("c", name, arguments), None))
    assert res.is_error and res.text.startswith("Error: ") and needle in res.text


def test_parse_command_keeps_separator_whitespace() -> None:
    """Raw input is everything after the name, separator whitespace included (DSH args)."""
    assert parse_command("/plan  draft it ") != parse_command("/plan draft it ")  # not normalised
    p = parse_command("/Plan  draft it ")
    assert p is not None and (p.name, p.raw_input) == ("plan", "  draft it ")
    p2 = parse_command("/plan")
    assert p2 is not None and p2.raw_input == ""
    p3 = parse_command("/plan\n\nmulti\nline")
    assert p3 is not None and p3.raw_input == "\n\nmulti\nline"
    assert parse_command("plan") is None and parse_command("/") is None and parse_command("/ x") is None


class Recorder:
    def __init__(
        self, spec: CommandSpec, reply: CommandReply | BaseException | None = None, *, is_async: bool = False
    ) -> None:
        self.spec = spec
        self.reply = reply or CommandReply.success("done")
        self.is_async = is_async
        self.seen: list[tuple[str, Sequence[Any]]] = []

    def handle(self, agent: Any, raw_input: str, images: Sequence[Any]) -> Any:
        self.seen.append((raw_input, images))
        reply = self.reply
        if isinstance(reply, BaseException):
            raise reply
        if self.is_async:
            async def later() -> CommandReply:
                return reply
            return later()
        return reply


def test_command_dispatch_logs_run_and_done() -> None:
    """command/run {commandId, name, args, source} before the handler, command/done after."""
    reg, agent = CommandRegistry(), new_agent()
    rec = Recorder(CommandSpec("hello", "Say hello"))
    reg.register(rec)
    reply = run(reg.run(agent, "/hello  world"))
    assert reply == CommandReply.success("done") and rec.seen == [("  world", ())]
    run_ev, done_ev = agent.session.events
    assert run_ev.type == COMMAND_RUN and run_ev.data["name"] == "hello" and run_ev.data["args"] == "  world"
    assert run_ev.data["source"] == {"kind": "user"}
    cid = run_ev.data["commandId"]
    assert cid.startswith("cmd-") and done_ev.data["commandId"] == cid
    assert done_ev.type == COMMAND_DONE and done_ev.data == {"commandId": run_ev.data["commandId"],
                                                             "kind": "success", "text": "done"}
    assert run(reg.run(agent, "/unknown")) is None and run(reg.run(agent, "hello")) is None
    assert len(agent.session) == 2


def test_command_failures_settle_as_error() -> None:
    """Raising handlers, refused images and record_input=False; async handlers are awaited."""
    reg, agent = CommandRegistry(), new_agent()
    reg.register(Recorder(CommandSpec("boom", "x"), RuntimeError("it broke")))
    reg.register(Recorder(CommandSpec("quiet", "x", record_input=False), is_async=True))
    assert run(reg.run(agent, "/boom")) == CommandReply.error("it broke")
    assert run(reg.run(agent, "/quiet secret")) == CommandReply.success("done")
    assert "args" not in agent.session.events[-2].data
    reply = run(reg.run(agent, "/quiet", [{"type": "image"}]))
    assert reply is not None and reply.kind == "error" and "images" in reply.text
    with pytest.raises(ValueError):
        reg.register(Recorder(CommandSpec("boom", "again")))


def test_cancelled_command_settles_as_error_and_propagates() -> None:
    """A handler cancelled mid-way still gets its command/done (error)."""
    reg, agent = CommandRegistry(), new_agent()

    class Slow:
        spec = CommandSpec("slow", "x")

        async def handle(self, agent: Any, raw_input: str, images: Any) -> CommandReply:
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

    reg.register(Slow())

    async def scenario() -> None:
        task = asyncio.ensure_future(reg.run(agent, "/slow"))
        while len(agent.session) < 1:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert [e.type for e in agent.session.events] == [COMMAND_RUN, COMMAND_DONE]
    assert agent.session.events[-1].data["kind"] == "error"


def test_runtime_optional_registries_and_disposers() -> None:
    """Runtime(commands=False) has no registry; disposers are idempotent; duplicates refused."""
    rt = Runtime(commands=False, projections=False)
    assert rt.commands is None and rt.projections is None
    with pytest.raises(RuntimeError):
        rt.add_command(Recorder(CommandSpec("x", "y")))
    dispose = rt.add_tool(Echo())
    with pytest.raises(ValueError):
        rt.add_tool(Echo())
    dispose()
    dispose()
    assert rt.tools == {}
    res = run(rt.call_tool(None, ToolCall("c", "echo", json.dumps({"x": "1"}))))
    assert res.is_error


def test_current_call_id_is_the_running_calls_id_or_a_fresh_one_outside_a_call() -> None:
    import re

    from fsm_stage.runtime.tools import ToolOutput, ToolSpec, current_call_id, execute_tool

    outside = {current_call_id() for _ in range(50)}
    assert len(outside) == 50 and all(re.fullmatch(r"call_[0-9a-f]{20}", i) for i in outside)
    seen: list[str] = []

    class Probe:
        spec = ToolSpec("probe", "Report the call id.", {"type": "object"})

        async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
            seen.append(current_call_id())
            return ToolOutput("ok")

    run(execute_tool({"probe": Probe()}, ToolCall.of("probe", {}, id="call_model_7"), new_agent(), None))
    assert seen == ["call_model_7"]
