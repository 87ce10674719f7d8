"""``PrefixView``: the first ``n`` items of an append-only list, as an immutable sequence.

A session hands its history to in-process readers this way (``Session.shared_messages``): the
messages so far are one list that only grows, and each request's history is a view of its
first ``n`` items, made in O(1) instead of copying every message reference into a new tuple
per request. ``tuple(view)`` gives a tuple when one is needed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, overload

__all__ = ["PrefixView"]

T = TypeVar("T")


class PrefixView(Sequence[T]):
    """The first ``len(self)`` items of ``items``, a list that is only ever appended to while
    views of it live (a view never sees a later item, nor a changed one).

    An immutable ``Sequence``: it compares equal to a tuple or another view holding equal items
    in order (as the tuple it stands for would), and hashes, prints and pickles as that tuple;
    a slice is a tuple. O(1) to make, O(1) to index, O(k) for a slice of k items. Raises
    ``ValueError`` when ``n`` is outside ``0..len(items)``.
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T], n: int) -> None:
        if not 0 <= n <= len(items):
            raise ValueError(f"PrefixView: n must be within 0..{len(items)}, got {n}")
        self._items, self._n = items, n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step > 0:  # stop <= n: the list's own slice never reaches a later item
                return tuple(self._items[start:stop:step])
            return tuple(self._items[i] for i in range(start, stop, step))  # a stop of -1 means none
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("PrefixView index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._n)

    def shares_items(self, other: object) -> bool:
        """Whether ``other`` is a view of the same list (their common prefix is the same
        objects: compare lengths, O(1))."""
        return isinstance(other, PrefixView) and other._items is self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PrefixView):
            if self.shares_items(other):
                return self._n == other._n
            return self._n == other._n and tuple(self) == tuple(other)  # items as tuples compare them
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))
