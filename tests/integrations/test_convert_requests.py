"""Request converters (fsm_stage.integrations.convert): a real reference-loop request in OpenAI
Chat, OpenAI Responses and Anthropic Messages shapes, each item checked against the SDK's own
parameter types; outputs are deep copies; images, reasoning and error results map faithfully."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from sdk_check import check_typed, sdk

from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.integrations import (
    data_url,
    goto_stage_spec_for,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.assembly import Request, SystemSection
from fsm_stage.runtime.messages import notice
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolFailure, ToolOutput, ToolSpec

PNG = b"\x89PNG\r\n\x1a\n-not-really"


class Echo:
    spec = ToolSpec("echo", "Echo x back.",
                    {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                    output={"type": "object", "properties": {"x": {"type": "string"}}})

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        if args.get("x") == "fail":
            raise ToolFailure("asked to fail")
        return ToolOutput({"x": args["x"]}, f"echo {args['x']}")


class GotoStub:
    spec = goto_stage_spec_for(["explore", "implement", "verify"])

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        return ToolOutput({"approved": True, "stage": args["stage"]}, "ok")


def loop_request() -> Request:
    """The third request of a turn: user text, reasoning + text + call, an ok result, a failing
    call and its error result, then a plugin notice."""
    rt = Runtime()
    rt.add_tool(Echo())
    rt.add_tool(GotoStub())
    rt.add_section(SystemSection("base", 10, lambda a: "Be brief."))
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s1"))))
    model = ScriptedModel([
        ModelReply(text="calling", tool_calls=(ToolCall("call_1", "echo", '{"x": "hi"}'),),
                   reasoning="think first"),
        ModelReply(tool_calls=(ToolCall("call_2", "echo", '{"x": "fail"}'),)),
        lambda request: (agent.inject(notice("Heads up.", plugin="probe")), ModelReply.say("done"))[1],
        ModelReply.say("bye"),
    ])
    loop = Loop(rt, agent, model)
    asyncio.run(loop.prompt("hello"))
    asyncio.run(loop.prompt("again"))
    return model.requests[-1]


@pytest.fixture(scope="module")
def request_() -> Request:
    return loop_request()


def test_openai_chat_messages_and_tools_fit_the_sdk_types(request_: Request) -> None:
    chat = sdk("openai.types.chat")
    out = to_openai_chat(request_)
    for m in out["messages"]:
        check_typed(m, chat.ChatCompletionMessageParam)
    for t in out["tools"]:
        check_typed(t, chat.ChatCompletionToolUnionParam if hasattr(chat, "ChatCompletionToolUnionParam")
                    else chat.ChatCompletionToolParam)
    roles = [m["role"] for m in out["messages"]]
    assert roles[:6] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert out["messages"][0] == {"role": "system", "content": "Be brief."}
    assert out["messages"][1] == {"role": "user", "content": "hello"}
    first = out["messages"][2]
    assert first["content"] == "calling" and "reasoning_content" not in first
    assert first["tool_calls"] == [{"id": "call_1", "type": "function",
                                    "function": {"name": "echo", "arguments": '{"x": "hi"}'}}]
    assert out["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "echo hi"}
    assert out["messages"][4]["content"] is None
    assert out["messages"][5]["content"] == "Error: asked to fail"
    assert {"role": "user", "content": "Heads up."} in out["messages"]
    assert [t["function"]["name"] for t in out["tools"]] == ["echo", "goto_stage"]
    dev = to_openai_chat(request_, system_role="developer", reasoning_key="reasoning_content")
    assert dev["messages"][0]["role"] == "developer"
    assert dev["messages"][2]["reasoning_content"] == "think first"


def test_openai_responses_input_and_tools_fit_the_sdk_types(request_: Request) -> None:
    responses = sdk("openai.types.responses")
    out = to_openai_responses(request_, strict=True)
    assert out["instructions"] == "Be brief."
    for item in out["input"]:
        check_typed(item, responses.ResponseInputItemParam)
    for t in out["tools"]:
        check_typed(t, responses.FunctionToolParam)
        assert t["strict"] is True
    kinds = [(i["type"], i.get("role")) for i in out["input"]]
    assert kinds[:6] == [("message", "user"), ("message", "assistant"), ("function_call", None),
                         ("function_call_output", None), ("function_call", None),
                         ("function_call_output", None)]
    assert out["input"][0]["content"] == [{"type": "input_text", "text": "hello"}]
    assert out["input"][2] == {"type": "function_call", "call_id": "call_1", "name": "echo",
                               "arguments": '{"x": "hi"}'}
    assert out["input"][5] == {"type": "function_call_output", "call_id": "call_2",
                               "output": "Error: asked to fail"}
    assert to_openai_responses(Request("", (), ()))["instructions"] is None


def test_anthropic_messages_fit_the_sdk_types_and_alternate(request_: Request) -> None:
    types = sdk("anthropic.types")
    out = to_anthropic_messages(request_)
    assert out["system"] == "Be brief."
    for m in out["messages"]:
        check_typed(m, types.MessageParam)
    for t in out["tools"]:
        check_typed(t, types.ToolParam)
    roles = [m["role"] for m in out["messages"]]
    assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))
    assistant = out["messages"][1]["content"]
    assert assistant == [{"type": "text", "text": "calling"},
                         {"type": "tool_use", "id": "call_1", "name": "echo", "input": {"x": "hi"}}]
    results = [b for m in out["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("call_1", False), ("call_2", True)]
    assert results[1]["content"] == [{"type": "text", "text": "Error: asked to fail"}]
    # tool results open the user turn that follows the tool_use turn
    for i, m in enumerate(out["messages"]):
        if any(b["type"] == "tool_use" for b in m["content"]):
            assert out["messages"][i + 1]["content"][0]["type"] == "tool_result"
    assert "system" not in to_anthropic_messages(Request("", (), ()))


@pytest.mark.parametrize("convert", [to_openai_chat, to_openai_responses, to_anthropic_messages])
def test_outputs_are_deep_copies(request_: Request, convert: Any) -> None:
    before = json.dumps([list(request_.messages), [t.to_json() for t in request_.tools]], sort_keys=True)
    out = convert(request_)

    def scribble(node: Any) -> None:
        if isinstance(node, dict):
            for k in list(node):
                scribble(node[k])
                node[k] = "scribbled"
        elif isinstance(node, list):
            for n in node:
                scribble(n)
            node.append("scribbled")

    scribble(out)
    after = json.dumps([list(request_.messages), [t.to_json() for t in request_.tools]], sort_keys=True)
    assert after == before


def _image_request() -> Request:
    image = {"type": "image", "attachment": {"attachmentId": "sha256:ab", "mediaType": "image/png",
                                             "bytes": len(PNG), "width": 1, "height": 1}}
    user = {"id": "u1", "role": "user", "source": {"kind": "user"},
            "content": [image, {"type": "text", "text": "what is this?"}]}
    assistant = {"id": "a1", "role": "assistant", "source": {"kind": "model"},
                 "content": [{"type": "reasoning", "text": "hmm", "signature": "sig"},
                             {"type": "text", "text": "a pixel"}]}
    empty = {"id": "a2", "role": "assistant", "source": {"kind": "model"}, "content": []}
    return Request("sys", (user, assistant, empty), ())


def resolve(att: Any) -> str:
    assert att["attachmentId"] == "sha256:ab"
    return data_url(att["mediaType"], PNG)


def test_images_map_to_each_api_and_need_a_resolver() -> None:
    chat, responses = sdk("openai.types.chat"), sdk("openai.types.responses")
    anthropic = sdk("anthropic.types")
    req = _image_request()
    url = data_url("image/png", PNG)
    c = to_openai_chat(req, images=resolve)
    assert c["messages"][1]["content"] == [{"type": "image_url", "image_url": {"url": url}},
                                           {"type": "text", "text": "what is this?"}]
    assert len(c["messages"]) == 3  # the empty assistant message is skipped, as in the surface
    for m in c["messages"]:
        check_typed(m, chat.ChatCompletionMessageParam)
    r = to_openai_responses(req, images=resolve)
    assert r["input"][0]["content"][0] == {"type": "input_image", "image_url": url, "detail": "auto"}
    for i in r["input"]:
        check_typed(i, responses.ResponseInputItemParam)
    a = to_anthropic_messages(req, images=resolve)
    src = a["messages"][0]["content"][0]["source"]
    assert src["type"] == "base64" and src["media_type"] == "image/png"
    assert a["messages"][1]["content"][0] == {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    assert len(a["messages"]) == 2
    for m in a["messages"]:
        check_typed(m, anthropic.MessageParam)
    hosted = to_anthropic_messages(req, images=lambda att: "https://example.test/x.png")
    assert hosted["messages"][0]["content"][0]["source"] == {"type": "url", "url": "https://example.test/x.png"}
    for convert in (to_openai_chat, to_openai_responses, to_anthropic_messages):
        with pytest.raises(ValueError, match=r"sha256:ab.*image resolver"):
            convert(req)


def test_images_inside_tool_results() -> None:
    """Responses and Anthropic carry a result's image in the result; Chat (text-only tool
    messages) sends it in one user message after the run of tool messages."""
    chat, responses = sdk("openai.types.chat"), sdk("openai.types.responses")
    anthropic = sdk("anthropic.types")
    image = {"type": "image", "attachment": {"attachmentId": "sha256:ab", "mediaType": "image/png"}}

    def result(call_id: str, *content: dict[str, Any]) -> dict[str, Any]:
        return {"id": f"r{call_id}", "role": "user", "source": {"kind": "tool", "callId": call_id},
                "content": [{"type": "tool-result", "toolCallId": call_id, "isError": False,
                             "content": list(content)}]}

    calls = {"id": "a", "role": "assistant", "source": {"kind": "model"}, "content": [
        {"type": "tool-call", "id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "tool-call", "id": "c2", "name": "shot", "arguments": "{}"}]}
    req = Request("", (calls, result("c1", {"type": "text", "text": "one"}, image),
                       result("c2", {"type": "text", "text": "two"})), ())
    c = to_openai_chat(req, images=resolve)["messages"]
    assert [m["role"] for m in c] == ["assistant", "tool", "tool", "user"]
    assert c[1]["content"] == "one"
    assert c[3]["content"] == [{"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}]
    for m in c:
        check_typed(m, chat.ChatCompletionMessageParam)
    r = to_openai_responses(req, images=resolve)["input"]
    url = data_url("image/png", PNG)
    assert r[2]["output"] == [{"type": "input_text", "text": "one"},
                              {"type": "input_image", "image_url": url, "detail": "auto"}]
    for i in r:
        check_typed(i, responses.ResponseInputItemParam)
    a = to_anthropic_messages(req, images=resolve)["messages"]
    assert [b["type"] for b in a[1]["content"][0]["content"]] == ["text", "image"]
    for m in a:
        check_typed(m, anthropic.MessageParam)
