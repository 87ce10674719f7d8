"""Positioned problems: the one-line ``FILE:LINE:COL: key: message`` record and its pieces.

``Problem`` is one error or warning; ``Loc`` is where a value sits (display path, key and
value positions); ``NativePath`` addresses a value as a tuple of mapping keys and list
indexes (``("steps", 2, "name")`` displays as ``steps[2].name``, see ``join``).
``describe_value`` names a decoded YAML/JSON value's type in words for such messages.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from typing import Literal

import attrs

from fsm_stage.text import visible

#: A path into a document: mapping keys and list indexes, outermost first.
NativePath = tuple[str | int, ...]


@attrs.frozen
class Problem:
    """One positioned problem (or warning) of a YAML file.

    ``line`` / ``column`` are 1-based; ``key`` is the dotted path as written in the file
    (``stages[2].name``), ``(yaml)`` for a syntax error, ``(file)`` for the file as a whole.
    ``str(problem)`` is the one-line form ``PATH:LINE:COLUMN: KEY: message``.
    """

    path: str
    line: int
    column: int
    key: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        # control characters from the file (keys, names, values) are shown as escapes, so a
        # printed problem can never drive the terminal (``text.visible``)
        return visible(f"{self.path}:{self.line}:{self.column}: {self.key}: {self.message}")

    def to_json(self) -> dict[str, object]:
        """``{path, line, column, key, message, severity}`` (the ``validate --json`` item)."""
        return attrs.asdict(self)


@attrs.define
class Loc:
    """Where a value sits in the file: its display path and 1-based (line, column) positions."""

    display: str
    key: tuple[int, int]
    value: tuple[int, int]


def join(display: str, part: str | int) -> str:
    """The display path of child ``part`` of ``display``: ``a.b``, ``a[2]``, ``b`` at the root."""
    if isinstance(part, int):
        return f"{display}[{part}]"
    return f"{display}.{part}" if display else part


_LINE_BREAKS = re.compile("[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with every character ``str.splitlines`` breaks on escaped (``\\n``, ``\\u2028``).

    Keys and values from the file end up in messages; a problem must stay one line.
    """
    return _LINE_BREAKS.sub(lambda m: json.dumps(m.group(0))[1:-1], text)


def describe_value(value: object, *, json_names: bool = False) -> str:
    """The type of a decoded YAML/JSON value in words, for one-line user-facing errors.

    Default (YAML files): with the value where short, e.g. ``a number (5)``, ``a string
    ("x")``, ``a list``, ``a mapping``, ``null``. ``json_names=True`` (tool arguments, which are
    JSON): the bare JSON type name ``null`` / ``boolean`` / ``number`` / ``string`` / ``array``
    / ``object``. Anything else is named by its Python type.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean" if json_names else f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int | float):
        return "number" if json_names else f"a number ({value})"
    if isinstance(value, str):
        return "string" if json_names else f"a string ({json.dumps(value, ensure_ascii=False)})"
    if isinstance(value, list | tuple):
        return "array" if json_names else "a list"
    if isinstance(value, Mapping):
        return "object" if json_names else "a mapping"
    if json_names:
        return type(value).__name__
    if isinstance(value, set | frozenset):
        return "a set"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, datetime.date):
        return f"a date ({value.isoformat()}; quote it to make it a string)"
    return f"a {type(value).__name__}"
