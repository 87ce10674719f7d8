"""``FieldRule``: the validation rule and documentation of one config field (attrs metadata).

Its own module so that ``config.model`` and ``config.policy`` both build fields with it.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class FieldRule:
    """Validation rule and documentation of one config field (attrs field metadata ``"rule"``).

    Read by the loader (messages, checks) and by ``fsm_stage.schema`` (JSON Schema keywords),
    so both judge a file by the same rules.

    ``doc``          one-sentence description (schema ``description``, README).
    ``expected``     what a valid value looks like, for "missing"/"wrong type" messages.
    ``pattern``      full-match regular expression for strings (schema ``pattern ^…$``).
    ``non_blank``    the string must contain a non-whitespace character.
    ``minimum``      inclusive lower bound for numbers (finite numbers only).
    ``maximum``      inclusive upper bound for numbers (schema ``maximum``).
    ``max_length``   maximum string length in characters (schema ``maxLength``).
    ``min_items``    minimum list length.
    ``item_pattern`` full-match regular expression for each string of a list.
    ``item_max_length`` maximum length of each string of a list (schema ``items.maxLength``).
    ``forbid``       ``(regex, message)`` pairs: a string in which ``re.search`` finds the
                     regex is refused with the message (schema ``not: {pattern}``).
    ``yaml_key``     the native YAML key when it differs from the attribute name.
    ``plugin_key``   the key in the plugin-list form; None = not accepted there.

    Regexes use only syntax that Python ``re`` and ECMA-262 (JSON Schema) read alike.
    """

    doc: str
    expected: str
    pattern: str | None = None
    non_blank: bool = False
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None
    min_items: int | None = None
    item_pattern: str | None = None
    item_max_length: int | None = None
    forbid: tuple[tuple[str, str], ...] = ()
    yaml_key: str | None = None
    plugin_key: str | None = None


def rule_metadata(doc: str, expected: str, **kw: Any) -> dict[str, FieldRule]:
    """The attrs field metadata ``{"rule": FieldRule(doc, expected, **kw)}``."""
    return {"rule": FieldRule(doc, expected, **kw)}
