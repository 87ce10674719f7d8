"""File-level language overlay of the stage-switch wording (spec §1.17 ``apply-zh``).

``apply_language_overlay(root, language, name)`` deep-merges ``<root>/<language>/<name>.yaml``
over ``<root>/en/<name>.yaml`` and rewrites the English file in place, keeping its layout.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from fsm_stage.handoff import atomic_write_text
from fsm_stage.prompts import deep_merge
from fsm_stage.stage_switch.texts import CATALOG_NAME

__all__ = ["apply_language_overlay"]


def apply_language_overlay(
    root: str | Path, language: str = "zh", name: str = CATALOG_NAME
) -> dict[str, Any] | None:
    """File-level alternative to ``language: zh`` (spec §1.17 ``apply-zh``; S108–S113).

    Deep-merges ``<root>/<language>/<name>.yaml`` over ``<root>/en/<name>.yaml`` and writes the
    result back to the English file atomically (temporary file + rename, so hard links to the
    old file keep the old content). The English file keeps its key order, comments and block
    scalars (ruamel round-trip); only the overlaid values change. Returns the merged mapping
    (plain dicts), or ``None`` without writing when either file is missing. Idempotent.
    """
    base = Path(root) / "en" / f"{name}.yaml"
    overlay_path = Path(root) / language / f"{name}.yaml"
    if not base.is_file() or not overlay_path.is_file():
        return None
    base_text = base.read_text(encoding="utf-8")
    overlay = YAML(typ="safe", pure=True).load(overlay_path.read_text(encoding="utf-8")) or {}
    merged: dict[str, Any] = deep_merge(YAML(typ="safe", pure=True).load(base_text) or {}, overlay)
    round_trip = YAML()
    round_trip.preserve_quotes = True
    round_trip.width = 4096
    round_trip.indent(mapping=2, sequence=4, offset=2)
    document = round_trip.load(base_text)
    _merge_into(document, overlay)
    buf = io.StringIO()
    round_trip.dump(document, buf)
    atomic_write_text(base, buf.getvalue())
    return merged


def _merge_into(target: Any, overlay: Any) -> None:
    """Deep-merge ``overlay`` into the round-trip mapping ``target`` in place (same rule as
    ``deep_merge``: mappings merge key by key, anything else replaces)."""
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), Mapping):
            _merge_into(target[key], value)
        else:
            target[key] = value
