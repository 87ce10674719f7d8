"""The plugin-list form: the seeds' DeepSeek Harness composition, read verbatim.

A list of entries ``{id, name, config}``: ``id`` is ``stage-switch`` (config keys
``stages``, ``section``, ``handoffDir``, ``initial``, ``minHandoffTokens``, ``language``;
stages hold only ``name`` and ``instruction``) or ``plan-mode`` (config key ``section``).
``name``, when given, must be the package the entry configures (``PLUGIN_PACKAGES``, any npm
scope: ``plugin_name_pattern``). ``load_plugin_list`` turns the round-trip tree into the
native plain data (``{{ stage_current }}`` in the stage-switch ``section`` becomes
``<< stage_current >>``; the plan-mode ``section`` stays verbatim; the graph is named after
the file), reporting every problem at its position.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from fsm_stage._yaml import (
    Loc,
    NativePath,
    Renamer,
    describe_value,
    key_suggestion,
    node_pos,
    one_line,
    plain_scalar,
    to_plain,
    unknown_key_message,
)
from fsm_stage.config.model import (
    PLAN_MODE_KEY,
    GraphConfig,
    PlanModeConfig,
    StageConfig,
    field_rule,
    yaml_key,
)
from fsm_stage.config.rules import DSH_VARIABLE
from fsm_stage.config.vocabulary import GraphReport
from fsm_stage.constants import PLAN_SOURCE_PLUGIN, STAGE_SOURCE_KIND

#: Plugin-list entry ids (the seeds' plugin ids, equal to their log source names).
STAGE_SWITCH_PLUGIN_ID: str = STAGE_SOURCE_KIND
PLAN_MODE_PLUGIN_ID: str = PLAN_SOURCE_PLUGIN
#: The package each plugin-list entry configures (the ``name`` of the seeds' entries); a
#: ``name`` must be that package, optionally republished under another npm scope
#: (``@fork/dsh-stage-switch``), because fsm_stage implements exactly that package.
PLUGIN_PACKAGES: Mapping[str, str] = MappingProxyType(
    {STAGE_SWITCH_PLUGIN_ID: "@ai4rpg/dsh-stage-switch", PLAN_MODE_PLUGIN_ID: "@deepseek-ai/dsh-plan-mode"}
)


def plugin_name_pattern(plugin_id: str) -> str:
    """Full-match regex of the ``name`` a plugin-list entry with ``plugin_id`` may carry:
    the seed's package name, or its base name with any (or no) npm scope."""
    base = re.escape(PLUGIN_PACKAGES[plugin_id].rsplit("/", 1)[-1])
    return f"(?:@[a-z0-9][a-z0-9._~-]*/)?{base}"


_PLUGIN_ENTRY_KEYS = ("id", "name", "config")
_PLUGIN_IDS = (STAGE_SWITCH_PLUGIN_ID, PLAN_MODE_PLUGIN_ID)


def _plugin_keys(cl: type) -> dict[str, str]:
    """plugin-form key -> attribute/native key of ``cl`` (only fields the plugin form accepts)."""
    return {field_rule(f).plugin_key or "": yaml_key(f) for f in attrs.fields(cl) if field_rule(f).plugin_key}


def _plugin_renamer(report: GraphReport) -> Renamer:
    graph_keys, stage_keys, plan_keys = (
        _plugin_keys(GraphConfig),
        _plugin_keys(StageConfig),
        _plugin_keys(PlanModeConfig),
    )

    def rename(npath: NativePath, key: str, pos: tuple[int, int], display: str) -> str | None:
        if npath == ():
            table = graph_keys
        elif npath == (PLAN_MODE_KEY,):
            table = plan_keys
        elif len(npath) == 2 and npath[0] == "stages":
            table = stage_keys
        else:
            return key
        if key in table:
            return table[key]
        report.error_at(pos, display, unknown_key_message(key, list(table)))
        suggestion = key_suggestion(key, list(table))
        if suggestion is not None:
            report.misspelt.add((npath, table[suggestion]))
        return None

    return rename


def _child_pos(node: Any, index: object, *, of_key: bool, default: tuple[int, int]) -> tuple[int, int]:
    """1-based position of item ``index`` of a sequence, or of key ``index`` (``of_key``) or its
    value in a mapping; ``default`` when ruamel recorded none (tagged or merged nodes)."""
    data = getattr(getattr(node, "lc", None), "data", None) or {}
    pos = data.get(index)
    if not pos:
        return default
    line, col = (pos[0], pos[1]) if of_key or len(pos) < 4 else (pos[2], pos[3])
    return (line + 1, col + 1)


def _entry_value(entry: Any) -> str:
    """``describe_value`` of a plugin-list item (a tagged scalar is described by its value)."""
    from ruamel.yaml.comments import TaggedScalar

    return describe_value(plain_scalar(entry.value if isinstance(entry, TaggedScalar) else entry))


def load_plugin_list(tree: Any, report: GraphReport, stem: str) -> dict[str, Any] | None:
    """The native plain data (graph keys plus ``plan_mode``) of the plugin list ``tree`` (a
    ruamel round-trip sequence), or None when no entry could be read; every problem is
    reported on ``report`` with its position (KEY e.g. ``[0].config.handoffDir``)."""
    from ruamel.yaml.comments import CommentedMap

    report.plugin_form = True
    native: dict[str, Any] = {}
    seen: dict[str, int] = {}
    any_entry = False
    root = node_pos(tree)
    tag = getattr(getattr(tree, "tag", None), "value", None)
    if tag is not None:
        report.error_at(
            root, "(file)", f"the plugin list has the YAML tag {tag}; fsm_stage knows no tags, remove it"
        )
    for idx, entry in enumerate(tree):
        epos = _child_pos(tree, idx, of_key=True, default=root)
        edisplay = f"[{idx}]"
        etag = getattr(getattr(entry, "tag", None), "value", None)
        if etag is not None:
            report.error_at(epos, edisplay, f"has the YAML tag {etag}; fsm_stage knows no tags, remove it")
            continue
        if not isinstance(entry, CommentedMap):
            report.error_at(
                epos,
                edisplay,
                f"expected a plugin entry mapping {{id, name, config}}, got {_entry_value(entry)}",
            )
            continue
        epos = node_pos(entry, epos) if not entry.lc.data else epos
        for key in entry:
            if key not in _PLUGIN_ENTRY_KEYS:
                report.error_at(
                    _child_pos(entry, key, of_key=True, default=epos),
                    f"{edisplay}.{key}",
                    unknown_key_message(str(key), list(_PLUGIN_ENTRY_KEYS)),
                )
        pid = entry.get("id")
        if "id" not in entry:
            report.error_at(
                epos, f"{edisplay}.id", f"required key is missing; expected one of: {', '.join(_PLUGIN_IDS)}"
            )
            continue
        il, ic = _child_pos(entry, "id", of_key=False, default=epos)
        il, ic = il - 1, ic - 1
        if not isinstance(pid, str) or pid not in _PLUGIN_IDS:
            report.error_at(
                (il + 1, ic + 1),
                f"{edisplay}.id",
                f"unknown plugin id {json.dumps(plain_scalar(pid), default=str)}; "
                f"expected one of: {', '.join(_PLUGIN_IDS)}",
            )
            continue
        if pid in seen:
            report.error_at(
                (il + 1, ic + 1),
                f"{edisplay}.id",
                f"duplicate plugin {json.dumps(pid)} (already at [{seen[pid]}]); expected each plugin once",
            )
            continue
        seen[pid] = idx
        name = entry.get("name")
        if "name" in entry:
            npos = _child_pos(entry, "name", of_key=False, default=epos)
            package = PLUGIN_PACKAGES[pid]
            if not isinstance(name, str) or not name.strip():
                report.error_at(
                    npos,
                    f"{edisplay}.name",
                    f"expected the package name {json.dumps(package)}, got {_entry_value(name)}",
                )
            elif not re.fullmatch(plugin_name_pattern(pid), name):
                report.error_at(
                    npos,
                    f"{edisplay}.name",
                    f"{json.dumps(one_line(name), ensure_ascii=False)} is not the {pid} package; expected "
                    f"{json.dumps(package)} (or omit `name`): fsm_stage implements that package, "
                    "a plugin entry for another package cannot be configured here",
                )
        if "config" not in entry:
            report.error_at(
                epos, f"{edisplay}.config", "required key is missing; expected the plugin's config mapping"
            )
            continue
        config = entry["config"]
        cl, cc = _child_pos(entry, "config", of_key=False, default=epos)
        cl, cc = cl - 1, cc - 1
        cdisplay = f"{edisplay}.config"
        if not isinstance(config, CommentedMap):
            report.error_at(
                (cl + 1, cc + 1),
                cdisplay,
                f"expected a config mapping, got {describe_value(plain_scalar(config))}",
            )
            continue
        any_entry = True
        cpos = node_pos(config, (cl + 1, cc + 1))
        if pid == STAGE_SWITCH_PLUGIN_ID:
            report.locs[()] = Loc(cdisplay, cpos, cpos)
            graph = to_plain(config, (), cdisplay, report, _plugin_renamer(report))
            assert isinstance(graph, dict)
            section = graph.get("section")
            if isinstance(section, str):
                graph["section"] = DSH_VARIABLE.sub(lambda m: f"<< {m.group(1)} >>", section)
            graph = {"name": stem, **graph}
            native.update(graph)
        else:
            report.locs[(PLAN_MODE_KEY,)] = Loc(cdisplay, cpos, cpos)
            native[PLAN_MODE_KEY] = to_plain(
                config, (PLAN_MODE_KEY,), cdisplay, report, _plugin_renamer(report)
            )
    if not any_entry and not report.errors:
        report.error_at(
            (1, 1),
            "(file)",
            "the plugin list holds no entry; expected `- id: stage-switch` and/or `- id: plan-mode`",
        )
    return native if any_entry else None


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------
