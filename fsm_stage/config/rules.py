"""Stage-graph rules beyond types: values, cross-references, templates, warnings.

``check_graph(data, report)`` applies the ``FieldRule`` value constraints and the
cross-field rules of a graph's plain data (unique stage names, targets naming configured
stages, no self-target, guard names, ``initial``, the ``section`` template);
``check_field_rules`` does the value constraints of one mapping. ``check_loaded_graph``
runs on a graph without errors: it trial-renders the ``section`` for every stage and adds
the warnings (unreachable stages, a stage without targets under a section listing them).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from fsm_stage._yaml import NativePath, ProblemReport
from fsm_stage.config.fields import FieldRule
from fsm_stage.config.model import (
    MAX_NAME_LENGTH,
    TEMPLATE_VARIABLES,
    EdgeConfig,
    GraphConfig,
    StageConfig,
    field_rule,
)
from fsm_stage.config.vocabulary import GraphReport, class_fields_by_key
from fsm_stage.errors import PromptTemplateError

#: A DeepSeek Harness ``{{ expression }}`` (the plugin-list form's template syntax): a bare
#: variable or any other expression (``{{ x.y }}``, ``{{ x[0] }}``), which the plugin loader
#: turns into ``<< … >>`` so the template checks judge every form alike.
DSH_VARIABLE = re.compile(r"\{\{\s*([^{}\n]*?)\s*\}\}")


def _check_template(text: str, npath: NativePath, report: ProblemReport, *, native: bool) -> None:
    """Report a ``section`` template that does not compile, uses a variable other than
    ``TEMPLATE_VARIABLES``, or (``native``) uses the plugin form's ``{{ … }}`` syntax."""
    if native:
        m = DSH_VARIABLE.search(text)
        if m:
            report.error(
                npath,
                f"uses {m.group(0)}; the native form writes template variables as "
                f"<< {m.group(1)} >> (the {{{{ }}}} syntax is for the plugin-list form)",
            )
            return
    from fsm_stage.prompts import template_variables  # jinja2 loads when a template is checked

    try:
        variables = template_variables(text)
    except PromptTemplateError as err:
        report.error(
            npath,
            f"{str(err).rstrip('.')}; expected a template using << stage_current >> / << stage_targets >>",
        )
        return
    unknown = sorted(variables - TEMPLATE_VARIABLES)
    if unknown:
        report.error(
            npath,
            f"template uses unknown variable(s) {', '.join(unknown)}; "
            f"expected only {', '.join(sorted(TEMPLATE_VARIABLES))}",
        )


#: Keys whose value must name a configured stage: ``check_graph`` reports them with the list of
#: stages, which says more than the name pattern (the schema, which cannot cross-reference,
#: uses the pattern).
_CROSS_REFERENCES = frozenset({"initial"})


@functools.cache
def _field_checks(cl: type) -> Mapping[str, tuple[attrs.Attribute[Any], FieldRule, re.Pattern[str] | None]]:
    """YAML key -> (field, its ``FieldRule``, the rule's compiled ``pattern``) of a config class."""
    return {key: (field, rule := field_rule(field), re.compile(rule.pattern) if rule.pattern else None)
            for key, field in class_fields_by_key(cl).items()}


def check_field_rules(value: Mapping[str, Any], cl: type, npath: NativePath, report: ProblemReport) -> None:
    """Apply the ``FieldRule`` value constraints (pattern, non-blank, minimum, min_items) to the
    keys of ``value`` that are fields of ``cl`` (other keys are the structuring's to report)."""
    checks = _field_checks(cl)
    for key, v in value.items():
        known = checks.get(key)
        if known is None:
            continue
        field, rule, pattern = known
        if isinstance(v, str):
            if rule.non_blank and (not v or v.isspace()):
                child = (*npath, key)
                if field.default is attrs.NOTHING:
                    report.error(child, f"is blank; expected {rule.expected}")
                else:
                    shown = report.loc(child).display.rsplit(".", 1)[-1]
                    report.error(child, f"is blank; `{shown}` must be a non-empty string when supplied")
            elif rule.max_length is not None and len(v) > rule.max_length and key not in _CROSS_REFERENCES:
                why = " (a stage name becomes the handoff file name <stage>.md)" if cl is StageConfig else ""
                report.error((*npath, key),
                             f"is too long: must be at most {rule.max_length} characters{why}, got {len(v)}")
            elif pattern is not None and not pattern.fullmatch(v) and key not in _CROSS_REFERENCES:
                report.error((*npath, key),
                             f"must match {rule.pattern}, got {json.dumps(v, ensure_ascii=False)}")
            else:
                for regex, message in rule.forbid:
                    if re.search(regex, v):
                        report.error((*npath, key), f"{json.dumps(v, ensure_ascii=False)} {message}")
                        break
        elif rule.minimum is not None and isinstance(v, int | float) and not isinstance(v, bool):
            # an int is always finite (``math.isfinite`` would overflow on one beyond float range)
            if (isinstance(v, float) and not math.isfinite(v)) or v < rule.minimum:
                shown = str(v) if len(str(v)) <= 40 else f"{str(v)[:20]}…"
                report.error((*npath, key), f"must be a non-negative finite number, got {shown}")
        elif isinstance(v, list) and rule.min_items is not None and len(v) < rule.min_items:
            report.error((*npath, key), f"is empty; expected {rule.expected}")


def check_graph(data: Mapping[str, Any], report: GraphReport) -> None:
    """Value and cross-reference rules of a graph (docs/contracts.md, fsm_stage edges)."""
    check_field_rules(data, GraphConfig, (), report)
    stages = data.get("stages")
    names: list[str] = []
    if isinstance(stages, list):
        seen: set[str] = set()
        for i, stage in enumerate(stages):
            if type(stage) is not dict and not isinstance(stage, Mapping):
                continue
            check_field_rules(stage, StageConfig, ("stages", i), report)
            name = stage.get("name")
            if isinstance(name, str):
                if name in seen:
                    report.error(
                        ("stages", i, "name"), f'duplicate stage "{name}"; stage names must be unique'
                    )
                else:
                    names.append(name)
                seen.add(name)
        for i, stage in enumerate(stages):
            if (type(stage) is dict or isinstance(stage, Mapping)) and isinstance(stage.get("targets"), list):
                _check_targets(stage, i, names, seen, report)
    initial = data.get("initial")
    if isinstance(initial, str) and names and initial not in names:
        report.error(
            ("initial",),
            f"{json.dumps(initial)} must name a configured stage; expected one of: {', '.join(names)}",
        )
    section = data.get("section")
    if isinstance(section, str) and section.strip():
        _check_template(section, ("section",), report, native=not report.plugin_form)


def _check_targets(
    stage: Mapping[str, Any], i: int, names: list[str], known: set[str], report: ProblemReport
) -> None:
    """Target and guard rules of stage ``i`` (``names``: the stages in order, ``known`` as a set)."""
    own = stage.get("name")
    seen: set[str] = set()
    guard_pattern = _GUARD_RE.pattern
    for j, edge in enumerate(stage["targets"]):
        target: object = edge
        guards: object = ()
        mapping = type(edge) is not str and (type(edge) is dict or isinstance(edge, Mapping))
        if mapping:
            target, guards = edge.get("to"), edge.get("guards", ())
        if not isinstance(target, str):
            continue
        problem = None
        if target == own:
            problem = f'stage "{own}" cannot target itself; expected another configured stage'
        elif names and target not in known:
            problem = f'"{target}" must name a configured stage; expected one of: {", ".join(names)}'
        elif target in seen:
            problem = f'duplicate target "{target}"; list each target once (merge the guards)'
        if problem is not None:  # the path is built for a problem only
            report.error(("stages", i, "targets", j, *(("to",) if mapping else ())), problem)
        seen.add(target)
        if guards and isinstance(guards, list):
            gseen: set[str] = set()
            for k, guard in enumerate(guards):
                if not isinstance(guard, str):
                    continue
                gpath = ("stages", i, "targets", j, "guards", k)
                if len(guard) > _GUARD_MAX_LENGTH:
                    report.error(
                        gpath,
                        f"is too long: must be at most {_GUARD_MAX_LENGTH} characters, got {len(guard)}",
                    )
                elif not _GUARD_RE.fullmatch(guard):
                    report.error(gpath, f"must match {guard_pattern}, got {json.dumps(guard)}")
                elif guard in gseen:
                    report.error(gpath, f'duplicate guard "{guard}"; list each predicate once')
                gseen.add(guard)


#: ``EdgeConfig.guards`` item grammar, compiled once, and its length limit.
_GUARD_RE = re.compile(field_rule(attrs.fields(EdgeConfig).guards).item_pattern or "")
_GUARD_MAX_LENGTH = field_rule(attrs.fields(EdgeConfig).guards).item_max_length or MAX_NAME_LENGTH


def _warn_terminal_guidance(graph: GraphConfig, report: ProblemReport) -> None:
    """Warn when the guidance ``section`` lists ``<< stage_targets >>`` plainly
    (``prompts.section_lists_targets_plainly``) and a stage has ``targets: []``: while an
    eligibility predicate holds there, the model would be told to pick one of no stages.
    A section that tests the variable (``<% if stage_targets %>``) handles the
    empty case itself and gets no warning."""
    from fsm_stage.prompts import section_lists_targets_plainly

    if not section_lists_targets_plainly(graph.section):
        return
    for i, stage in enumerate(graph.stages):
        if stage.targets == ():
            report.warn(
                ("stages", i, "targets"),
                f'stage "{stage.name}" has no way out (`targets: []`) but the guidance `section` shows '
                "<< stage_targets >>, which renders empty there; give the stage a target, or word the "
                "section so it reads well without targets",
            )


def _trial_values(graph: GraphConfig) -> Iterator[tuple[str, str]]:
    """``(stage_current, stage_targets)`` pairs the stage switch can render the section with:
    each stage with its declared targets (and ``""`` too when guards or ``targets: []`` can leave
    none). Stages with ``targets`` omitted all list every other stage, so only the first of them
    is yielded: yielding each would cost stages × stages."""
    all_to_all_seen = False
    for stage in graph.stages:
        edges = stage.targets
        if edges is None:
            if all_to_all_seen:
                continue
            all_to_all_seen = True
            edges = graph.edges_from(stage.name)
        listed = ", ".join([e.target for e in edges])
        yield stage.name, listed
        if listed and any([e.guards for e in edges]):
            yield stage.name, ""


def _trial_render_section(graph: GraphConfig, report: ProblemReport) -> None:
    """Render the guidance ``section`` as the stage switch would, for every pair of
    ``_trial_values``, so a template that fails at run time (sandbox, runaway output,
    ``TypeError`` …) is a positioned problem at validate time. Stops at the first failure.

    A section that reads both variables only as bare outputs (``prompts.interpolates_only``)
    is rendered once, with the longest name and the longest target list: when that succeeds
    every pair does; when it fails, the pairs are rendered one by one to name the stage."""
    from fsm_stage.prompts import interpolates_only, render

    pairs = list(_trial_values(graph))
    if not pairs:
        return
    if interpolates_only(graph.section, TEMPLATE_VARIABLES):
        try:
            render(graph.section, stage_current=max((p[0] for p in pairs), key=len),
                   stage_targets=max((p[1] for p in pairs), key=len))
            return
        except PromptTemplateError:
            pass  # the pairs below find the stage it fails for (or none: only the mix was too long)
    for name, targets in pairs:
        try:
            render(graph.section, stage_current=name, stage_targets=targets)
        except PromptTemplateError as err:
            report.error(("section",), f'{str(err).rstrip(".")} (rendered for stage "{name}", '
                         f"stage_targets {targets!r:.60})")
            return


def _unreachable(graph: GraphConfig) -> list[int]:
    """Indexes of stages that no chain of edges from ``initial`` reaches. O(stages + edges):
    a stage with ``targets`` omitted reaches every stage without listing its edges."""
    reached = {graph.initial_stage}
    frontier = [graph.initial_stage]
    while frontier:
        stage = graph.stage(frontier.pop())
        if stage is None or stage.targets is None:  # `edges_from`: every other stage
            return []
        for edge in stage.targets:
            if edge.target not in reached:
                reached.add(edge.target)
                frontier.append(edge.target)
    return [i for i, s in enumerate(graph.stages) if s.name not in reached]


# The two forms


def check_loaded_graph(graph: GraphConfig, report: ProblemReport) -> None:
    """Rules of a structured graph without errors: the ``section`` renders for every stage
    (an error), a stage with ``targets: []`` under a section listing ``<< stage_targets >>``
    and stages unreachable from ``initial`` (warnings)."""
    _trial_render_section(graph, report)
    _warn_terminal_guidance(graph, report)
    for i in _unreachable(graph):
        report.warn(
            ("stages", i, "name"),
            f'stage "{graph.stages[i].name}" is unreachable from initial stage '
            f'"{graph.initial_stage}" through `targets`; add it to a stage\'s targets or remove it',
        )
