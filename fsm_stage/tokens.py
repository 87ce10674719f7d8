"""Token meter: a price, in tokens, of what the model currently sees (the surface).

The stage switch prices the surface once per ``goto_stage`` call: with ``min_handoff_tokens``
configured, a surface at or above it takes a full transition (handoff document, surface
archived), below it a light one (the new stage prompt is appended).

``TokenMeter`` is the protocol ``surface_tokens(session) -> int``. ``HeuristicTokenMeter``,
the default, prices each node the surface shows (``surface_events``) as the tokens of its
model-visible text (``visible_text``) + ``IMAGE_TOKENS`` per image + ``per_message_overhead``.
Text (``count_text``): one token per ``WIDE_CHARS`` character (CJK, kana, hangul, full-width,
emoji), ``ceil(n / chars_per_token)`` for code points below U+0370, and
``ceil(n / (chars_per_token / 2))`` for the rest; ``"hello мир 世界"`` = 2 + 2 + 2 = 6.
``HeuristicTokenMeter(tokenizer=lambda s: len(enc.encode(s)))`` counts text with a real
tokenizer instead. Rules and why: ``docs/runtime-decisions.md``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from fsm_stage.log.events import Event

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "DEFAULT_PER_MESSAGE_OVERHEAD",
    "IMAGE_TOKENS",
    "WIDE_CHARS",
    "HeuristicTokenMeter",
    "TokenMeter",
    "Tokenizer",
    "surface_events",
    "visible_text",
]

DEFAULT_CHARS_PER_TOKEN = 4
"""Characters per token of the default heuristic (the DSH token meter's ratio)."""

DEFAULT_PER_MESSAGE_OVERHEAD = 4
"""Tokens added per surface message for role markers and separators."""

IMAGE_TOKENS = 765
"""Flat price of one image block (a 1024x1024 image at high detail on common providers)."""

WIDE_CHARS: re.Pattern[str] = re.compile(
    "[\u1100-\u11ff\u2e80-\u303f\u3040-\u31ff\u3200-\u33ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U0001f000-\U0001faff\U00020000-\U0003ffff]")
"""One character of the heuristic's one-token-each class (CJK, kana, hangul, full-width, emoji)."""

_NON_LATIN = re.compile("[^\u0000-\u036f]+")
"""Runs of characters outside the heuristic's Latin class (code points from U+0370 on)."""

Tokenizer = Callable[[str], int]
"""Counts the tokens of one string (pluggable real tokenizer)."""


@runtime_checkable
class TokenMeter(Protocol):
    """Seam: price the model-visible surface of a session (docs/contracts.md, ``TokenMeterPort``)."""

    def surface_tokens(self, session: Any) -> int:
        """Non-negative integer token price of ``session``'s current surface."""
        ...


def _block_text(block: Any, out: list[str]) -> int:
    """Append the model-visible text of one content block to ``out``; return extra tokens."""
    if isinstance(block, str):
        out.append(block)
        return 0
    if not isinstance(block, Mapping):
        return 0
    kind = block.get("type")
    if kind == "image" or kind == "image_url":
        return IMAGE_TOKENS
    extra = 0
    for key in ("text", "thinking", "name"):
        value = block.get(key)
        if isinstance(value, str):
            out.append(value)
    for key in ("arguments", "input", "args"):
        if key in block:
            value = block[key]
            out.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    content = block.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for inner in content:
            extra += _block_text(inner, out)
    return extra


def _content_of(data: Any) -> Any:
    """The content list of a surface event's data, across DSH message shapes."""
    if not isinstance(data, Mapping):
        return None
    message = data.get("message")
    if isinstance(message, Mapping) and "content" in message:
        return message.get("content")
    return data.get("content")


def visible_text(event: Event) -> tuple[str, int]:
    """The model-visible text of one surface event, and the flat tokens of its images.

    Understands the current DSH shapes (``user/message`` ``{content}``; ``assistant/message``
    and ``tool/result`` ``{message: {content}}``) and the legacy ``{content}`` / string forms.
    """
    parts: list[str] = []
    extra = 0
    content = _content_of(event.data)
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            extra += _block_text(block, parts)
    return "\n".join(parts), extra


def surface_events(session: Any) -> list[Event]:
    """The events ``session``'s surface currently shows, in order.

    Accepts a runtime ``Session``, any object with a ``log`` attribute holding an
    ``EventLog``, or an ``EventLog`` itself. The log's live ``surface`` (a
    ``fsm_stage.log.surface.Surface``, kept by ``MemoryLog``/``JsonlLog``) is read in place —
    O(surface nodes), no refold. Only an object without one (a bare event holder)
    is folded from scratch with ``fold_surface``; one with a callable ``surface()`` uses it.
    """
    from fsm_stage.log.surface import Surface, fold_surface

    log = getattr(session, "log", session)
    events: Sequence[Event] = log.events
    live = getattr(log, "surface", None)
    if isinstance(live, Surface):
        return [events[seq] for seq in live.nodes]
    surface = getattr(session, "surface", None)
    if callable(surface):
        return [events[seq] for seq in surface()]
    return [events[seq] for seq in fold_surface(events)]


class HeuristicTokenMeter:
    """Default ``TokenMeter``: ≈4 Latin characters per token, one token per CJK / full-width
    character, ≈2 characters per token for other scripts, plus a per-message overhead.

    ``tokenizer`` replaces the character rule when given. ``chars_per_token`` must be > 0 and
    ``per_message_overhead`` ≥ 0 (``ValueError`` otherwise). See the module docstring.
    """

    def __init__(
        self,
        tokenizer: Tokenizer | None = None,
        *,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
        per_message_overhead: int = DEFAULT_PER_MESSAGE_OVERHEAD,
    ) -> None:
        if not chars_per_token > 0:
            raise ValueError("chars_per_token must be a positive number")
        if per_message_overhead < 0:
            raise ValueError("per_message_overhead must be >= 0")
        self.tokenizer = tokenizer
        self.chars_per_token = chars_per_token
        self.per_message_overhead = per_message_overhead

    def count_text(self, text: str) -> int:
        """Tokens of one string: the tokenizer's count, or the character rule of the module
        docstring (one token per ``WIDE_CHARS`` character, ``ceil(latin / chars_per_token)``,
        ``ceil(other / (chars_per_token / 2))``)."""
        if self.tokenizer is not None:
            return max(0, int(self.tokenizer(text)))
        if text.isascii():
            return math.ceil(len(text) / self.chars_per_token)
        non_latin = "".join(_NON_LATIN.findall(text))
        wide = len(WIDE_CHARS.findall(non_latin))
        latin, other = len(text) - len(non_latin), len(non_latin) - wide
        return (math.ceil(latin / self.chars_per_token) + math.ceil(other * 2 / self.chars_per_token)
                + wide)

    def count_nodes(self, events: Iterable[Event]) -> int:
        """Tokens of a sequence of surface events (text + images + per-message overhead)."""
        total = 0
        for event in events:
            text, extra = visible_text(event)
            total += self.count_text(text) + extra + self.per_message_overhead
        return total

    def surface_tokens(self, session: Any) -> int:
        """Price of ``session``'s current surface (see ``surface_events`` for accepted shapes)."""
        return self.count_nodes(surface_events(session))
