"""The views one simulation run's requests share: ``RequestViews``.

Every request lists all the messages so far and the same tool specs again; ``RequestViews``
prices and renders each message once (``messages``: a prefix view of one shared history) and
each distinct tool list once (``tools``), so a run stays linear in its requests.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fsm_stage.runtime.prefix import PrefixView
from fsm_stage.simulate.history import MessageHistory, SharedHistory
from fsm_stage.simulate.report import MessageView, ToolView, _source_label, message_view, tool_views
from fsm_stage.tokens import HeuristicTokenMeter

__all__ = ["MARK_FIELDS", "RequestViews"]

MARK_FIELDS: tuple[Callable[[Mapping[str, Any]], Any], ...] = (
    operator.methodcaller("get", "content"), operator.methodcaller("get", "source"),
    operator.methodcaller("get", "role", "user"))
"""What makes a message's view: equal content, source and role give an equal ``MessageView``."""


class RequestViews:
    """The message and tool views of one run's requests, reused from request to request.

    ``messages(request_messages)`` -> ``MessageHistory``; ``tools(specs)`` -> a tuple of
    ``ToolView``; ``message(message)`` -> ``MessageView``. Views already handed out never change.
    """

    def __init__(self, meter: HeuristicTokenMeter) -> None:
        self.meter = meter
        # message id -> its view, and the content it was made of (two flat maps: no object per message)
        self._views: dict[str, MessageView] = {}
        self._view_contents: dict[str, Any] = {}
        self._history = SharedHistory()  # the views the records' messages are prefixes of
        self._marks: list[list[Any]] = [[] for _ in MARK_FIELDS]  # the fields of each history view
        self._seen: Sequence[Mapping[str, Any]] = ()  # the messages the history's views were made of
        self._tool_specs: tuple[Any, ...] | None = None  # the specs ``_tools`` shows
        self._tools: tuple[ToolView, ...] = ()

    def tools(self, specs: Sequence[Any]) -> tuple[ToolView, ...]:
        """The views of a request's tool specs; the previous request's tuple while the specs
        are equal (compared identity first), so the requests of one stage share one tuple
        instead of each dumping and pricing the same JSON again."""
        shown = tuple(specs)
        if shown != self._tool_specs:
            self._tool_specs, self._tools = shown, tool_views(shown, self.meter)
        return self._tools

    def messages(self, messages: Sequence[Mapping[str, Any]],
                 extends: Callable[[Sequence[Any], Sequence[Any]], bool] | None = None) -> MessageHistory:
        """The views of a request's ``messages`` as a prefix of the shared history.

        The leading messages the history already holds (equal content, source and role, so
        the same view) are found by comparing the three field lists (identity first, at C
        speed); only the rest get views, appended to the history. When the request diverges
        inside the history (a transition replaced the messages), a new history starts with the
        views of the common prefix; records made before keep the old one, never changed. When the
        request starts with the very messages the history was made of (the loop hands the same
        objects while the surface only grows), only the new ones are looked at; ``extends(newer,
        older)`` (``Session.extends``) may vouch for that in O(1), else the two are compared."""
        seen, k = self._seen, len(self._seen)
        # the request's own sequence (a tuple, or the session's ``PrefixView``): no copy
        shown = messages if isinstance(messages, tuple | PrefixView) else tuple(messages)
        if k == len(self._history) and k <= len(shown) and (
                (extends is not None and extends(shown, seen)) or shown[:k] == seen):  # identity first
            new = shown[k:]
            self._history.extend([self.message(m) for m in new])
            for get, m in zip(MARK_FIELDS, self._marks, strict=True):
                m.extend(map(get, new))
            self._seen = shown
            return self._history.view(len(shown))
        view = self._messages_slow(shown)
        self._seen = shown if len(shown) == len(self._history) else ()
        return view

    def _messages_slow(self, messages: Sequence[Mapping[str, Any]]) -> MessageHistory:
        fields = [list(map(get, messages)) for get in MARK_FIELDS]
        marks = self._marks
        n = min(len(messages), len(self._history))
        if all(f[:n] == m[:n] for f, m in zip(fields, marks, strict=True)):
            k = n
        else:
            k = next(i for i in range(n) if any(f[i] != m[i] for f, m in zip(fields, marks, strict=True)))
        if k == len(messages):
            return self._history.view(k)
        if k < len(self._history):
            self._history = SharedHistory(self._history.items[:k])
            self._marks = marks = [m[:k] for m in marks]
        self._history.extend([self.message(m) for m in messages[k:]])
        for f, m in zip(fields, marks, strict=True):
            m.extend(f[k:])
        return self._history.view(len(messages))

    def message(self, message: Mapping[str, Any]) -> MessageView:
        """``message_view``, computed once per message: every request lists all the messages so
        far, so pricing and rendering each again made a session's run quadratic. The runtime hands
        out deep copies, so a hit is keyed by the message id and checked by equal content, role
        and source label (comparing is far cheaper than pricing)."""
        content = message.get("content")
        role, label = str(message.get("role", "user")), _source_label(message)
        key = message.get("id")
        if isinstance(key, str):
            hit = self._views.get(key)
            if hit is not None and hit.role == role and hit.source == label \
                    and self._view_contents[key] == content:
                return hit
        view = message_view(message, self.meter)
        if isinstance(key, str) and isinstance(content, list | dict):
            self._views[key], self._view_contents[key] = view, content
        return view
