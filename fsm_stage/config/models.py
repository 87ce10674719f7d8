"""Per-stage model choice and budgets in stage-graph files: the attrs class and the rules.

A stage, and plan mode, may declare ``model`` (a provider-qualified name ``provider:name`` or an
alias of the graph's top-level ``models`` mapping), ``reasoning_effort``, free-form
``model_settings`` and a ``budget`` (tokens in and out, turns, steps, wall-clock seconds) with
``on_budget: stop | review``. ``check_models`` validates the plain data (positioned problems);
``resolve_model`` turns an alias into its provider-qualified name. The run-time side (what a
request carries, the spend fold) is ``fsm_stage.runtime.stage_models``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from fsm_stage._yaml import NativePath, ProblemReport
from fsm_stage.config.fields import FieldRule, rule_metadata
from fsm_stage.constants import MAX_DEADLINE_SECONDS, QUALIFIED_MODEL_RE

#: ``reasoning_effort`` values (OpenAI's ``ReasoningEffort`` words; adapters map them to each
#: framework's own setting).
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
#: What ``on_budget`` may say: ``stop`` ends the turn, ``review`` asks a human.
OnBudget = Literal["stop", "review"]
#: A provider-qualified model name: ``provider:model`` (``openai:gpt-5``, ``anthropic:claude-…``).
QUALIFIED_MODEL_PATTERN = QUALIFIED_MODEL_RE.pattern
#: An alias name (a key of the graph's ``models`` mapping).
MODEL_ALIAS_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
#: Longest model name or alias (characters).
MAX_MODEL_NAME_LENGTH = 200
#: Largest ``model_settings`` mapping, as compact JSON (bytes): settings travel in every request.
MAX_MODEL_SETTINGS_BYTES = 8192
_QUALIFIED_RE = QUALIFIED_MODEL_RE
_ALIAS_RE = re.compile(MODEL_ALIAS_PATTERN)


def _rule(doc: str, expected: str, **kw: Any) -> dict[str, FieldRule]:
    return rule_metadata(doc, expected, **kw)


#: Largest budget count (tokens, turns, steps): beyond it a limit means nothing and would
#: overflow the float arithmetic of spend views and diagram labels.
MAX_BUDGET_COUNT = 10**15
#: Longest ``seconds`` budget, as a review deadline's.
MAX_BUDGET_SECONDS = MAX_DEADLINE_SECONDS


def _count(doc: str) -> dict[str, FieldRule]:
    return _rule(doc, "a positive whole number", minimum=1, maximum=MAX_BUDGET_COUNT)


@attrs.frozen
class BudgetConfig:
    """What one visit of a stage (or one stretch of plan mode) may spend; omitted limits are
    unlimited. Tokens are summed from the ``usage`` of the visit's ``assistant/message``
    events (in: input + cache read + cache write; out: output); ``turns`` and ``steps`` count
    the visit's ``turn/start`` / ``step/start`` events; ``seconds`` is wall-clock time since the
    visit began (event times)."""

    tokens_in: int | None = attrs.field(default=None, metadata=_count(
        "Input tokens the visit may use (input + cache read + cache write, from logged usage)."))
    tokens_out: int | None = attrs.field(default=None, metadata=_count(
        "Output tokens the visit may use (from logged usage)."))
    turns: int | None = attrs.field(default=None, metadata=_count("Turns the visit may take."))
    steps: int | None = attrs.field(default=None, metadata=_count(
        "Model requests (steps) the visit may take."))
    seconds: float | None = attrs.field(default=None, metadata=_rule(
        "Wall-clock seconds from the start of the visit.", "a positive number of seconds", minimum=0,
        maximum=MAX_BUDGET_SECONDS))


attrs.resolve_types(BudgetConfig)

BUDGET_KEYS: tuple[str, ...] = tuple(f.name for f in attrs.fields(BudgetConfig))


def model_fields() -> dict[str, Any]:
    """The attrs fields a stage and plan mode share (``model``, ``reasoning_effort``,
    ``model_settings``, ``budget``, ``on_budget``), as ``attrs.field`` objects to splice into a
    class body."""
    return {
        "model": attrs.field(default=None, metadata=_rule(
            "Model for requests here: `provider:name` or an alias of the graph's `models`.",
            "a provider-qualified model name (provider:name) or a `models` alias",
            max_length=MAX_MODEL_NAME_LENGTH)),
        "reasoning_effort": attrs.field(default=None, metadata=_rule(
            "Reasoning effort for requests here.", " or ".join(json.dumps(e) for e in REASONING_EFFORTS))),
        "model_settings": attrs.field(default=None, hash=False, metadata=_rule(
            "Free-form model settings (temperature, max_tokens, …) passed to the host's model.",
            "a mapping of setting names to JSON values")),
        "budget": attrs.field(default=None, metadata=_rule(
            "What one visit may spend: tokens_in, tokens_out, turns, steps, seconds.",
            "a mapping {tokens_in, tokens_out, turns, steps, seconds}")),
        "on_budget": attrs.field(default="stop", metadata=_rule(
            "When the budget runs out: `stop` ends the turn, `review` asks a human.", '"stop" or "review"')),
    }


def resolve_model(name: str | None, aliases: Mapping[str, str] | None) -> str | None:
    """``name`` with an alias of ``aliases`` replaced by its provider-qualified name (None
    stays None; a qualified name is returned as is). ``KeyError`` for an unknown alias (the
    loader refuses those, so a loaded graph never raises)."""
    if name is None or _QUALIFIED_RE.fullmatch(name):
        return name
    return (aliases or {})[name]


def _check_settings(value: object, npath: NativePath, report: ProblemReport) -> None:
    if not isinstance(value, Mapping):
        return  # the structurer reports the type
    try:
        size = len(json.dumps(value, allow_nan=False, separators=(",", ":")).encode())
    except (TypeError, ValueError) as err:
        report.error(npath, "must hold JSON values only (strings, numbers, booleans, lists, "
                            f"mappings): {err}")
        return
    if size > MAX_MODEL_SETTINGS_BYTES:
        report.error(npath, f"is too large: at most {MAX_MODEL_SETTINGS_BYTES} bytes as JSON, got {size}")


def _check_budget(value: object, npath: NativePath, report: ProblemReport) -> None:
    if not isinstance(value, Mapping):
        return
    if not value:
        report.error(npath, f"is empty; expected at least one of {', '.join(BUDGET_KEYS)}")
    for key, v in value.items():
        if key not in BUDGET_KEYS or isinstance(v, bool) or not isinstance(v, int | float):
            continue  # unknown keys and wrong types: the structurer reports them
        shown = "a number of over 40 digits" if isinstance(v, int) and abs(v) >= 10**40 else f"{v!r:.40}"
        if key == "seconds":
            if (isinstance(v, float) and not math.isfinite(v)) or v <= 0:
                report.error((*npath, key), f"must be a positive finite number of seconds, got {shown}")
            elif v > MAX_BUDGET_SECONDS:
                report.error((*npath, key), f"must be at most {MAX_BUDGET_SECONDS:,} seconds (366 days), "
                                            f"got {shown}")
        elif v < 1:
            report.error((*npath, key), f"must be a positive whole number, got {shown}")
        elif v > MAX_BUDGET_COUNT:
            report.error((*npath, key), f"must be at most {MAX_BUDGET_COUNT:,}, got {shown}")


#: The keys ``_check_choice`` reads: a stage with none of them has nothing to check.
_CHOICE_KEYS = frozenset({"model", "model_settings", "budget", "on_budget"})


def _check_choice(part: Mapping[str, Any], npath: NativePath, aliases: Mapping[str, Any],
                  report: ProblemReport) -> None:
    model = part.get("model")
    if isinstance(model, str) and not _QUALIFIED_RE.fullmatch(model) and model not in aliases:
        known = f"; aliases: {', '.join(aliases)}" if aliases else " (the graph defines no `models` aliases)"
        report.error((*npath, "model"),
                     f"{json.dumps(model, ensure_ascii=False)[:80]} is neither a provider-qualified name "
                     f"(provider:name) nor an alias of `models`{known}")
    settings, budget = part.get("model_settings"), part.get("budget")
    if settings is not None:  # absent: nothing to check (and no path built per stage)
        _check_settings(settings, (*npath, "model_settings"), report)
    if budget is not None:
        _check_budget(budget, (*npath, "budget"), report)
    if "on_budget" in part and "budget" not in part:
        report.warn((*npath, "on_budget"), "has no effect without a `budget`")


def check_models(graph: Mapping[str, Any], plan_mode: object, report: ProblemReport) -> None:
    """Positioned problems of the model keys of a graph's plain data and its ``plan_mode``:
    ``models`` aliases (name grammar, provider-qualified values), each ``model`` naming an alias
    or a qualified name, JSON-only ``model_settings`` within ``MAX_MODEL_SETTINGS_BYTES``, and
    positive budget limits."""
    raw_aliases = graph.get("models")
    aliases: Mapping[str, Any] = raw_aliases if isinstance(raw_aliases, Mapping) else {}
    for name, target in aliases.items():
        where: NativePath = ("models", name)
        if not isinstance(name, str) or not _ALIAS_RE.fullmatch(name) or _QUALIFIED_RE.fullmatch(name):
            report.error(where, f"alias {json.dumps(name)[:80]} must match {MODEL_ALIAS_PATTERN}")
        elif not isinstance(target, str) or not _QUALIFIED_RE.fullmatch(target) \
                or len(target) > MAX_MODEL_NAME_LENGTH:
            report.error(where, "must be a provider-qualified model name (provider:name), "
                                f"at most {MAX_MODEL_NAME_LENGTH} characters")
    stages = graph.get("stages")
    if isinstance(stages, list):
        for i, stage in enumerate(stages):
            if (type(stage) is dict or isinstance(stage, Mapping)) and not _CHOICE_KEYS.isdisjoint(stage):
                _check_choice(stage, ("stages", i), aliases, report)
    if isinstance(plan_mode, Mapping):
        _check_choice(plan_mode, ("plan_mode",), aliases, report)


def normalised_choice(part: Any) -> dict[str, Any]:
    """The model keys of a ``StageConfig`` / ``PlanModeConfig`` that are set, as plain data
    (fingerprint input; a part without any stays ``{}`` so older fingerprints are unchanged)."""
    out: dict[str, Any] = {}
    for key in ("model", "reasoning_effort"):
        if getattr(part, key) is not None:
            out[key] = getattr(part, key)
    if part.model_settings is not None:
        out["model_settings"] = dict(part.model_settings)
    if part.budget is not None:
        out["budget"] = {k: v for k, v in attrs.asdict(part.budget).items() if v is not None}
        out["on_budget"] = part.on_budget
    return out


def model_label(part: Any) -> str | None:
    """A diagram's short label of a stage's or plan mode's model keys: ``thinker, high`` (the
    alias or the model name without its provider, then the effort) and ``budget 3 turns`` (the
    limits, tokens in thousands); None when it declares neither."""
    bits: list[str] = []
    if part.model is not None:
        bits.append(part.model.split(":", 1)[-1] if _QUALIFIED_RE.fullmatch(part.model) else part.model)
    if part.reasoning_effort is not None:
        bits.append(part.reasoning_effort)
    shown = ", ".join(bits)
    if part.budget is not None:
        limits = []
        for key, word in (("tokens_in", "k in"), ("tokens_out", "k out"), ("turns", " turns"),
                          ("steps", " steps"), ("seconds", " s")):
            value = getattr(part.budget, key)
            if value is not None:
                limits.append(f"{value / 1000:g}{word}" if key.startswith("tokens") else f"{value:g}{word}")
        shown = " · ".join(x for x in (shown, "budget " + ", ".join(limits)) if x)
    return shown or None
