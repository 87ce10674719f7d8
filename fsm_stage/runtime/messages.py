"""Message builders (docs/contracts.md, S12).

Messages are plain JSON dicts in the DSH shape, exactly as they are logged as the ``data`` of a
``user/message`` event::

    {"id": "<uuid4>", "role": "user", "content": [block, ...], "source": {...}}

Content blocks: text ``{"type": "text", "text": str}``; image ``{"type": "image",
"attachment": {attachmentId, mediaType, bytes, width, height}}`` (admitted by the host).
Sources: ``{"kind": "user"}``; a plugin notice ``{"kind": "plugin", "plugin": <name>,
"form": "notice", "summary": <text>}``; the stage switch's own kind ``{"kind": "stage-switch",
"form": "notice", "summary": "Current stage: <name>"}``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fsm_stage.constants import NOTICE_FORM, STAGE_SOURCE_KIND

Message = dict[str, Any]
Block = dict[str, Any]
IdFactory = Callable[[], str]


def new_id() -> str:
    """A fresh message id: a random (version 4) UUID string, like DSH's ``createUserMessage``
    (``uuid.uuid4()``'s bits and text, built without the ``UUID`` object)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = b.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def text_block(text: str) -> Block:
    """``{"type": "text", "text": text}``."""
    return {"type": "text", "text": text}


def user_source() -> dict[str, Any]:
    """The source of a message typed by the user: ``{"kind": "user"}``."""
    return {"kind": "user"}


def user_message(
    text: str | None = None,
    *,
    images: Sequence[Block] = (),
    source: Mapping[str, Any] | None = None,
    id_factory: IdFactory = new_id,
) -> Message:
    """A user-role message: image blocks first (in order), then one text block when ``text``.

    ``text`` is used as given (callers trim). An empty string adds no text block (B60, B61).
    """
    content: list[Block] = [dict(b) for b in images]
    if text:
        content.append(text_block(text))
    return {
        "id": id_factory(),
        "role": "user",
        "content": content,
        "source": dict(source) if source is not None else user_source(),
    }


def notice(
    text: str,
    *,
    plugin: str,
    summary: str | None = None,
    id_factory: IdFactory = new_id,
) -> Message:
    """A plugin notice: one text block; source ``{kind: plugin, plugin, form: notice, summary}``.

    ``summary`` defaults to ``text`` (plan mode's notices use the text as their summary).
    """
    return {
        "id": id_factory(),
        "role": "user",
        "content": [text_block(text)],
        "source": {"kind": "plugin", "plugin": plugin, "form": NOTICE_FORM,
                   "summary": text if summary is None else summary},
    }


def stage_notice(text: str, *, summary: str, id_factory: IdFactory = new_id) -> Message:
    """A stage-switch record message: source ``{kind: "stage-switch", form: "notice", summary}``.

    ``summary`` must be ``Current stage: <name>`` or ``Stage switched to <name>`` (docs/contracts.md).
    """
    return {
        "id": id_factory(),
        "role": "user",
        "content": [text_block(text)],
        "source": {"kind": STAGE_SOURCE_KIND, "form": NOTICE_FORM, "summary": summary},
    }


def message_text(message: Mapping[str, Any]) -> str:
    """The message's text blocks joined with ``""`` (non-text blocks skipped; tolerant of legacy)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, Iterable):
        for block in content:
            if (isinstance(block, Mapping) and block.get("type") == "text"
                    and isinstance(block.get("text"), str)):
                parts.append(block["text"])
    return "".join(parts)


def source_of(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """The message's ``source`` mapping (``{}`` when absent or malformed)."""
    src = message.get("source")
    return src if isinstance(src, Mapping) else {}
