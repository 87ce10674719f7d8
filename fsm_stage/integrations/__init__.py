"""Integrations with model APIs and agent frameworks.

``fsm_stage.integrations.convert``: a ``Request`` as OpenAI Chat / Responses / Anthropic
Messages arguments, and provider replies back to fsm_stage's reply shape.
``fsm_stage.integrations.toolspecs``: ``ToolSpec`` exports (OpenAI chat/responses, strict
mode, Anthropic, MCP, Gemini) and ``goto_stage`` with a stage ``enum``. Both produce plain
dicts and import no SDK; framework adapters live in sibling modules and import their SDK
lazily. See docs/integrations.md.
"""

from __future__ import annotations

from fsm_stage.integrations.convert import (
    ImageResolver,
    Reply,
    data_url,
    reply_from_anthropic,
    reply_from_openai_chat,
    reply_from_openai_responses,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
    usage_from_totals,
)
from fsm_stage.integrations.toolspecs import (
    export_specs,
    goto_stage_spec_for,
    strict_schema,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai,
    with_stage_enum,
)

__all__ = [
    "ImageResolver",
    "Reply",
    "data_url",
    "export_specs",
    "goto_stage_spec_for",
    "reply_from_anthropic",
    "reply_from_openai_chat",
    "reply_from_openai_responses",
    "strict_schema",
    "to_anthropic",
    "to_anthropic_messages",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "to_openai_chat",
    "to_openai_responses",
    "usage_from_totals",
    "with_stage_enum",
]
