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
    framework model objects (None or empty: every request keeps the framework's model);
    ``kind``: the accepted value type(s). Raises ``TypeError`` (one line) for a non-mapping
    ``models``, a non-str key or a value that is not a ``kind``."""

    def __init__(self, models: Mapping[str, M] | None, where: str,
                 kind: type | tuple[type, ...] | None = None) -> None:
        if models is not None and not isinstance(models, Mapping):
            raise TypeError(f"{where}(models=) must be a mapping of model names to models, "
                            f"got {type(models).__name__}")
        for key, value in (models or {}).items():
            if not isinstance(key, str) or (kind is not None and not isinstance(value, kind)):
                kinds = kind if isinstance(kind, tuple) else (kind,) if kind is not None else ()
                names = " or ".join(k.__name__ for k in kinds)
                raise TypeError(f"{where}(models=): {key!r} must map a model name to a {names or 'model'}, "
                                f"got {type(value).__name__}")
        self.models: dict[str, M] = dict(models or {})
        self.where = where
        self._warned: set[str] = set()

    def select(self, choice: ModelChoice, default: M, default_name: str | None = None) -> tuple[M, bool]:
        """``(model, applies)`` for ``choice``: ``models[choice.model]``, else
        ``models[choice.alias]``, else ``default`` (named ``default_name``: the framework's own
        model). ``applies`` says whether the choice's settings go with the request: True when
        the chosen model answers (found in ``models``, or ``default_name`` is the chosen name)
        or the choice names no model; False when the framework's own model stands in, which
        keeps its own settings (a one-time warning per missing name, never an error)."""
        if choice.model is None:
            return default, True
        for key in (choice.model, choice.alias):
            if key is not None and key in self.models:
                return self.models[key], True
        if default_name is not None and default_name in (choice.model, choice.name):
            return default, True
        if choice.model not in self._warned:
            self._warned.add(choice.model)
            _log.warning("%s asks for model %s; %s has no such model (models=…), so the framework's own "
                         "model answers", choice.source or "the stage", choice.model, self.where)
        return default, False

    def pick(self, choice: ModelChoice, default: M, default_name: str | None = None) -> M:
        """The model of ``select`` (see there)."""
        return self.select(choice, default, default_name)[0]


def pydantic_ai_settings(choice: ModelChoice) -> dict[str, Any]:
    """pydantic-ai ``ModelSettings`` keys of ``choice``: its ``model_settings`` as given, and
    ``reasoning_effort`` as the unified ``thinking`` setting (``none`` → False)."""
    out: dict[str, Any] = dict(choice.settings)
    if choice.reasoning_effort is not None:
        out["thinking"] = False if choice.reasoning_effort == "none" else choice.reasoning_effort
    return out


def agents_settings(choice: ModelChoice) -> dict[str, Any]:
    """OpenAI Agents SDK ``ModelSettings`` fields of ``choice``: its ``model_settings`` (a key
    that is no ``ModelSettings`` field goes into ``extra_args``) and ``reasoning_effort`` as
    ``reasoning=Reasoning(effort=…)``."""
    import dataclasses

    from agents import ModelSettings

    fields = {f.name for f in dataclasses.fields(ModelSettings)}
    out: dict[str, Any] = {k: v for k, v in choice.settings.items() if k in fields}
    extra = {k: v for k, v in choice.settings.items() if k not in fields}
    if extra:
        out["extra_args"] = {**(out.get("extra_args") or {}), **extra}
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


def answered_by(choice: ModelChoice) -> dict[str, Any]:
    """The ``assistant/message.source`` of a reply from the model ``choice`` named (``{kind:
    model, provider, model}``); call it only when that model answered (``select`` found it)."""
    return {"kind": "model", "provider": choice.provider, "model": choice.name}
