"""Model-written text made inert for the inbox pages, and the stage graph as SVG.

``markdown_html(text)`` renders Markdown with raw HTML disabled (markdown-it-py: ``<script>``
becomes text, ``javascript:`` links are not links) between two passes of ``text.visible``, which
turns every control, bidi and format character into a visible escape (newlines and tabs kept):
before, for the characters as written, and after, for those Markdown decoded from character
references such as ``&#x202E;``.
``one_line(text, limit)`` is the same for a table cell. ``graph_svg`` draws ``diagram.to_dot``
with Graphviz when ``dot`` is installed (None otherwise: the page shows the DOT text).
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from markupsafe import Markup

from fsm_stage.constants import TOOL_CALL
from fsm_stage.log.events import Event
from fsm_stage.text import coarse_duration, review_route, visible

__all__ = ["age", "call_arguments", "diff_lines", "edits_diff_lines", "event_summary", "graph_svg",
           "kept_diff_lines", "markdown_html", "one_line", "route", "when"]

#: Longest document rendered (characters); the rest is cut with a visible note.
MAX_DOCUMENT_CHARS = 512 * 1024


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})


def markdown_html(text: str) -> Markup:
    """``text`` (Markdown, model-written) as inert HTML: no raw HTML, control, bidi and format
    characters as escapes however they were spelled (character references included)."""
    cut = text[:MAX_DOCUMENT_CHARS]
    shown = visible(cut, keep="\n\t")
    if len(text) > MAX_DOCUMENT_CHARS:
        shown += f"\n\n*(cut: the document has {len(text)} characters)*"
    return Markup(visible(_markdown().render(shown), keep="\n\t"))


def route(record: Any) -> str:
    """What ``record`` (a ``ReviewRecord``) decides about, on one line (``text.review_route``;
    autoescaped by the template)."""
    return review_route(one_line(record.kind, 20), one_line(record.from_, 40), one_line(record.target, 40))


def one_line(text: object, limit: int = 160) -> str:
    """``text`` on one line with control characters as escapes, cut to ``limit`` characters
    (autoescaped by the template)."""
    shown = visible(str(text))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def when(ms: int | None) -> str:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS`` UTC ("" for None; ``N ms`` for a time no calendar
    date holds, as a forged log may carry)."""
    if ms is None:
        return ""
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def age(ms: int, now_ms: int) -> str:
    """How long ago ``ms`` was, coarsely (``42s``, ``5m30s``, ``1h59m``, ``2d``: ``coarse_duration``)."""
    return coarse_duration((now_ms - ms) // 1000)


def call_arguments(events: Sequence[Event], call_id: str) -> Mapping[str, Any] | None:
    """The decoded arguments of the logged ``tool/call`` ``call_id`` (None: absent or not JSON)."""
    for ev in reversed(events):
        if ev.type != TOOL_CALL or not isinstance(ev.data, Mapping) or ev.data.get("callId") != call_id:
            continue
        raw = ev.data.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return None
        return args if isinstance(args, Mapping) else None
    return None


def event_summary(ev: Event) -> str:
    """One line saying what ``ev`` holds (its data as compact JSON, cut), for the timeline."""
    data = ev.data
    if isinstance(data, Mapping):
        message = data.get("message")
        if isinstance(message, Mapping):
            data = {k: message.get(k) for k in ("role", "content", "toolName", "text") if k in message}
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    except ValueError:
        text = repr(data)
    return one_line(text, 200)


def graph_svg(dot_text: str) -> bytes | None:
    """SVG bytes of ``dot_text`` from Graphviz ``dot``, or None when it is not installed or fails."""
    if shutil.which("dot") is None:
        return None
    from fsm_stage.diagram import render
    from fsm_stage.errors import UserError

    try:
        return render(dot_text, "svg")
    except UserError:  # graphviz missing or dot failed
        return None


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff as ``(kind, line)`` pairs for the page: kind ``add`` / ``del`` / ``hunk``
    / ``same``; each line through ``text.visible`` (control characters as escapes)."""
    out = []
    for line in diff.split("\n"):
        kind = ("hunk" if line.startswith(("@@", "+++", "---")) else "add" if line.startswith("+")
                else "del" if line.startswith("-") else "same")
        out.append((kind, visible(line, keep="\t")))
    return out


def kept_diff_lines(state: Any, record: Any) -> Mapping[str, Any] | None:
    """``{review, lines}``: the changes from the version the reviewer kept in an earlier review
    of the same subject (``reviews._edits.kept_diff``) to ``record``'s document, or None."""
    from fsm_stage.reviews._edits import kept_diff

    kept = kept_diff(state, record)
    if kept is None:
        return None
    return {"review": kept["review"], "lines": diff_lines(kept["diff"]) if kept["diff"] else []}


def edits_diff_lines(record: Any, document: str | None, answer: Any) -> list[tuple[str, str]] | None:
    """The reviewer's edits of an answer approved with edits (the reviewed document → the
    edited one) as ``diff_lines``; None for any other answer or when the reviewed text is gone."""
    if answer is None or answer.edited is None:
        return None
    reviewed = record.document if record.document is not None else document
    if reviewed is None:
        return None
    from fsm_stage.reviews._edits import revision_diff

    diff = revision_diff(reviewed, answer.edited, old_name=f"reviewed ({record.id})", new_name="edited")
    return diff_lines(diff) if diff else None
