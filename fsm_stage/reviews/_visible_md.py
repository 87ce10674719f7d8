"""Whether a Markdown document shows every line it holds: ``hidden_lines(text)``.

The inbox (markdown-it-py, commonmark, raw HTML off) and the terminal review (rich: markdown-it-py
commonmark with raw HTML on, tables and strikethrough) render plans and handoff documents as
Markdown, yet some Markdown renders as nothing: a link reference definition (``[//]: # (…)``),
an HTML comment or any other raw HTML (rich drops it), the cells of a table row beyond the
header's (rich drops them), an image's address, a link's title, a link without text, a code
fence's info string, and everything after nesting deeper than the parser follows. The reviewer
would approve text they never saw, so a document with any such line is shown as plain text
instead (``PLAIN_TEXT_NOTICE``), by both views alike. So is a document longer than
``MARKDOWN_MAX_CHARS`` (``too_long_notice``), without being parsed: markdown-it takes about 12 µs
a character on hostile input such as a line of ``[``, and a review page must not take seconds.

The check parses ``text`` with both renderers' parser settings (markdown-it is linear in the
input) and reports every non-blank line that is not inside a leaf block that renders it (a
paragraph, a heading, a code block, a rule, a table), every line of a raw HTML block, and the
lines of a leaf block whose inline content drops text (raw inline HTML, an image, a link title
or a link without text, a table row's extra cells). A line holding only container markers
(``>``, a list bullet or number) renders as a quote bar or a bullet and is not hidden.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = ["MARKDOWN_MAX_CHARS", "PLAIN_TEXT_NOTICE", "hidden_lines", "markdown_parser",
           "plain_text_notice", "too_long_notice"]

PLAIN_TEXT_NOTICE = "Shown as plain text because parts of it would not be displayed as Markdown"
"""The start of the one-line notice above a document shown as plain text (``plain_text_notice``)."""

MARKDOWN_MAX_CHARS = 32 * 1024
"""Longest document (characters) rendered as Markdown; a longer one is shown as plain text."""

#: Leaf blocks whose every source line is rendered (their inline content is checked apart).
_LEAVES = frozenset({"paragraph_open", "heading_open", "code_block", "fence", "hr", "table_open"})
#: A line of container markers only: block quote ``>``, list bullets and numbers, spaces.
_MARKERS_ONLY = re.compile(r"(?:[ \t]*(?:>|[-+*]|\d{1,9}[.)])(?=[ \t>]|$))*[ \t]*")
#: A code fence's info string that is a language name (shown by neither view, so kept short).
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,20}")
_NEWLINES = re.compile(r"\r\n?")
_LINES_NAMED = 5


@functools.cache
def markdown_parser(view: str) -> MarkdownIt:
    """The parser settings of ``view``: ``"inbox"`` (commonmark, raw HTML off, as the inbox
    renders) or ``"terminal"`` (rich's: commonmark with raw HTML, tables, strikethrough)."""
    from markdown_it import MarkdownIt

    if view == "inbox":
        return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    return MarkdownIt("commonmark", {"html": True}).enable("strikethrough").enable("table")


def hidden_lines(text: str, *, inbox: Sequence[Token] | None = None,
                 terminal: Sequence[Token] | None = None) -> list[int]:
    """The 1-based numbers of the lines of ``text`` (Markdown) that the inbox or the terminal
    review would not display, in order (empty: every line shows); see the module docstring.
    ``inbox`` / ``terminal``: the tokens a view parsed ``text`` into already (with the settings
    of ``markdown_parser``), so that it is not parsed again."""
    lines = _NEWLINES.sub("\n", text).split("\n")
    hidden: set[int] = set()
    for view, tokens in (("inbox", inbox), ("terminal", terminal)):
        hidden |= _hidden_by(tokens if tokens is not None else markdown_parser(view).parse(text), lines)
    return [n + 1 for n in sorted(hidden)]


def plain_text_notice(lines: Sequence[int]) -> str:
    """The one-line notice above a document shown as plain text, naming the first few of
    ``lines`` (``hidden_lines``)."""
    named = ", ".join(str(n) for n in lines[:_LINES_NAMED]) + (", …" if len(lines) > _LINES_NAMED else "")
    which = f" (line {named})" if len(lines) == 1 else f" (lines {named})" if lines else ""
    return f"{PLAIN_TEXT_NOTICE}{which}."


def too_long_notice(length: int) -> str | None:
    """The one-line notice above a document of ``length`` characters shown as plain text because
    it is longer than ``MARKDOWN_MAX_CHARS`` (None: short enough to render as Markdown)."""
    if length <= MARKDOWN_MAX_CHARS:
        return None
    return (f"Shown as plain text because it has {length:,} characters; documents of up to "
            f"{MARKDOWN_MAX_CHARS:,} are shown as Markdown.")


def _hidden_by(tokens: Sequence[Token], lines: Sequence[str]) -> set[int]:
    """0-based numbers of the non-blank ``lines`` the ``tokens`` (one parse) do not display."""
    shown: set[int] = set()
    hidden: set[int] = set()
    columns, body = 0, False  # of the table being read: its header cells, in its body rows
    for tok in tokens:
        if tok.type == "th_open":
            columns += 1
        body = tok.type == "tbody_open" or (body and tok.type != "tbody_close")
        if tok.map is None:
            continue
        span = range(tok.map[0], min(tok.map[1], len(lines)))
        if tok.type == "html_block":
            hidden.update(span)
        elif tok.type in _LEAVES:
            shown.update(span)
            columns = 0 if tok.type == "table_open" else columns
            if tok.type == "fence" and not _LANGUAGE.fullmatch(tok.info.strip() or "text"):
                hidden.update(span)  # the info string shows in neither view
        elif tok.type == "tr_open" and body and any(_cells(lines[n]) > columns for n in span):
            hidden.update(span)  # rich drops a body row's cells beyond the header's
        elif tok.type == "inline" and _inline_drops(tok.children or ()):
            hidden.update(span)
    hidden.update(n for n, line in enumerate(lines)
                  if n not in shown and line.strip() and not _MARKERS_ONLY.fullmatch(line))
    return hidden


def _inline_drops(children: Iterable[Token]) -> bool:
    """Whether inline ``children`` render without some of their text: raw inline HTML (rich
    drops it), an image (its address shows nowhere), a link title, a link without text."""
    link_text: list[str] | None = None
    for child in children:
        if child.type in ("html_inline", "image"):
            return True
        if child.type == "link_open":
            if child.attrs.get("title"):
                return True
            link_text = []
        elif child.type == "link_close":
            if link_text is not None and not "".join(link_text).strip():
                return True
            link_text = None
        elif link_text is not None:
            link_text.append(child.content)
    return False


def _cells(line: str) -> int:
    """How many cells markdown-it splits the table row ``line`` into (its container markers
    ``>`` left out); a header row has exactly as many as the table has columns."""
    from markdown_it.rules_block.table import escapedSplit

    cells = escapedSplit(re.sub(r"^[ \t>]*", "", line).strip())
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    return len(cells)
