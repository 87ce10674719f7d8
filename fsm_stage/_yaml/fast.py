"""Fast path: parse a plain one-mapping YAML document with ruamel's libyaml C parser.

``fast_parse(text)`` gives ``(plain data, positions)`` exactly as the round-trip path
(``fsm_stage._yaml.parse``) would, about 20x faster, or None for anything it does not handle
(syntax errors, tags, anchors, aliases, merge keys, directives, a top-level list, text
libyaml reads differently); the caller then takes the round-trip path, whose messages and
positions are the reference. ``c_parser()`` is None when no C extension is installed;
``USE_C_PARSER = False`` forces the round-trip path (tests compare the two).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from fsm_stage._yaml.limits import MAX_DEPTH, MAX_DOCUMENT_CHARS
from fsm_stage._yaml.parse import plain_scalar
from fsm_stage._yaml.problems import Loc, NativePath
from fsm_stage.errors import _NotPlainYaml

#: Use ruamel's libyaml-based C parser when it is installed (``ruamel.yaml.clib``, which ships
#: binary wheels, or ``ruamel.yaml.clibz``). Tests set this to False to check the pure-Python path alone.
USE_C_PARSER = True

_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"
#: Resolved tags of plain scalars the fast path constructs (with ruamel's round-trip
#: constructor, as the pure path does); any other tag (timestamps, merge keys, ...) makes the
#: loader take the pure path.
_FAST_SCALAR_TAGS = frozenset({"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


#: Text libyaml reads differently from ruamel's pure parser (found by differential fuzzing,
#: ``tests/test_config_fast_path.py``): it accepts tabs where ruamel refuses them, counts NEL /
#: LINE SEPARATOR / PARAGRAPH SEPARATOR inside quoted scalars as line breaks (shifting every
#: later line number), gives a byte order mark after the start no column, and accepts a comment
#: right after a block scalar header (``|#``). Texts containing any of these (even where they
#: would be harmless) take the pure path (see ``_libyaml_differs``).
_LIBYAML_DIFFERENT_CHARS = "\t\x85\u2028\u2029"
_BLOCK_HEADER_COMMENT = re.compile(r"[|>][-+0-9]*#")


def _libyaml_differs(text: str) -> bool:
    """Whether ``text`` holds something libyaml reads differently (``_LIBYAML_DIFFERENT_CHARS``,
    a byte order mark after the start, ``|#``). Substring tests first: ~free on 175 KB."""
    return (
        any(c in text for c in _LIBYAML_DIFFERENT_CHARS)
        or text.find("\ufeff", 1) != -1
        or ("#" in text and _BLOCK_HEADER_COMMENT.search(text) is not None)
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


@functools.cache
def c_parser() -> type | None:
    """ruamel's libyaml ``CParser`` class, or None when no C extension is installed."""
    import importlib

    try:
        cyaml = importlib.import_module("ruamel.yaml.cyaml")
    except ImportError:
        return None
    parser: type = cyaml.CParser
    return parser


@functools.cache
def _plain_resolvers() -> dict[Any, list[tuple[str, Any]]]:
    """ruamel's YAML 1.2 implicit resolvers (first character -> [(tag, regex)]): the table the
    pure round-trip loader resolves plain scalars with (it defaults to YAML 1.2 too)."""
    from ruamel.yaml.resolver import VersionedResolver

    table: dict[Any, list[tuple[str, Any]]] = VersionedResolver(version=(1, 2)).versioned_resolver
    return {k: list(v) for k, v in table.items()}


def _resolve_plain(value: str) -> str:
    """The tag ruamel gives the plain (unquoted, untagged) scalar ``value`` (as ``CoreResolver``)."""
    from fsm_stage._yaml.core_schema import core_tag

    table = _plain_resolvers()
    candidates = table.get(value[0] if value else "", [])
    if None in table:
        candidates = candidates + table[None]
    for tag, regex in candidates:
        if regex.match(value):
            return core_tag(tag, value)  # numbers as editors read them (YAML 1.2 core schema)
    return _STR_TAG


def fast_parse(text: str, *, locate: bool = True) -> tuple[dict[str, Any], dict[NativePath, Loc]] | None:
    """Parse a one-mapping YAML document with libyaml: ``(plain data, positions)`` or None.

    Gives exactly what the pure round-trip path (``parse_yaml`` + ``to_plain``) gives for
    the documents it accepts: one mapping with string keys, no duplicate key, no tag, anchor,
    alias, merge key or directive, scalars that are strings, null, booleans or numbers, every
    position from the same event marks. Anything else (including every syntax error, an empty
    file, a top-level list and text for which ``_libyaml_differs``) returns None and the caller
    takes the pure path, whose messages and positions are the reference. About 20x faster
    than the pure parser. ``locate=False`` skips the positions (returns ``{}``), which cost
    about as much as the parse: a valid file never needs them.
    """
    parser_cls = c_parser() if USE_C_PARSER else None
    if parser_cls is None or len(text) > MAX_DOCUMENT_CHARS or _libyaml_differs(text):
        return None
    try:
        parser = parser_cls(text)
    except Exception:  # e.g. text that cannot be encoded as UTF-8 (lone surrogates)
        return None
    try:
        return _EventComposer(parser.get_event, locate).document()
    except Exception:  # _NotPlainYaml, syntax errors, anything the C parser raises: pure path
        return None
    finally:
        parser.dispose()


class _EventComposer:
    """Builds the document mapping and its positions from parser events (see ``fast_parse``);
    raises ``_NotPlainYaml`` for anything the pure path must handle."""

    def __init__(self, get_event: Callable[[], Any], locate: bool) -> None:
        from ruamel.yaml import events

        self.get_event = get_event
        self.events = events
        self.locate = locate
        self.locs: dict[NativePath, Loc] = {}
        self.tags: dict[str, str] = {}  # plain scalar -> resolved tag, memo for this document
        # plain scalars of this document resolved to strings: read again without a ``scalar`` call
        self.plain_strs: set[str] = set()
        self.constructor: Any = None
        self.depth = 0  # open collections; beyond ``MAX_DEPTH`` the pure path reports it

    def document(self) -> tuple[dict[str, Any], dict[NativePath, Loc]]:
        ev, get_event = self.events, self.get_event
        if type(get_event()) is not ev.StreamStartEvent:
            raise _NotPlainYaml
        start = get_event()
        if type(start) is not ev.DocumentStartEvent or start.version is not None or start.tags is not None:
            raise _NotPlainYaml  # empty stream, or a %YAML / %TAG directive
        root = get_event()
        if type(root) is not ev.MappingStartEvent:
            raise _NotPlainYaml  # a plugin list, a scalar, an empty document
        if self.locate:
            mark = root.start_mark
            pos = (mark.line + 1, mark.column + 1)
            self.locs[()] = Loc("", pos, pos)
        data = self.collection(root, (), "")
        if type(get_event()) is not ev.DocumentEndEvent or type(get_event()) is not ev.StreamEndEvent:
            raise _NotPlainYaml  # several documents: the pure path reports it
        assert isinstance(data, dict)
        return data, self.locs

    def scalar(self, event: Any) -> object:
        """The plain value of a scalar event, resolved and constructed as the pure path does."""
        if event.anchor is not None or event.ctag is not None:
            raise _NotPlainYaml
        value: str = event.value
        if not event.implicit[0]:  # quoted or block scalar: a string
            if not value.isascii() and _has_surrogate(value):
                raise _NotPlainYaml  # the pure path joins pairs and reports lone ones, positioned
            return value
        tag = self.tags.get(value)
        if tag is None:
            tag = self.tags[value] = _resolve_plain(value)
        if tag == _STR_TAG:
            self.plain_strs.add(value)
            return value
        if tag == _NULL_TAG:
            return None
        if tag not in _FAST_SCALAR_TAGS:
            raise _NotPlainYaml  # timestamps, `<<` merge keys, `=` value keys, ...
        from ruamel.yaml.nodes import ScalarNode

        if self.constructor is None:
            from ruamel.yaml import YAML

            self.constructor = YAML(typ="rt", pure=True).constructor
        node = ScalarNode(tag, value, event.start_mark, event.end_mark, style=event.style)
        return plain_scalar(self.constructor.construct_object(node, deep=True))

    def collection(self, event: Any, npath: NativePath, display: str) -> object:
        """The plain value of a collection event, recording every child's position."""
        kind = type(event)
        if kind is self.events.AliasEvent or event.anchor is not None or event.ctag is not None:
            raise _NotPlainYaml
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _NotPlainYaml
        try:
            return self._collection(event, npath, display)
        finally:
            self.depth -= 1

    def _collection(self, event: Any, npath: NativePath, display: str) -> object:
        ev, get_event, locs, scalar = self.events, self.get_event, self.locs, self.scalar
        known = self.plain_strs
        scalar_event = ev.ScalarEvent
        locate = self.locate
        kind = type(event)
        value: object
        if kind is ev.MappingStartEvent:
            mapping_end = ev.MappingEndEvent
            out: dict[str, object] = {}
            while True:
                key_event = get_event()
                if type(key_event) is not scalar_event:
                    if type(key_event) is mapping_end:
                        return out
                    raise _NotPlainYaml  # a collection or alias as key
                key = key_event.value
                if not (key in known and key_event.implicit[0] and key_event.anchor is None
                        and key_event.ctag is None):  # else: a plain string read before, as it is
                    key = scalar(key_event)  # `<<` (merge) raises: its tag is not a fast one
                if type(key) is not str or key in out:
                    raise _NotPlainYaml  # null/boolean/number key, duplicate key: the pure path reports it
                value_event = get_event()
                if not locate:
                    if type(value_event) is scalar_event:
                        value = value_event.value
                        if not (value in known and value_event.implicit[0] and value_event.anchor is None
                                and value_event.ctag is None):
                            value = scalar(value_event)
                        out[key] = value
                    else:
                        out[key] = self.collection(value_event, npath, display)
                    continue
                kmark, vmark = key_event.start_mark, value_event.start_mark
                kpos = (kmark.line + 1, kmark.column + 1)
                kdisplay = f"{display}.{key}" if display else key
                child = (*npath, key)
                if type(value_event) is scalar_event:
                    value = scalar(value_event)
                else:
                    value = self.collection(value_event, child, kdisplay)
                # a null value has no node of its own: point at its key (as ``to_plain``)
                locs[child] = Loc(
                    kdisplay, kpos, kpos if value is None else (vmark.line + 1, vmark.column + 1)
                )
                out[key] = value
        if kind is ev.SequenceStartEvent:
            sequence_end = ev.SequenceEndEvent
            items: list[object] = []
            while True:
                item_event = get_event()
                item_kind = type(item_event)
                if item_kind is sequence_end:
                    return items
                if not locate:
                    if item_kind is scalar_event:
                        value = item_event.value
                        if not (value in known and item_event.implicit[0] and item_event.anchor is None
                                and item_event.ctag is None):
                            value = scalar(item_event)
                        items.append(value)
                    else:
                        items.append(self.collection(item_event, npath, display))
                    continue
                mark = item_event.start_mark
                ipos = (mark.line + 1, mark.column + 1)
                child = (*npath, len(items))
                idisplay = f"{display}[{len(items)}]"
                locs[child] = Loc(idisplay, ipos, ipos)
                if item_kind is scalar_event:
                    items.append(scalar(item_event))
                else:
                    items.append(self.collection(item_event, child, idisplay))
        raise _NotPlainYaml


# ---------------------------------------------------------------------------------------------
# Structuring with cattrs
# ---------------------------------------------------------------------------------------------
