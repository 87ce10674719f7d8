"""Request and reply converters: fsm_stage's DSH-shaped request ⇄ provider API shapes.

``to_openai_chat``, ``to_openai_responses`` and ``to_anthropic_messages`` turn a ``Request``
(system text, DSH messages, tool specs) into the keyword arguments of the matching SDK call,
as fresh plain dicts and lists (deep copies: a host may mutate them freely). DSH blocks map
to: ``text`` → text parts; ``image`` → image parts (an ``ImageResolver`` gives the URL);
``tool-call`` → assistant ``tool_calls`` / ``function_call`` items / ``tool_use`` blocks;
``tool-result`` → ``tool`` messages / ``function_call_output`` items / ``tool_result`` blocks
(``is_error`` where the API has it; elsewhere the ``Error: `` prefix of the text says so);
``reasoning`` is dropped unless the API has a slot (see each function). Assistant messages
with no content are skipped, as in the DSH surface.

``reply_from_openai_chat``, ``reply_from_openai_responses`` and ``reply_from_anthropic`` take
an SDK response (model object or dict) and return a ``Reply`` (text, ``ToolCall``s with ids
and JSON-string arguments, reasoning, DSH-style usage) for ``record_reply(**reply.kwargs())``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import attrs

from fsm_stage.integrations.toolspecs import to_anthropic, to_openai
from fsm_stage.runtime.assembly import Request
from fsm_stage.runtime.tools import ToolCall

ImageResolver = Callable[[Mapping[str, Any]], str]
"""``(attachment) -> URL``: an ``https:`` URL or a ``data:<mediaType>;base64,…`` URL."""

__all__ = [
    "ImageResolver",
    "Reply",
    "data_url",
    "reply_from_anthropic",
    "reply_from_openai_chat",
    "reply_from_openai_responses",
    "to_anthropic_messages",
    "to_openai_chat",
    "to_openai_responses",
    "usage_from_totals",
]


def data_url(media_type: str, data: bytes) -> str:
    """``data:<media_type>;base64,<data>`` (a URL every target accepts for an image)."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, Iterable):
        return []
    return [_plain(b) for b in content if isinstance(b, Mapping)]


def _image_url(block: Mapping[str, Any], resolve: ImageResolver | None) -> str:
    att = block.get("attachment")
    att = att if isinstance(att, Mapping) else {}
    for holder in (block, att):
        if isinstance(holder.get("url"), str):
            return str(holder["url"])
    if resolve is None:
        raise ValueError(f"image attachment {att.get('attachmentId')!r} needs an image resolver "
                         "(pass images=callable(attachment) -> URL)")
    return resolve(att)


def _text_of(blocks: Iterable[Mapping[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def _call_of(block: Mapping[str, Any]) -> ToolCall:
    args = block.get("arguments", "{}")
    return ToolCall(str(block.get("id")), str(block.get("name")),
                    args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))


def _args_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


# ---- OpenAI Chat Completions ------------------------------------------------------------------


def _chat_list(blocks: Iterable[Mapping[str, Any]], resolve: ImageResolver | None) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if b.get("type") == "text":
            parts.append({"type": "text", "text": str(b.get("text", ""))})
        elif b.get("type") == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(b, resolve)}})
    return parts


def _simplify(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    return str(parts[0]["text"]) if len(parts) == 1 and parts[0]["type"] == "text" else parts


def to_openai_chat(
    request: Request,
    *,
    strict: bool = False,
    system_role: Literal["system", "developer"] = "system",
    images: ImageResolver | None = None,
    reasoning_key: str | None = None,
) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` for ``client.chat.completions.create(**out)``.

    ``messages`` items are ``ChatCompletionMessageParam``: the system text first (role
    ``system_role``; omitted when empty), user messages (a string for one text block, else
    text/``image_url`` parts), assistant messages (``content`` text or None, ``tool_calls``),
    and one ``{"role": "tool", "tool_call_id", "content"}`` per tool result (Chat has no error
    flag; the text carries ``Error: ``; images in results, which a tool message cannot hold,
    follow the run of tool messages as one user message). Reasoning is dropped unless
    ``reasoning_key`` names the assistant field a provider reads it back from (DeepSeek:
    ``"reasoning_content"``).
    ``tools`` are ``to_openai(spec, strict=strict)``; empty when the request has none. Raises
    ``ValueError`` for an image with no URL and no ``images`` resolver.
    """
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": system_role, "content": request.system})
    held: list[dict[str, Any]] = []  # tool-result images, sent after the run of tool messages
    for message in request.messages:
        blocks = _blocks(message)
        if held and not (blocks and all(b.get("type") == "tool-result" for b in blocks)):
            out.append({"role": "user", "content": held})
            held = []
        if message.get("role") == "assistant":
            text = _text_of(blocks)
            calls = [_call_of(b) for b in blocks if b.get("type") == "tool-call"]
            reasoning = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "reasoning")
            if not text and not calls and not (reasoning_key and reasoning):
                continue
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = [{"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}}
                                      for c in calls]
            if reasoning_key and reasoning:
                item[reasoning_key] = reasoning
            out.append(item)
            continue
        rest = [b for b in blocks if b.get("type") != "tool-result"]
        for b in blocks:
            if b.get("type") == "tool-result":
                inner = [x for x in b.get("content") or () if isinstance(x, Mapping)]
                out.append({"role": "tool", "tool_call_id": str(b.get("toolCallId")),
                            "content": _text_of(inner)})
                pics = [x for x in inner if x.get("type") == "image"]
                if pics:
                    held += _chat_list(pics, images)
        parts = _chat_list(rest, images)
        if parts:
            out.append({"role": "user", "content": _simplify(parts)})
    if held:
        out.append({"role": "user", "content": held})
    return {"messages": out, "tools": [to_openai(t, strict=strict, api="chat") for t in request.tools]}


# ---- OpenAI Responses -------------------------------------------------------------------------


def _input_parts(blocks: Iterable[Mapping[str, Any]], resolve: ImageResolver | None) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if b.get("type") == "text":
            parts.append({"type": "input_text", "text": str(b.get("text", ""))})
        elif b.get("type") == "image":
            parts.append({"type": "input_image", "image_url": _image_url(b, resolve), "detail": "auto"})
    return parts


def to_openai_responses(
    request: Request, *, strict: bool = False, images: ImageResolver | None = None
) -> dict[str, Any]:
    """``{"instructions", "input": [...], "tools": [...]}`` for ``client.responses.create(**out)``.

    ``instructions`` is the system text (None when empty). ``input`` items are
    ``ResponseInputItemParam``: user messages ``{"type": "message", "role": "user", "content":
    [input_text / input_image parts]}``, assistant text ``{"type": "message", "role":
    "assistant", "content": str}``, each tool call ``{"type": "function_call", "call_id",
    "name", "arguments"}`` and each tool result ``{"type": "function_call_output", "call_id",
    "output"}`` (a string, or parts when it holds images; no error flag, the text carries
    ``Error: ``). Reasoning is dropped (Responses reasoning items are the API's own, by id).
    ``tools`` are the flat ``FunctionToolParam`` form. Raises ``ValueError`` like
    ``to_openai_chat`` for unresolvable images.
    """
    items: list[dict[str, Any]] = []
    for message in request.messages:
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            text = _text_of(blocks)
            if text:
                items.append({"type": "message", "role": "assistant", "content": text})
            for b in blocks:
                if b.get("type") == "tool-call":
                    c = _call_of(b)
                    items.append({"type": "function_call", "call_id": c.id, "name": c.name,
                                  "arguments": c.arguments})
            continue
        rest = [b for b in blocks if b.get("type") != "tool-result"]
        for b in blocks:
            if b.get("type") == "tool-result":
                inner = [x for x in b.get("content") or () if isinstance(x, Mapping)]
                output: Any = (_input_parts(inner, images) if any(x.get("type") == "image" for x in inner)
                               else _text_of(inner))
                items.append({"type": "function_call_output", "call_id": str(b.get("toolCallId")),
                              "output": output})
        parts = _input_parts(rest, images)
        if parts:
            items.append({"type": "message", "role": "user", "content": parts})
    return {"instructions": request.system or None, "input": items,
            "tools": [to_openai(t, strict=strict, api="responses") for t in request.tools]}


# ---- Anthropic Messages -----------------------------------------------------------------------


def _anthropic_image(block: Mapping[str, Any], resolve: ImageResolver | None) -> dict[str, Any]:
    url = _image_url(block, resolve)
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": head, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _anthropic_content(
    blocks: Iterable[Mapping[str, Any]], resolve: ImageResolver | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text" and b.get("text"):
            out.append({"type": "text", "text": str(b["text"])})
        elif kind == "image":
            out.append(_anthropic_image(b, resolve))
        elif kind == "reasoning" and isinstance(b.get("signature"), str):
            out.append({"type": "thinking", "thinking": str(b.get("text", "")), "signature": b["signature"]})
        elif kind == "tool-call":
            c = _call_of(b)
            out.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _args_object(c.arguments)})
        elif kind == "tool-result":
            inner = [x for x in b.get("content") or () if isinstance(x, Mapping)]
            out.append({"type": "tool_result", "tool_use_id": str(b.get("toolCallId")),
                        "content": _anthropic_content(inner, resolve),
                        "is_error": bool(b.get("isError", False))})
    return out


def to_anthropic_messages(request: Request, *, images: ImageResolver | None = None) -> dict[str, Any]:
    """``{"system", "messages": [...], "tools": [...]}`` for ``client.messages.create(**out)``.

    ``system`` is the system text (omitted when empty). ``messages`` are ``MessageParam`` with
    block lists; consecutive messages of one role are merged into one turn (tool results then
    notices become one user turn, ``tool_result`` blocks first as the API requires). Tool
    calls become ``tool_use`` blocks (``input`` is the parsed arguments; ``{}`` when they are
    not a JSON object), results ``tool_result`` blocks with ``is_error``. Reasoning is kept as
    a ``thinking`` block only when the DSH block carries a ``signature``; empty text blocks
    are dropped (the API refuses them). Raises ``ValueError`` for unresolvable images.
    """
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        role = "assistant" if message.get("role") == "assistant" else "user"
        content = _anthropic_content(_blocks(message), images)
        if not content:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": role, "content": content})
    out: dict[str, Any] = {"messages": messages, "tools": [to_anthropic(t) for t in request.tools]}
    if request.system:
        out = {"system": request.system, **out}
    return out


# ---- replies ----------------------------------------------------------------------------------


@attrs.frozen
class Reply:
    """A model reply in fsm_stage's shape: ``text``, ``tool_calls`` (``ToolCall`` with the
    provider's ids and JSON-string arguments), ``reasoning`` (or None) and DSH-style ``usage``
    (``{"inputTokens", "outputTokens"[, "cacheReadTokens", "cacheWriteTokens",
    "reasoningTokens"]}``, ``inputTokens`` excluding cache reads, or None)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    usage: dict[str, int] | None = None

    def kwargs(self) -> dict[str, Any]:
        """``{"text", "tool_calls": [ToolCall...], "reasoning", "usage"}`` for ``record_reply``."""
        return {"text": self.text, "tool_calls": list(self.tool_calls),
                "reasoning": self.reasoning, "usage": None if self.usage is None else dict(self.usage)}


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return _plain(obj)  # type: ignore[no-any-return]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=False)  # type: ignore[no-any-return]
    raise TypeError(f"expected a mapping or an SDK model, got {type(obj).__name__}")


def _int(d: Mapping[str, Any] | None, key: str) -> int:
    v = (d or {}).get(key)
    return v if isinstance(v, int) else 0


def _usage(input_total: int, output: int, cache_read: int, cache_write: int, reasoning: int,
           *, input_includes_cache: bool) -> dict[str, int]:
    out = {"inputTokens": input_total - cache_read if input_includes_cache else input_total,
           "outputTokens": output}
    for key, val in (("cacheReadTokens", cache_read), ("cacheWriteTokens", cache_write),
                     ("reasoningTokens", reasoning)):
        if val:
            out[key] = val
    return out


def usage_from_totals(input_total: Any, output: Any, *, cache_read: Any = 0, cache_write: Any = 0,
                      reasoning: Any = 0) -> dict[str, int] | None:
    """DSH-style usage (``Reply.usage``) from a framework's per-request counts whose input total
    includes cache reads and writes, as pydantic-ai's ``RequestUsage``, LangChain's
    ``usage_metadata`` and the Agents SDK's ``Usage`` count them; a count that is not a
    non-negative int reads as 0. None when nothing was counted (the framework had no usage)."""
    n = [v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0
         for v in (input_total, output, cache_read, cache_write, reasoning)]
    if not any(n):
        return None
    read, write = min(n[2], n[0]), min(n[3], max(0, n[0] - n[2]))
    return _usage(n[0] - write, n[1], read, write, n[4], input_includes_cache=True)


def reply_from_openai_chat(completion: Any) -> Reply:
    """A ``Reply`` from a Chat Completions ``ChatCompletion`` (first choice, with usage) or a
    bare ``ChatCompletionMessage`` (no usage); model objects or their dicts. Reasoning is read
    from ``reasoning_content`` / ``reasoning`` when a provider sends it. Raises ``TypeError``
    for another kind of object and ``ValueError`` for a completion with no choices."""
    d = _as_dict(completion)
    usage: dict[str, int] | None = None
    if "choices" in d:
        if not d["choices"]:
            raise ValueError("chat completion has no choices")
        u = d.get("usage")
        if isinstance(u, Mapping):
            usage = _usage(_int(u, "prompt_tokens"), _int(u, "completion_tokens"),
                           _int(u.get("prompt_tokens_details"), "cached_tokens"), 0,
                           _int(u.get("completion_tokens_details"), "reasoning_tokens"),
                           input_includes_cache=True)
        d = d["choices"][0].get("message") or {}
    calls = tuple(ToolCall(str(c["id"]), str(c["function"]["name"]),
                           str(c["function"].get("arguments") or "{}"))
                  for c in d.get("tool_calls") or () if c.get("type", "function") == "function")
    reasoning = d.get("reasoning_content") or d.get("reasoning")
    return Reply(d.get("content") or "", calls, reasoning if isinstance(reasoning, str) else None, usage)


def reply_from_openai_responses(response: Any) -> Reply:
    """A ``Reply`` from a Responses API ``Response`` (or its ``output`` item list): text from
    ``message`` items' ``output_text`` parts, calls from ``function_call`` items (``call_id``),
    reasoning from ``reasoning`` items' summaries/content, usage from ``response.usage``."""
    if isinstance(response, list | tuple):
        d: dict[str, Any] = {"output": [_as_dict(i) for i in response]}
    else:
        d = _as_dict(response)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for item in d.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            texts += [str(p.get("text", "")) for p in item.get("content") or ()
                      if p.get("type") == "output_text"]
        elif kind == "function_call":
            calls.append(ToolCall(str(item["call_id"]), str(item["name"]),
                                  str(item.get("arguments") or "{}")))
        elif kind == "reasoning":
            parts = [*(item.get("summary") or ()), *(item.get("content") or ())]
            thoughts += [str(p.get("text", "")) for p in parts if isinstance(p, Mapping)]
    usage: dict[str, int] | None = None
    u = d.get("usage")
    if isinstance(u, Mapping):
        usage = _usage(_int(u, "input_tokens"), _int(u, "output_tokens"),
                       _int(u.get("input_tokens_details"), "cached_tokens"),
                       _int(u.get("input_tokens_details"), "cache_write_tokens"),
                       _int(u.get("output_tokens_details"), "reasoning_tokens"), input_includes_cache=True)
    return Reply("".join(texts), tuple(calls), "\n\n".join(t for t in thoughts if t) or None, usage)


def reply_from_anthropic(message: Any) -> Reply:
    """A ``Reply`` from an Anthropic ``Message`` (or its dict): ``text`` blocks joined,
    ``tool_use`` blocks as calls (``input`` serialised to compact JSON), ``thinking`` blocks as
    reasoning, usage (``input_tokens`` already excludes cache reads)."""
    d = _as_dict(message)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for b in d.get("content") or ():
        kind = b.get("type")
        if kind == "text":
            texts.append(str(b.get("text", "")))
        elif kind == "thinking":
            thoughts.append(str(b.get("thinking", "")))
        elif kind == "tool_use":
            calls.append(ToolCall(str(b["id"]), str(b["name"]),
                                  json.dumps(b.get("input") or {}, ensure_ascii=False,
                                             separators=(",", ":"))))
    usage: dict[str, int] | None = None
    u = d.get("usage")
    if isinstance(u, Mapping):
        usage = _usage(_int(u, "input_tokens"), _int(u, "output_tokens"), _int(u, "cache_read_input_tokens"),
                       _int(u, "cache_creation_input_tokens"), 0, input_includes_cache=False)
    return Reply("".join(texts), tuple(calls), "\n\n".join(t for t in thoughts if t) or None, usage)
