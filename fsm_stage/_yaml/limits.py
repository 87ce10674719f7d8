"""Bounds and refusals checked on a YAML document's parser events, before anything is built.

``check_events(text, report, skip_top_key)`` walks ruamel's pure-Python parser events once
(no tree, no recursion) and reports, each as one positioned problem: a document larger than
``MAX_DOCUMENT_CHARS``; nesting deeper than ``MAX_DEPTH``; aliases that would expand to more
than ``MAX_ALIAS_NODES`` extra nodes (an "alias bomb"; aliases under a top-level key that
``skip_top_key`` accepts, the ignored ``x-…`` keys, are never expanded and do not count); an
alias inside the collection its anchor names (recursive data, which would load as null);
any explicit tag (``!!int "4000"``, ``!!map``, ``!custom``); a lone surrogate in a key or value
(it cannot be encoded as UTF-8: every later fingerprint or write would fail). Returns False
when the document must not be loaded. The libyaml fast path applies the same bounds
(``fast.py`` hands anything suspicious to the pure path, which reports it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsm_stage._yaml.report import ProblemReport

#: Largest document (characters) the loader reads: ~25x a 1,000-stage graph.
MAX_DOCUMENT_CHARS = 4_000_000
#: Deepest nesting of mappings and sequences (a stage graph needs about 6).
MAX_DEPTH = 64
#: Most nodes that aliases may add to the document when expanded.
MAX_ALIAS_NODES = 10_000

#: a surrogate that is not half of a high+low pair (YAML's ``"\\ud83d\\ude00"`` is a pair)
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_YAML_TAG_PREFIX = "tag:yaml.org,2002:"


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds an unpaired surrogate code point (not encodable as UTF-8)."""
    return _LONE_SURROGATE.search(text) is not None


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each escaped high+low surrogate pair turned into its one character
    (ruamel's pure parser leaves ``"\\ud83d\\ude00"`` as two code points); a text with a
    lone surrogate is returned unchanged (``check_events`` refuses it)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return text


def shown_tag(tag: str) -> str:
    """A tag as written: ``tag:yaml.org,2002:int`` → ``!!int``."""
    return "!!" + tag[len(_YAML_TAG_PREFIX):] if tag.startswith(_YAML_TAG_PREFIX) else tag


class _Frame:
    __slots__ = ("anchor", "display", "index", "is_map", "key", "size", "skipped")

    def __init__(self, is_map: bool, anchor: str | None, display: str, skipped: bool) -> None:
        self.is_map = is_map
        self.anchor = anchor
        self.display = display
        self.skipped = skipped  # inside an ignored top-level subtree
        self.size = 1
        self.index = 0  # sequence: next item index; mapping: 0 = a key is next, 1 = a value
        self.key = ""


def check_events(
    text: str, report: ProblemReport, skip_top_key: Callable[[str], bool] = lambda key: False
) -> bool:
    """Check ``text`` against the bounds above; each violation is one problem on ``report``.

    Returns True when the document may be parsed and built. Syntax errors are left to the
    caller's parse (this returns True for them, having reported nothing).
    """
    from ruamel.yaml import YAML, events
    from ruamel.yaml.error import YAMLError

    if len(text) > MAX_DOCUMENT_CHARS:
        report.error_at(
            (1, 1), "(file)", f"the document has {len(text):,} characters; at most "
            f"{MAX_DOCUMENT_CHARS:,} are read"
        )
        return False
    ok = True
    stack: list[_Frame] = []
    sizes: dict[str, int] = {}
    added = 0

    def where(ev: Any) -> tuple[int, int]:
        mark = ev.start_mark
        return (mark.line + 1, mark.column + 1)

    def child_display() -> str:
        if not stack:
            return ""
        top = stack[-1]
        if top.is_map:
            return f"{top.display}.{top.key}" if top.display else top.key
        return f"{top.display}[{top.index}]"

    def shown(display: str) -> str:
        if not display:
            return "(file)"  # the document itself
        return display if len(display) <= 80 else display[:80] + "…"

    def add_child(size: int, key_text: str | None) -> None:
        if not stack:
            return
        top = stack[-1]
        # capped where one alias to it (adding ``size - 1`` nodes) is already over the limit
        top.size = min(top.size + size, MAX_ALIAS_NODES + 2)
        if top.is_map:
            if top.index == 0:
                top.key = key_text if key_text is not None else "?"
            top.index ^= 1
        else:
            top.index += 1

    try:
        for ev in YAML(typ="rt", pure=True).parse(text):
            kind = type(ev)
            if kind in (events.ScalarEvent, events.MappingStartEvent, events.SequenceStartEvent):
                display = child_display()
                tag = ev.tag
                if tag is not None:
                    report.error_at(
                        where(ev), shown(display),
                        f"has the YAML tag {shown_tag(str(tag))}; fsm_stage knows no tags, remove it",
                    )
                    ok = False
            if kind is events.ScalarEvent:
                value: str = ev.value
                found = _LONE_SURROGATE.search(value)
                if found is not None:
                    report.error_at(
                        where(ev), shown(display),
                        f"U+{ord(found.group()):04X} (a lone surrogate) at character {found.start()} "
                        "cannot be encoded as UTF-8, so it can never be sent to a model or logged; "
                        "remove it",
                    )
                    ok = False
                if ev.anchor is not None:
                    sizes[ev.anchor] = 1
                add_child(1, value)
            elif kind in (events.MappingStartEvent, events.SequenceStartEvent):
                skipped = bool(stack and stack[-1].skipped)
                if len(stack) == 1 and stack[0].is_map and stack[0].index == 1:
                    skipped = skipped or skip_top_key(stack[0].key)
                if len(stack) >= MAX_DEPTH:
                    report.error_at(
                        where(ev), shown(display), f"is nested more than {MAX_DEPTH} levels deep; "
                        "flatten the document"
                    )
                    return False
                stack.append(_Frame(kind is events.MappingStartEvent, ev.anchor, display, skipped))
            elif kind in (events.MappingEndEvent, events.SequenceEndEvent):
                done = stack.pop()
                if done.anchor is not None:
                    sizes[done.anchor] = done.size
                add_child(done.size, None)
            elif kind is events.AliasEvent:
                size = sizes.get(ev.anchor, 1)  # an anchor still open: a recursive alias (refused below)
                in_skipped = bool(stack and stack[-1].skipped) or (
                    len(stack) == 1 and stack[0].is_map and stack[0].index == 1 and skip_top_key(stack[0].key)
                )
                if not in_skipped and any(f.anchor == ev.anchor for f in stack):
                    report.error_at(
                        where(ev), shown(child_display()),
                        f"is an alias (*{ev.anchor}) of a mapping or list that contains it; data "
                        "cannot contain itself (it would load as null), so write the value out",
                    )
                    ok = False
                if not in_skipped:
                    added += size - 1
                    if added > MAX_ALIAS_NODES:
                        report.error_at(
                            where(ev), shown(child_display()),
                            f"aliases here expand the document by more than {MAX_ALIAS_NODES:,} "
                            "nodes (an alias bomb?); use fewer or smaller aliases",
                        )
                        return False
                add_child(size, ev.anchor)
    except YAMLError:
        return ok  # the caller's parse reports the syntax error
    except RecursionError:
        report.error_at((1, 1), "(yaml)", f"the document is nested too deeply (limit {MAX_DEPTH})")
        return False
    return ok
