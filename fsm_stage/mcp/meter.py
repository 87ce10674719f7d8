"""The MCP server's token meter: what the server can see of the conversation, raised by what
the client says about it.

An MCP server only sees its own tool calls, never the model's context, so the log's surface
alone never reaches ``min_handoff_tokens`` and every transition would be light. ``ClientTokenMeter``
prices a ``goto_stage`` call as the largest of: the log's surface (``HeuristicTokenMeter``), the
``context_tokens`` the client reports with the call (its own count of the model's context), and
the submitted ``handoff`` document's own size (a conversation is at least as long as the
summary it produced). The report lives for one call only (``reported``), under the session lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fsm_stage.tokens import HeuristicTokenMeter

__all__ = ["CONTEXT_TOKENS", "CONTEXT_TOKENS_PARAM", "ClientTokenMeter", "context_tokens_problem"]

CONTEXT_TOKENS = "context_tokens"
"""The optional ``goto_stage`` argument a client uses to report the model's context size."""
CONTEXT_TOKENS_PARAM = {
    "type": "integer", "minimum": 0,
    "description": "Optional: how many tokens the model's conversation holds now (the client's "
    "count). At or above the graph's min_handoff_tokens the transition is full and the handoff "
    "document is kept."}
MAX_CONTEXT_TOKENS = 10**9
"""Larger reports are refused: no model context is that long."""


def context_tokens_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid ``context_tokens`` (None when it is): an integer 0…10⁹."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"argument {CONTEXT_TOKENS!r} must be an integer, got {type(value).__name__}"
    if not 0 <= value <= MAX_CONTEXT_TOKENS:
        return f"argument {CONTEXT_TOKENS!r} must be between 0 and {MAX_CONTEXT_TOKENS}, got {value}"
    return None


class ClientTokenMeter:
    """A ``TokenMeter``: ``max(log surface, reported)`` (see the module docstring)."""

    def __init__(self, base: HeuristicTokenMeter | None = None) -> None:
        self.base = base if base is not None else HeuristicTokenMeter()
        self.reported = 0

    def surface_tokens(self, session: Any) -> int:
        """The log's surface price, or the call's reported size when larger."""
        return max(self.base.surface_tokens(session), self.reported)

    @contextmanager
    def report(self, context_tokens: int | None, handoff: str | None) -> Iterator[None]:
        """For the block: the client's ``context_tokens`` and the ``handoff`` document's size."""
        size = self.base.count_text(handoff) if isinstance(handoff, str) else 0
        self.reported = max(context_tokens or 0, size)
        try:
            yield
        finally:
            self.reported = 0
