"""Plan mode's configuration check and plan-text reading: ``resolve_config`` (B1–B5),
``plan_heading_ok`` (B69, B70) and ``plan_title`` (B91)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from fsm_stage.config import PlanModeConfig
from fsm_stage.errors import PlanModeConfigError
from fsm_stage.prompts import Catalog, load_catalog

CONFIG_KEYS: Final = ("section",)
_HEADING_RE: Final = re.compile(r"#{1,6}\s+\S")
_TITLE_RE: Final = re.compile(r"#{1,6}\s+(.*)")
_TRIM_RE: Final = re.compile(r"^[\s\ufeff]+|[\s\ufeff]+$")  # JS String.prototype.trim


def _catalog(language: str = "en", override_dir: Path | str | None = None) -> Catalog:
    return load_catalog("plan_mode", language, override_dir)


def resolve_config(
    raw: Mapping[str, Any] | PlanModeConfig | None, *, catalog: Catalog | None = None
) -> PlanModeConfig:
    """Validate a plan-mode config and return a **new** ``PlanModeConfig`` (B1–B5).

    ``raw`` is a mapping (``{"section": str}``), a ``PlanModeConfig`` or None (refused like an
    empty section, B5, with ``config.missing``: what ``load_config(...).plan_mode`` is for a
    graph without a ``plan_mode`` key). Checks in order, first failure wins: ``section`` is a
    string (B1), it is not blank after trimming (B2), no other keys (B3, listed in insertion
    order, comma-space joined). ``section`` is kept exactly as given (B4). Raises ``PlanModeConfigError``.
    """
    cat = catalog if catalog is not None else _catalog()
    if raw is None:  # B5: fails like a blank section, saying that no config was given
        raise PlanModeConfigError(cat.text("config.missing"))
    if isinstance(raw, PlanModeConfig):
        data: Mapping[str, Any] = {"section": raw.section}
    elif isinstance(raw, Mapping):
        data = raw
    else:
        raise PlanModeConfigError(cat.text("config.not_string"))
    section = data.get("section")
    if not isinstance(section, str):
        raise PlanModeConfigError(cat.text("config.not_string"))
    if not section.strip():
        raise PlanModeConfigError(cat.text("config.blank"))
    unknown = [str(k) for k in data if k not in CONFIG_KEYS]
    if unknown:
        raise PlanModeConfigError(cat.text("config.unknown_keys", keys=", ".join(unknown)))
    return PlanModeConfig(section=section, tools=raw.tools if isinstance(raw, PlanModeConfig) else None)


def plan_heading_ok(plan: object) -> bool:
    """Whether ``plan`` is a string that, trimmed, starts with a 1–6 level markdown heading
    followed by whitespace and text (B69, B70). Any level 1–6 is accepted, not only ``# ``:
    a model writing ``## Plan`` follows the tool's instructions."""
    return isinstance(plan, str) and _HEADING_RE.match(_TRIM_RE.sub("", plan)) is not None


def plan_title(plan: str) -> str | None:
    """The first line (split on ``\\n``) that is a heading of level 1–6 followed by whitespace
    and text; its text with trailing whitespace removed (B91). None when no line matches."""
    for line in plan.split("\n"):
        m = _TITLE_RE.match(line)
        if m is not None:
            title = m.group(1).rstrip()
            if title:
                return title
    return None
