"""Recognising the controllers' recorded tool-result texts, in every shipped language, to
recover what a log does not keep structurally (review comments, guard refusals): ``Wording()``
compiles each catalog text into a pattern; ``Wording().match(kind, text)`` gives the template
variables of a recorded text of that kind, or None. Used by ``scenario.replay``.
"""

from __future__ import annotations

import re

from fsm_stage.prompts import LANGUAGES, Catalog, load_catalog
from fsm_stage.runtime.tools import ERROR_PREFIX
from fsm_stage.stage_switch import CATALOG_NAME as STAGE_CATALOG

__all__ = ["PLAN_CATALOG", "Wording"]

PLAN_CATALOG = "plan_mode"
"""The plan-mode controller's wording catalog (``templates/<language>/plan_mode.yaml``)."""


_BEFORE_REVIEW_KEYS: tuple[str, ...] = (
    "errors.invalid_arguments", "errors.already_current", "errors.no_user_questions",
    "errors.missing_token_meter", "errors.requires_handoff", "errors.no_fs",
    "errors.handoff_write_failed")
"""Stage-switch refusals of a ``goto_stage`` call made before any review is asked (besides the
graph's own refusals, ``not_a_target`` / ``guard``): a replay gives such a call no ``review``.
(``already_current`` can also follow an approval when the stage moved meanwhile; a replay then
reaches the target first and is refused the same way.)"""


_PLAN_BEFORE_REVIEW_KEYS: tuple[str, ...] = (
    "errors.not_in_plan", "errors.bad_plan", "errors.no_channel", "errors.no_agent")
"""Plan-mode refusals of an ``exit_plan_mode`` call made before any review is asked: a replay
gives such a call no ``review``."""


class Wording:
    """Recognises the controllers' recorded tool-result texts (in every shipped language) to
    recover what a log does not keep structurally: review comments and guard refusals."""

    def __init__(self) -> None:
        self.patterns: dict[str, list[re.Pattern[str]]] = {}
        for language in LANGUAGES:
            plan = load_catalog(PLAN_CATALOG, language)
            stage = load_catalog(STAGE_CATALOG, language)
            for kind, catalog, key in (("plan_feedback", plan, "errors.keep_planning_feedback"),
                                       ("stage_feedback", stage, "errors.keep_stage_feedback"),
                                       ("guard", stage, "errors.guard_blocked"),
                                       ("not_a_target", stage, "errors.not_a_target"),
                                       ("not_a_target", stage, "errors.not_configured"),
                                       *(("before_review", stage, key) for key in _BEFORE_REVIEW_KEYS),
                                       *(("plan_before_review", plan, key)
                                         for key in _PLAN_BEFORE_REVIEW_KEYS)):
                pattern = _catalog_pattern(catalog, key)
                if pattern is not None:
                    self.patterns.setdefault(kind, []).append(pattern)

    def match(self, kind: str, text: str) -> dict[str, str] | None:
        """The template variables of a ``kind`` text (``Error:`` prefix ignored), or None."""
        body = text.removeprefix(ERROR_PREFIX)
        for pattern in self.patterns.get(kind, ()):
            m = pattern.fullmatch(body)
            if m is not None:
                return m.groupdict()
        return None


def _catalog_pattern(catalog: Catalog, key: str) -> re.Pattern[str] | None:
    """A regex matching ``catalog.text(key, …)`` for any variable values (one group each)."""
    if not catalog.has(key):
        return None
    names = sorted(catalog.variables(key))
    rendered = catalog.text(key, **{n: f"\0{n}\0" for n in names})
    regex, seen = "", set[str]()
    for i, part in enumerate(re.split(r"\0(\w+)\0", rendered)):
        if i % 2 == 0:
            regex += re.escape(part)
        elif part in seen:
            regex += f"(?P={part})"
        else:
            seen.add(part)
            regex += f"(?P<{part}>.*?)"
    return re.compile(regex, re.DOTALL)
