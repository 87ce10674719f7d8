"""Per-stage model choice in the adapters: which framework model a request goes to, and the
choice's settings in each framework's own words.

``ModelPicker(models)`` maps a ``ModelChoice`` to one of the host's models (by provider-qualified
name, then alias), else the framework's own model, warning once per missing name (a host that
cannot switch models gets the hint, never an error). ``pydantic_ai_settings``,
``agents_settings`` and ``langchain_kwargs`` translate ``reasoning_effort`` and
``model_settings`` (docs/stage-models.md, "Hosts").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from fsm_stage.runtime.stage_models import ModelChoice

M = TypeVar("M")
_log = logging.getLogger("fsm_stage.integrations")


class ModelPicker(Generic[M]):
    """The host's models by name: ``models`` maps provider-qualified names or graph aliases to
    framework model objects (None or empty: every request keeps the framework's model)."""

    def __init__(self, models: Mapping[str, M] | None, where: str) -> None:
        if models is not None and not isinstance(models, Mapping):
            raise TypeError(f"{where}(models=) must be a mapping of model names to models, "
                            f"got {type(models).__name__}")
        self.models: dict[str, M] = dict(models or {})
        self.where = where
        self._warned: set[str] = set()

    def pick(self, choice: ModelChoice, default: M, default_name: str | None = None) -> M:
        """The model for ``choice``: ``models[choice.model]``, else ``models[choice.alias]``, else
        ``default`` (named ``default_name`` in the one-time warning; no warning when that name is
        the chosen one)."""
        if choice.model is None:
            return default
        for key in (choice.model, choice.alias):
            if key is not None and key in self.models:
                return self.models[key]
        if choice.model not in self._warned and default_name not in (choice.model, choice.name):
            self._warned.add(choice.model)
            _log.warning("%s asks for model %s; %s has no such model (models=…), so the framework's own "
                         "model answers", choice.source or "the stage", choice.model, self.where)
        return default


def pydantic_ai_settings(choice: ModelChoice) -> dict[str, Any]:
    """pydantic-ai ``ModelSettings`` keys of ``choice``: its ``model_settings`` as given, and
    ``reasoning_effort`` as the unified ``thinking`` setting (``none`` → False)."""
    out: dict[str, Any] = dict(choice.settings)
    if choice.reasoning_effort is not None:
        out["thinking"] = False if choice.reasoning_effort == "none" else choice.reasoning_effort
    return out


def agents_settings(choice: ModelChoice) -> dict[str, Any]:
    """OpenAI Agents SDK ``ModelSettings`` fields of ``choice``: its ``model_settings`` as given
    and ``reasoning_effort`` as ``reasoning=Reasoning(effort=…)``."""
    out: dict[str, Any] = dict(choice.settings)
    if choice.reasoning_effort is not None:
        from openai.types.shared import Reasoning

        out["reasoning"] = Reasoning(effort=choice.reasoning_effort)  # type: ignore[arg-type]
    return out


def langchain_kwargs(choice: ModelChoice) -> dict[str, Any]:
    """Keyword arguments to ``BaseChatModel.bind`` for ``choice``: its ``model_settings`` as given
    and ``reasoning_effort`` (what ``ChatOpenAI`` reads)."""
    out: dict[str, Any] = dict(choice.settings)
    if choice.reasoning_effort is not None:
        out["reasoning_effort"] = choice.reasoning_effort
    return out
