"""Per-stage model choice and budgets at run time: what a request carries and what a visit spent.

``ModelChoice`` is the model, reasoning effort and settings a request should use (the stage's,
with plan mode's keys on top while plan mode is on); ``choice_of`` builds it from a
``StageConfig`` / ``PlanModeConfig``; controllers contribute them as a ``ModelSource``.
``over_budget`` says which limits a visit's spend (``log.projections.spend``) has reached;
the step driver acts on it at the step boundary (``fsm_stage.driver._budget``,
``docs/stage-models.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from fsm_stage.constants import QUALIFIED_MODEL_RE
from fsm_stage.log.projections.spend import Spend

if TYPE_CHECKING:
    from fsm_stage.config.models import BudgetConfig

#: ``source.plugin`` of the budget notices the model is shown.
BUDGET_PLUGIN = "fsm_stage-budget"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _read_only(settings: Mapping[str, Any]) -> Mapping[str, Any]:
    return settings if isinstance(settings, MappingProxyType) else MappingProxyType(dict(settings))


@attrs.frozen
class ModelChoice:
    """The model a request should go to.

    ``model``: provider-qualified name (``openai:gpt-5``) or None (the host's default);
    ``alias``: the graph alias it came from, if any; ``reasoning_effort``: ``none`` …
    ``xhigh`` or None; ``settings``: free-form model settings (read-only mapping, JSON values);
    ``source``: where it was declared (``stage:<name>``, ``plan_mode`` or both joined by ``+``).
    """

    model: str | None = None
    alias: str | None = None
    reasoning_effort: str | None = None
    settings: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_read_only, hash=False)
    source: str = ""

    @property
    def provider(self) -> str | None:
        """The provider part of ``model`` (before the first ``:``), or None."""
        return None if self.model is None else self.model.split(":", 1)[0]

    @property
    def name(self) -> str | None:
        """The model name without its provider (after the first ``:``), or None."""
        return None if self.model is None else self.model.split(":", 1)[1]

    @property
    def is_default(self) -> bool:
        """True when nothing is chosen (the host's own model and settings apply)."""
        return self.model is None and self.reasoning_effort is None and not self.settings

    def to_json(self) -> dict[str, Any]:
        """``{"model"?, "alias"?, "reasoningEffort"?, "settings"?}`` (keys that are set)."""
        out: dict[str, Any] = {}
        if self.model is not None:
            out["model"] = self.model
        if self.alias is not None:
            out["alias"] = self.alias
        if self.reasoning_effort is not None:
            out["reasoningEffort"] = self.reasoning_effort
        if self.settings:
            out["settings"] = json.loads(json.dumps(dict(self.settings)))
        return out

    def header_config(self) -> dict[str, Any]:
        """The ``request/header.config`` keys of this choice: ``provider`` and ``model`` (the
        name without its provider) when a model is chosen, ``reasoningEffort`` and
        ``modelSettings`` when set."""
        out: dict[str, Any] = {}
        if self.model is not None:
            out["provider"], out["model"] = self.provider, self.name
        if self.reasoning_effort is not None:
            out["reasoningEffort"] = self.reasoning_effort
        if self.settings:
            out["modelSettings"] = json.loads(json.dumps(dict(self.settings)))
        return out

    def over(self, base: ModelChoice) -> ModelChoice:
        """This choice with ``base``'s values where this one sets none (settings merged key by
        key, this one's winning)."""
        if base.is_default:
            return self
        if self.is_default:
            return base
        return ModelChoice(
            self.model if self.model is not None else base.model,
            self.alias if self.model is not None else base.alias,
            self.reasoning_effort if self.reasoning_effort is not None else base.reasoning_effort,
            {**base.settings, **self.settings},
            "+".join(s for s in (base.source, self.source) if s))


DEFAULT_CHOICE = ModelChoice()


def check_aliases(parts: Mapping[str, Any], aliases: Mapping[str, str] | None) -> None:
    """Raise ``ConfigError`` (one line) when an alias of ``aliases`` names no provider-qualified
    model, or a ``model`` of ``parts`` (where → a ``StageConfig`` / ``PlanModeConfig``, e.g.
    ``{"stages[0] (design)": stage}``) is neither a provider-qualified name nor an alias: a config
    built in code skips the loader's check, and such a model would fail every request of its
    stage."""
    from fsm_stage.errors import ConfigError

    for alias, target in (aliases or {}).items():
        if not isinstance(target, str) or not QUALIFIED_MODEL_RE.fullmatch(target):
            raise ConfigError(f"models.{alias}: {target!r:.80} is not a provider-qualified model name "
                              "(provider:name)")
    for where, part in parts.items():
        model = getattr(part, "model", None)
        if model is not None and not QUALIFIED_MODEL_RE.fullmatch(model) and model not in (aliases or {}):
            raise ConfigError(f"{where}.model: {model!r:.80} is neither a provider-qualified name "
                              f"(provider:name) nor an alias of the graph's models: "
                              f"{', '.join(aliases or {}) or '(none)'}")


def choice_of(part: Any, aliases: Mapping[str, str] | None, source: str) -> ModelChoice:
    """The ``ModelChoice`` a ``StageConfig`` / ``PlanModeConfig`` declares (``DEFAULT_CHOICE``
    when it declares none); an alias is resolved through ``aliases`` (an alias ``aliases`` lacks
    is kept as the model name: the loader refuses those in files)."""
    if part is None or (part.model is None and part.reasoning_effort is None and not part.model_settings):
        return DEFAULT_CHOICE
    model = part.model
    resolved = model
    if model is not None and not QUALIFIED_MODEL_RE.fullmatch(model):
        resolved = (aliases or {}).get(model, model)
    return ModelChoice(resolved, model if resolved != model else None, part.reasoning_effort,
                       part.model_settings or {}, source)




def over_budget(budget: BudgetConfig | None, spend: Spend, now_ms: int, *, new_turn: bool) -> tuple[str, ...]:
    """The limits of ``budget`` that the next step would pass, as ``"<limit> <spent>/<allowed>"``
    strings (``()`` with no budget or none reached). Checked before a step opens: tokens and
    seconds stop once spent reaches the limit; ``steps: N`` allows N steps (the boundary before
    step N+1 stops); ``turns: N`` allows N turns (``new_turn``: the step about to open is the
    first of a turn not counted yet, so it would be turn ``turns + 1``)."""
    if budget is None:
        return ()
    hit: list[str] = []
    for key, spent in (("tokens_in", spend.tokens_in), ("tokens_out", spend.tokens_out),
                       ("steps", spend.steps)):
        limit = getattr(budget, key)
        if limit is not None and spent >= limit:
            hit.append(f"{key} {spent}/{limit}")
    if budget.turns is not None and spend.turns + (1 if new_turn else 0) > budget.turns:
        hit.append(f"turns {spend.turns}/{budget.turns}")
    if budget.seconds is not None and spend.seconds(now_ms) >= budget.seconds:
        hit.append(f"seconds {spend.seconds(now_ms):.0f}/{budget.seconds:g}")
    return tuple(hit)


@attrs.frozen
class BudgetRule:
    """A budget in force for the next step: ``scope`` (``stage`` or ``plan``), ``label`` (the
    stage name, or ``plan mode``), the ``budget`` limits and ``on_budget`` (``stop`` /
    ``review``); for ``review``, the ``targets`` a reviewer may move to (through ``move``), the
    ``rules`` the budget review is asked under (``config.review_rules.rules_json``; None:
    anyone may answer) and ``open_move(target)``, whether the guards of the edge to a target
    hold now (asked only when a budget review is asked or redeemed; None: every target is open):
    a move whose guards do not hold is neither offered nor applied."""

    scope: str
    label: str
    budget: BudgetConfig
    on_budget: str = "stop"
    language: str = "en"
    targets: tuple[str, ...] = ()
    move: Callable[[str], object] | None = attrs.field(default=None, eq=False)
    rules: Mapping[str, Any] | None = None
    open_move: Callable[[str], bool] | None = attrs.field(default=None, eq=False)


@attrs.frozen
class ModelSource:
    """What a controller contributes to per-request model choice (``Runtime.add_model_source``):
    ``choice(agent)`` (``DEFAULT_CHOICE`` for none) and ``budget(agent)`` (None for none);
    sources merge by ``order``, a later one's keys winning (the stage switch 10, plan mode 20)."""

    name: str
    order: int
    choice: Callable[[Any], ModelChoice] = attrs.field(eq=False)
    budget: Callable[[Any], BudgetRule | None] = attrs.field(eq=False)


def merged_choice(sources: Sequence[ModelSource], agent: Any) -> ModelChoice:
    """The ``ModelChoice`` of ``sources`` for ``agent``: each source's choice over the ones of
    lower ``order`` (stable for equal orders)."""
    choice = DEFAULT_CHOICE
    for source in sorted(sources, key=lambda s: s.order):
        choice = source.choice(agent).over(choice)
    return choice
