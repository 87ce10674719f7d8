"""The message history a run's request records share: one append-only list, prefix views into it.

``SharedHistory`` holds the ``MessageView`` objects of a run in order with their running token
sums; ``SharedHistory.view(n)`` is a ``MessageHistory``, the immutable first ``n`` views. A
request whose messages extend the previous request's appends only its new messages, so every
record's ``messages`` costs O(1) memory and the prefix report compares two views over the same
list without walking them. A history break (a stage transition replacing the messages) starts
a new ``SharedHistory``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fsm_stage.runtime.prefix import PrefixView

if TYPE_CHECKING:
    from fsm_stage.simulate.report import MessageView

__all__ = ["MessageHistory", "SharedHistory"]


class SharedHistory:
    """An append-only list of ``MessageView`` with running token sums.

    ``items``: the views in order (never shortened or rewritten); ``cumulative[k]``: the tokens of
    ``items[:k]`` (``len(cumulative) == len(items) + 1``).
    """

    __slots__ = ("cumulative", "items")

    def __init__(self, items: Sequence[MessageView] = ()) -> None:
        self.items: list[MessageView] = []
        self.cumulative: list[int] = [0]
        self.extend(items)

    def __len__(self) -> int:
        return len(self.items)

    def extend(self, views: Sequence[MessageView]) -> None:
        """Append ``views`` (O(len(views)))."""
        total = self.cumulative[-1]
        for v in views:
            self.items.append(v)
            total += v.tokens
            self.cumulative.append(total)

    def view(self, n: int) -> MessageHistory:
        """The first ``n`` views (``0 <= n <= len(self)``) as an immutable sequence; O(1)."""
        if not 0 <= n <= len(self.items):
            raise ValueError(f"history view of {n} messages out of 0..{len(self.items)}")
        return MessageHistory(self, n)


class MessageHistory(PrefixView["MessageView"]):
    """The first ``len(self)`` views of a ``SharedHistory`` (a ``PrefixView`` of its items:
    immutable, equal to any tuple or view with the same views in order, slices are tuples).
    ``tokens``: their token sum (O(1))."""

    __slots__ = ("shared",)

    def __init__(self, shared: SharedHistory, n: int) -> None:
        super().__init__(shared.items, n)
        self.shared = shared

    @property
    def tokens(self) -> int:
        """Token sum of these messages."""
        return self.shared.cumulative[len(self)]

    def common_prefix(self, other: Sequence[MessageView]) -> int | None:
        """How many leading views ``other`` shares with this one when both view the same
        ``SharedHistory`` (the shorter length, O(1)); None when ``other`` is not such a view."""
        if isinstance(other, MessageHistory) and self.shares_items(other):
            return min(len(self), len(other))
        return None
