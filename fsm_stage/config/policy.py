"""Per-stage tool policy in stage-graph files: the attrs classes and their rules.

``tool_groups: {name: [tool names or globs]}`` at graph level; ``tools: {allow, ask}`` per stage
and for ``plan_mode``. A rule is a tool name, a glob (``read_*``), a ``@group`` reference or a
mapping ``{tool, paths, path_args}`` restricting a path-taking tool to path globs. Omitted
``tools``: everything runs. ``check_policies`` validates the plain data (positioned problems;
tool names unknown to a given host catalog are errors, without one names in no group are
warnings); ``tool_count_label`` is the diagrams' count. The gate is ``fsm_stage.policy``. Native
form only (the plugin-list form stays the seeds' DeepSeek Harness shape).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from fsm_stage._yaml import NativePath, ProblemReport
from fsm_stage.config.fields import FieldRule, rule_metadata
from fsm_stage.constants import EXIT_PLAN_MODE, GOTO_STAGE

#: Arguments a path rule reads when ``path_args`` is omitted (a string or a list of strings).
DEFAULT_PATH_ARGS: tuple[str, ...] = ("path", "file", "file_path", "filename", "paths", "files")
#: fsm_stage's own tools: always allowed, whatever a policy says.
OWN_TOOLS: frozenset[str] = frozenset({GOTO_STAGE, EXIT_PLAN_MODE})
#: Group name grammar (``@name`` references it).
GROUP_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
GROUP_PREFIX = "@"
_GROUP_RE = re.compile(GROUP_NAME_PATTERN)
_GLOB_CHARS = frozenset("*?[")


def _rule(doc: str, expected: str, **kw: Any) -> dict[str, FieldRule]:
    return rule_metadata(doc, expected, **kw)


@attrs.frozen
class ToolRuleConfig:
    """One policy rule: a tool name, glob or ``@group``, optionally limited to path globs.

    YAML: a string, or a mapping ``{tool, paths, path_args}``.
    """

    tool: str = attrs.field(
        metadata=_rule(
            "A tool name, a glob over tool names (`read_*`) or `@group` (a graph `tool_groups` entry).",
            "a tool name, glob or @group",
            non_blank=True,
        )
    )
    paths: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=_rule(
            "Path globs (`**/*.md`) over paths relative to the session cwd: an `allow` rule needs every "
            "path to match, an `ask` rule one (docs/tool-policy.md).",
            "a non-empty list of path globs",
            min_items=1,
        ),
    )
    path_args: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=_rule(
            "Arguments holding the path(s) (default: path, file, file_path, filename, paths, files); "
            "other path-like arguments make the call unclassifiable.",
            "a non-empty list of argument names",
            min_items=1,
        ),
    )


@attrs.frozen
class ToolPolicyConfig:
    """Which tools may run: ``allow`` runs, ``ask`` runs after a human review, the rest is denied.

    ``allow`` omitted: every tool not matched by ``ask`` runs.
    """

    allow: tuple[ToolRuleConfig, ...] | None = attrs.field(
        default=None,
        metadata=_rule(
            "Tools that run (names, globs, @groups or {tool, paths}); omit: every tool not in `ask`.",
            "a list of tool rules",
        ),
    )
    ask: tuple[ToolRuleConfig, ...] = attrs.field(
        default=(),
        metadata=_rule(
            "Tools that run only after a human approves the call (a review of kind `tool`).",
            "a list of tool rules",
        ),
    )


for _cls in (ToolRuleConfig, ToolPolicyConfig):
    attrs.resolve_types(_cls)


def normalised_policy(policy: ToolPolicyConfig) -> dict[str, Any]:
    """A plain dict of ``policy`` (fingerprint input)."""

    def rules(rs: Sequence[ToolRuleConfig]) -> list[Any]:
        return [
            r.tool
            if r.paths is None and r.path_args is None
            else {"tool": r.tool, "paths": list(r.paths or ()), "path_args": list(r.path_args or ())}
            for r in rs
        ]

    return {"allow": None if policy.allow is None else rules(policy.allow), "ask": rules(policy.ask)}


# --- validation --------------------------------------------------------------------------------


def _is_glob(name: str) -> bool:
    return bool(_GLOB_CHARS & set(name))


def check_policies(
    data: Mapping[str, Any],
    plan: object,
    report: ProblemReport,
    *,
    tools: Iterable[str] | None = None,
    plan_path: NativePath = ("plan_mode",),
) -> None:
    """Validate ``tool_groups`` and every ``tools`` policy of a graph's plain ``data`` and of the
    plain plan-mode mapping ``plan``. ``tools``: the host's tool catalog (unknown names are then
    errors; without it, names in no group are warnings)."""
    catalog = None if tools is None else frozenset(tools) | OWN_TOOLS
    groups = data.get("tool_groups")
    known: dict[str, list[str]] = {}
    if groups is not None:
        if not isinstance(groups, Mapping):
            report.error(("tool_groups",), "expected a mapping {group name: [tool names or globs]}")
        else:
            for name, members in groups.items():
                path: NativePath = ("tool_groups", name)
                if not isinstance(name, str) or not _GROUP_RE.fullmatch(name):
                    report.error(path, f"group name must match {GROUP_NAME_PATTERN}", at_key=True)
                    continue
                if not isinstance(members, list) or not members:
                    report.error(path, "expected a non-empty list of tool names or globs")
                    continue
                ok = []
                for k, m in enumerate(members):
                    if not isinstance(m, str) or not m.strip():
                        report.error((*path, k), "expected a tool name or glob (a non-empty string)")
                    elif m.startswith(GROUP_PREFIX):
                        report.error(
                            (*path, k),
                            f"{json.dumps(m)}: groups cannot contain groups; "
                            "list the tools (or globs) themselves",
                        )
                    else:
                        ok.append(m)
                        _check_name(m, (*path, k), catalog, None, report)
                known[name] = ok
    stages = data.get("stages")
    if isinstance(stages, list):
        for i, stage in enumerate(stages):
            if isinstance(stage, Mapping) and "tools" in stage:
                _check_policy(stage["tools"], ("stages", i, "tools"), known, catalog, report)
    if isinstance(plan, Mapping) and "tools" in plan:
        _check_policy(plan["tools"], (*plan_path, "tools"), known, catalog, report)


def _check_policy(
    policy: object,
    path: NativePath,
    groups: Mapping[str, list[str]],
    catalog: frozenset[str] | None,
    report: ProblemReport,
) -> None:
    if not isinstance(policy, Mapping):
        return  # the structuring step reports the type
    grouped = {m for ms in groups.values() for m in ms}
    for key in ("allow", "ask"):
        rules = policy.get(key)
        if not isinstance(rules, list):
            continue
        for j, rule in enumerate(rules):
            rpath: NativePath = (*path, key, j)
            tool: object = rule
            if isinstance(rule, Mapping):
                tool, rpath = rule.get("tool"), (*rpath, "tool")
                _check_globs(rule, (*path, key, j), report)
            if not isinstance(tool, str):
                continue
            if not tool.strip():
                report.error(rpath, "is blank; expected a tool name, glob or @group")
                continue
            if tool.startswith(GROUP_PREFIX):
                if tool[1:] not in groups:
                    known = ", ".join(sorted(groups)) or "none (add a graph-level `tool_groups`)"
                    report.error(rpath, f"{json.dumps(tool)} names no tool group; expected one of: {known}")
            elif tool not in grouped:
                _check_name(
                    tool,
                    rpath,
                    catalog,
                    "is in no `tool_groups` entry and no host catalog was "
                    "given (check the spelling, or validate with --tools)",
                    report,
                )


def _check_globs(rule: Mapping[str, Any], path: NativePath, report: ProblemReport) -> None:
    for key in ("paths", "path_args"):
        values = rule.get(key)
        if values == []:
            report.error((*path, key), f"is empty; expected a non-empty list of {key.replace('_', ' ')}")
        if isinstance(values, list):
            for k, v in enumerate(values):
                if isinstance(v, str) and not v.strip():
                    report.error((*path, key, k), "is blank; expected a non-empty string")
                elif isinstance(v, str) and key == "paths":
                    _check_path_glob(v, (*path, key, k), report)


def _check_path_glob(glob: str, path: NativePath, report: ProblemReport) -> None:
    """A path glob is matched against paths made relative to the session cwd, with ``/``
    separators and ``..`` resolved: one that could never match such a path is an error (an
    ``ask`` rule that never applies fails open), one naming only a folder a warning."""
    shown = json.dumps(glob, ensure_ascii=False)
    if glob.startswith("/"):
        why = "is absolute"
    elif glob.startswith("~"):
        why = "is home-relative"
    elif ".." in glob.split("/"):
        why = "holds `..`"
    elif "\\" in glob:
        why = "holds a backslash"
    else:
        if glob.endswith("/") and glob.rstrip("/") and not glob.rstrip("/").endswith("**"):
            report.warn(path, f"{shown} matches only the folder itself, not what it holds; "
                              f"write {json.dumps(glob.rstrip('/') + '/**')} for both")
        return
    report.error(path, f"{why}: {shown} could never match; path globs are relative to the session cwd, "
                       "with `/` separators and `..` resolved (e.g. `secret/**`)")


def _check_name(
    name: str, path: NativePath, catalog: frozenset[str] | None, warn_why: str | None, report: ProblemReport
) -> None:
    if catalog is None:
        if warn_why is not None and name not in OWN_TOOLS and not _is_glob(name):
            report.warn(path, f"tool {json.dumps(name)} {warn_why}")
        return
    if _is_glob(name):
        if not any(fnmatch.fnmatchcase(t, name) for t in catalog):
            report.error(
                path,
                f"glob {json.dumps(name)} matches no tool of the host catalog; "
                f"expected a pattern over: {', '.join(sorted(catalog))}",
            )
    elif name not in catalog:
        close = ", ".join(sorted(catalog))
        report.error(path, f"unknown tool {json.dumps(name)}; the host catalog has: {close}")


def tool_count_label(
    policy: ToolPolicyConfig | None, groups: Mapping[str, Sequence[str]] | None
) -> str | None:
    """A short count for diagrams: ``3 tools``, ``3 tools, 1 ask``, ``all tools, 1 ask``
    (groups expanded, a glob counts once); None for no policy."""
    if policy is None:
        return None

    def count(rules: Sequence[ToolRuleConfig]) -> int:
        names: set[str] = set()
        for r in rules:
            names.update(
                groups.get(r.tool[1:], ()) if groups and r.tool.startswith(GROUP_PREFIX) else (r.tool,)
            )
        return len(names)

    allowed = (
        "all tools"
        if policy.allow is None
        else f"{count(policy.allow)} tool{'s' * (count(policy.allow) != 1)}"
    )
    return allowed + (f", {count(policy.ask)} ask" if policy.ask else "")
