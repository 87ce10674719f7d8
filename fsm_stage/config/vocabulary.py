"""How stage-graph files use the positioned-YAML toolkit (``fsm_stage._yaml``).

``GraphReport`` is a ``ProblemReport`` that knows whether the file is in the plugin-list
form (missing keys are then named by their plugin-form key). ``GRAPH_VOCABULARY`` tells the
structuring code the YAML keys (``FieldRule.yaml_key``), the ``EdgeConfig`` string shorthand
and the ``plan_mode`` key beside the graph keys. ``strict_converter`` and
``positioned_problems`` are the toolkit's with that vocabulary, for other YAML inputs
(scenario files) that should report problems exactly as stage graphs do.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from fsm_stage._yaml import (
    NativePath,
    Problem,
    ProblemReport,
    Vocabulary,
    fields_by_key,
    walk_cattrs,
)
from fsm_stage._yaml import positioned_problems as _positioned_problems
from fsm_stage._yaml import strict_converter as _strict_converter
from fsm_stage.config.model import (
    PLAN_MODE_KEY,
    SCALAR_SHORTHAND,
    EdgeConfig,
    FieldRule,
    GraphConfig,
    PlanModeConfig,
    StageConfig,
    yaml_key,
)
from fsm_stage.errors import _TypeProblem


class GraphReport(ProblemReport):
    """The ``ProblemReport`` of a stage-graph file; ``plugin_form`` is True for a plugin list."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.plugin_form = False


def class_fields_by_key(cl: type) -> Mapping[str, attrs.Attribute[Any]]:
    """YAML key -> attrs field of a config class, in field order (read-only, cached)."""
    return fields_by_key(cl, yaml_key)


def _extra_keys(cl: type, npath: NativePath) -> Sequence[str]:
    return (PLAN_MODE_KEY,) if cl is GraphConfig and not npath else ()


def _missing(cl: type, key: str, report: ProblemReport) -> tuple[str, str | None]:
    rule: FieldRule | None = class_fields_by_key(cl)[key].metadata.get("rule")
    if rule is None:
        return key, None
    shown = rule.plugin_key if getattr(report, "plugin_form", False) and rule.plugin_key else key
    return shown, rule.expected


#: Keys written in the wrong mapping, and where they go.
_PLACED: dict[tuple[type, str], str] = {
    (StageConfig, "review"): "review rules go on an edge (`targets: [{to: NAME, review: {...}}]`), "
                             "at graph level or on `plan_mode`",
    (StageConfig, "guards"): "guards go on an edge (`targets: [{to: NAME, guards: [...]}]`)",
}


def _vocabulary(expected: Mapping[type, str] | None = None) -> Vocabulary:
    return Vocabulary(
        key_of=yaml_key,
        shorthand=SCALAR_SHORTHAND,
        expected=dict(expected or {}),
        extra_keys=_extra_keys,
        missing=_missing,
        placed=_PLACED,
    )


_CLASS_EXPECTED: dict[type, str] = {
    EdgeConfig: "a stage name or a mapping {to: <stage>, guards: [<predicate names>]}",
    StageConfig: "a mapping {name, instruction}",
    GraphConfig: "a stage graph mapping",
    PlanModeConfig: "a mapping {section}",
}
#: The stage-graph vocabulary (YAML keys, shorthand, ``plan_mode`` beside the graph keys).
GRAPH_VOCABULARY = _vocabulary(_CLASS_EXPECTED)


if TYPE_CHECKING:  # cattrs loads with the first converter (the first file structured)
    import cattrs


def strict_converter(
    *, number: str = "a number", expected: Mapping[type, str] | None = None
) -> cattrs.Converter:
    """A strict cattrs converter with user-facing messages (``fsm_stage._yaml.strict_converter``)
    that reads fields under their ``FieldRule.yaml_key`` and a bare string as an
    ``EdgeConfig``; ``expected`` maps a class to the words used for it (default "a mapping
    {its keys}"), ``number`` words what a float field expects. For ``positioned_problems``."""
    return _strict_converter(number=number, vocabulary=_vocabulary(expected))


@functools.cache
def graph_converter() -> cattrs.Converter:
    """The converter the stage-graph loader structures with (built once, on first use; also
    importable as ``CONVERTER``)."""
    return _strict_converter(number="a non-negative finite number", vocabulary=GRAPH_VOCABULARY)


def __getattr__(name: str) -> Any:  # ``CONVERTER``: built on first use, so import stays cheap
    if name == "CONVERTER":
        return graph_converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def structure(value: object, cl: type[Any], npath: NativePath, report: ProblemReport) -> Any:
    """``value`` structured into config class ``cl`` with ``CONVERTER``, or None after
    reporting every validation problem on ``report`` (at ``npath``)."""
    from cattrs.errors import BaseValidationError, ForbiddenExtraKeysError

    try:
        return graph_converter().structure(value, cl)
    except Exception as exc:
        if isinstance(exc, BaseValidationError | ForbiddenExtraKeysError | _TypeProblem):
            walk_cattrs(exc, cl, npath, report, GRAPH_VOCABULARY)
            return None
        raise


def positioned_problems(
    report: ProblemReport,
    cl: type[Any],
    *,
    converter: cattrs.Converter | None = None,
    npath: NativePath = (),
    value: object = attrs.NOTHING,
) -> tuple[Any, list[Problem]]:
    """Structure a YAML document (or part of one) into the attrs class ``cl`` and report every
    cattrs validation problem at its position in the file.

    ``report``: a ``ProblemReport`` from ``ProblemReport.from_yaml(text, path)`` (or
    ``from_tree``); ``value`` defaults to the data at ``npath`` of ``report.data``.
    ``converter``: a ``cattrs.Converter`` built with ``detailed_validation=True``, best
    ``strict_converter()`` plus your own hooks (a plain cattrs converter works but lets Python
    wording through, e.g. "'int' object is not iterable"); default: the stage-graph loader's
    converter. Leaf messages: the text of the ``TypeError``/``ValueError`` the hooks raise;
    unknown keys are listed with the class's keys and a "did you mean"; missing keys say
    ``required key is missing``.

    Returns ``(instance or None, report.problems)``: the instance when structuring succeeded,
    and every error the report holds so far (earlier syntax errors included), sorted by
    position, each ``Problem`` printing as ``PATH:LINE:COLUMN: KEY: message``. Never raises
    for bad input; exceptions other than cattrs validation errors (bugs in hooks) propagate.
    """
    return _positioned_problems(
        report,
        cl,
        converter=converter if converter is not None else graph_converter(),
        npath=npath,
        value=value,
        vocabulary=GRAPH_VOCABULARY,
        plain=converter is not None,
    )
