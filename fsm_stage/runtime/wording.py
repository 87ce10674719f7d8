"""Wording of the shipped runtime seams, from the ``runtime`` template catalog.

``text(key, language="en", **variables)`` renders ``templates/<language>/runtime.yaml`` keys
(``commands.images_refused``, ``tools.unknown`` …); zh falls back to English per key.
"""

from __future__ import annotations

from typing import Any

from fsm_stage.prompts import load_catalog

CATALOG = "runtime"


def text(key: str, language: str = "en", **variables: Any) -> str:
    """The rendered runtime text at dotted ``key`` (raises ``KeyError`` for an unknown key)."""
    return load_catalog(CATALOG, language).text(key, **variables)
