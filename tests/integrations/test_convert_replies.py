"""Reply converters: SDK response objects (parsed by the SDKs' own models) become fsm_stage's
reply shape, and a recorded reply converts back to the same ids and arguments."""

from __future__ import annotations

import asyncio
from typing import Any

from sdk_check import sdk

from fsm_stage.driver import Loop, ModelReply, ScriptedModel
from fsm_stage.integrations import (
    Reply,
    reply_from_anthropic,
    reply_from_openai_chat,
    reply_from_openai_responses,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall, ToolOutput, ToolSpec

CHAT = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": "Let me look.", "refusal": None,
        "tool_calls": [{"id": "call_a", "type": "function",
                        "function": {"name": "echo", "arguments": "{\"x\":\"hi\"}"}}]}}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
              "prompt_tokens_details": {"cached_tokens": 100},
              "completion_tokens_details": {"reasoning_tokens": 7}},
}

RESPONSES = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-x", "status": "completed",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
    "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1, "top_p": 1,
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "echo",
         "arguments": "{\"x\":\"hi\"}", "status": "completed"},
    ],
    "usage": {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150,
              "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 7}},
}

ANTHROPIC = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "stop_reason": "tool_use", "stop_sequence": None,
    "content": [{"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_a", "name": "echo", "input": {"x": "hi"}}],
    "usage": {"input_tokens": 20, "output_tokens": 30, "cache_read_input_tokens": 100,
              "cache_creation_input_tokens": 5},
}


def test_chat_completion_reply() -> None:
    openai_chat = sdk("openai.types.chat")
    completion = openai_chat.ChatCompletion.model_validate(CHAT)
    reply = reply_from_openai_chat(completion)
    assert reply == Reply("Let me look.", (ToolCall("call_a", "echo", '{"x":"hi"}'),), None,
                          {"inputTokens": 20, "outputTokens": 30, "cacheReadTokens": 100,
                           "reasoningTokens": 7})
    bare = reply_from_openai_chat(completion.choices[0].message)
    assert bare.tool_calls == reply.tool_calls and bare.usage is None
    assert reply_from_openai_chat(CHAT) == reply  # the dict form reads the same
    deepseek = reply_from_openai_chat({"role": "assistant", "content": "x", "reasoning_content": "why"})
    assert deepseek.reasoning == "why"


def test_responses_reply() -> None:
    responses = sdk("openai.types.responses")
    response = responses.Response.model_validate(RESPONSES)
    reply = reply_from_openai_responses(response)
    assert reply.text == "Let me look." and reply.reasoning == "plan"
    assert reply.tool_calls == (ToolCall("call_a", "echo", '{"x":"hi"}'),)
    assert reply.usage == {"inputTokens": 20, "outputTokens": 30, "cacheReadTokens": 100,
                           "reasoningTokens": 7}
    assert reply_from_openai_responses(list(response.output)).tool_calls == reply.tool_calls


def test_anthropic_reply() -> None:
    types = sdk("anthropic.types")
    message = types.Message.model_validate(ANTHROPIC)
    reply = reply_from_anthropic(message)
    assert reply == Reply("Let me look.", (ToolCall("toolu_a", "echo", '{"x":"hi"}'),), "plan",
                          {"inputTokens": 20, "outputTokens": 30, "cacheReadTokens": 100,
                           "cacheWriteTokens": 5})
    kw = reply.kwargs()
    assert kw == {"text": "Let me look.", "tool_calls": [ToolCall("toolu_a", "echo", '{"x":"hi"}')],
                  "reasoning": "plan", "usage": reply.usage}
    assert kw["usage"] is not reply.usage


class Echo:
    spec = ToolSpec("echo", "Echo.", {"type": "object", "properties": {"x": {"type": "string"}}})

    async def execute(self, args: Any, agent: Any, signal: Any = None) -> ToolOutput:
        return ToolOutput(args, f"echo {args['x']}")


def test_a_recorded_reply_round_trips_to_each_api() -> None:
    """Provider reply → ModelReply → logged → next request → provider shape: same ids/args."""
    sdk("openai")
    sdk("anthropic")
    replies = [reply_from_openai_chat(CHAT), reply_from_openai_responses(RESPONSES),
               reply_from_anthropic(ANTHROPIC)]
    rt = Runtime()
    rt.add_tool(Echo())
    agent = InboxAgent(Session(MemoryLog(SessionHeader("s1"))))
    script: list[Any] = []
    for r in replies:
        kw = r.kwargs()
        script += [ModelReply(text=kw["text"], tool_calls=tuple(kw["tool_calls"]),
                              reasoning=kw["reasoning"], usage=kw["usage"]), ModelReply.say("ok")]
    model = ScriptedModel(script)
    loop = Loop(rt, agent, model)
    for _ in replies:
        asyncio.run(loop.prompt("go"))
    last = model.requests[-1]
    chat_calls = [c for m in to_openai_chat(last)["messages"] for c in m.get("tool_calls", ())]
    assert [(c["id"], c["function"]["arguments"]) for c in chat_calls] == [
        ("call_a", '{"x":"hi"}'), ("call_a", '{"x":"hi"}'), ("toolu_a", '{"x":"hi"}')]
    fc = [i["call_id"] for i in to_openai_responses(last)["input"] if i["type"] == "function_call_output"]
    assert fc == ["call_a", "call_a", "toolu_a"]
    uses = [b for m in to_anthropic_messages(last)["messages"] for b in m["content"]
            if b["type"] == "tool_use"]
    assert [u["input"] for u in uses] == [{"x": "hi"}] * 3
    usages = [e.data.get("usage") for e in agent.session.events if e.type == "assistant/message"]
    assert usages[0] == {"inputTokens": 20, "outputTokens": 30, "cacheReadTokens": 100, "reasoningTokens": 7}
