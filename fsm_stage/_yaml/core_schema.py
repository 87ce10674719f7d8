"""YAML 1.2 core-schema numbers: what editors (yaml-language-server) read as a number.

ruamel's YAML 1.2 resolver also reads YAML 1.1 leftovers as numbers (``1_000``, ``0b1010``,
``+0x10``, ``1_0.5``); an editor reads them as strings and says "Incorrect type". The loader
resolves plain scalars with ``CoreResolver`` (and the fast path with ``core_tag``), so such a
scalar is a string for both and the loader reports "got a string" at its position.
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml.resolver import VersionedResolver

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_STR_TAG = "tag:yaml.org,2002:str"
#: YAML 1.2.2 (core schema) integer and float forms.
_CORE_NUMBER = {
    _INT_TAG: re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"),
    _FLOAT_TAG: re.compile(
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    ),
}


def core_tag(tag: str, value: str) -> str:
    """``tag`` for a plain scalar ruamel resolved as ``tag``, or the string tag when ruamel's
    number is not a core-schema number."""
    regex = _CORE_NUMBER.get(tag)
    if regex is not None and regex.fullmatch(value) is None:
        return _STR_TAG
    return tag


class CoreResolver(VersionedResolver):
    """ruamel's resolver with numbers limited to the YAML 1.2 core schema (see ``core_tag``)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """The tag of a node; plain scalars that are not core-schema numbers are strings."""
        tag = super().resolve(kind, value, implicit)
        name = getattr(tag, "value", tag)
        if isinstance(value, str) and implicit and implicit[0] and core_tag(name, value) != name:
            return super().resolve(kind, value, (False, implicit[1]))  # the default: a string
        return tag
