"""Tool policy in stage-graph files: shape, positioned problems, catalogs, schema, fingerprint."""

from __future__ import annotations

import json

import pytest
from policy_helpers import GRAPH, HOST_TOOLS, config

from fsm_stage.config import ConfigError, load_config, normalised
from fsm_stage.config.policy import ToolPolicyConfig, ToolRuleConfig
from fsm_stage.config.schema import json_schema

BASE = "name: g\nsection: Go.\nstages:\n  - name: a\n    instruction: A.\n"


def problems(text: str, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config(text, **kw)  # type: ignore[arg-type]
    return list(info.value.problems)


def test_the_yaml_shape_loads_into_policy_classes() -> None:
    cfg = config()
    assert cfg.graph is not None and cfg.plan_mode is not None
    explore = cfg.graph.stages[0].tools
    assert explore == ToolPolicyConfig(
        allow=(ToolRuleConfig("@read"), ToolRuleConfig("write_file", ("**/*.md",)))
    )
    assert cfg.graph.stages[1].tools is None
    assert cfg.graph.stages[2].tools is not None and cfg.graph.stages[2].tools.ask == (
        ToolRuleConfig("apply_patch"),
    )
    assert cfg.graph.tool_groups == {"read": ("read_file", "grep"), "test": ("run_*",)}
    assert cfg.plan_mode.tools is not None
    # names in no group and no catalog: warnings, each positioned
    assert [w.split(": ", 2)[1] for w in cfg.warnings] == [
        "stages[0].tools.allow[1].tool",
        "stages[2].tools.ask[0]",
        "plan_mode.tools.allow[1]",
    ]
    assert all(w.startswith("policy-demo.yaml:") for w in cfg.warnings)


def test_a_host_catalog_turns_unknown_names_into_errors_and_silences_known_ones() -> None:
    assert config(tools=HOST_TOOLS).warnings == ()
    lines = problems(GRAPH, tools=["read_file", "grep", "run_tests"])
    assert any('stages[0].tools.allow[1].tool: unknown tool "write_file"' in line for line in lines)
    assert any('stages[2].tools.ask[0]: unknown tool "apply_patch"' in line for line in lines)
    assert all(line.count(":") >= 3 for line in lines)
    glob = problems(GRAPH.replace('"run_*"', '"bench_*"'), tools=HOST_TOOLS)
    assert any(
        'tool_groups.test[0]: glob "bench_*" matches no tool of the host catalog' in line for line in glob
    )


@pytest.mark.parametrize(
    ("snippet", "where", "words"),
    [
        ("    tools: {allow: ['@nope']}\n", "stages[0].tools.allow[0]", "names no tool group"),
        ("    tools: {allow: [read], deny: [x]}\n", "stages[0].tools.deny", "unknown key"),
        ("    tools: [read]\n", "stages[0].tools", "expected a mapping"),
        ("    tools: {allow: [{tool: w, paths: []}]}\n", "stages[0].tools.allow[0].paths", "is empty"),
        ("    tools: {allow: [{tool: w, paths: ['']}]}\n", "stages[0].tools.allow[0].paths[0]", "is blank"),
        ("    tools: {allow: [{tool: w, path: ['x']}]}\n", "stages[0].tools.allow[0].path", "unknown key"),
        ("    tools: {allow: ['  ']}\n", "stages[0].tools.allow[0]", "is blank"),
    ],
)
def test_bad_policies_are_positioned_one_line_problems(snippet: str, where: str, words: str) -> None:
    lines = problems(BASE + snippet)
    assert any(f": {where}: " in line and words in line for line in lines), lines
    assert all(line.startswith("policy-demo.yaml:") for line in lines)


@pytest.mark.parametrize(
    ("groups", "words"),
    [
        ("tool_groups: [read]\n", "expected a mapping"),
        ("tool_groups: {read: []}\n", "non-empty list"),
        ("tool_groups: {read: ['@x']}\n", "groups cannot contain groups"),
        ("tool_groups: {'bad name': [x]}\n", "group name must match"),
        ("tool_groups: {read: [3]}\n", "expected a tool name or glob"),
    ],
)
def test_bad_tool_groups_are_positioned(groups: str, words: str) -> None:
    lines = problems(BASE + groups)
    assert any("tool_groups" in line and words in line for line in lines), lines


def test_plan_mode_group_references_need_a_graph_group() -> None:
    lines = problems("plan_mode:\n  section: P.\n  tools: {allow: ['@read']}\n")
    assert lines == [
        'policy-demo.yaml:3:19: plan_mode.tools.allow[0]: "@read" names no tool group; '
        "expected one of: none (add a graph-level `tool_groups`)"
    ]


def test_the_plugin_form_does_not_take_policies() -> None:
    text = (
        "- id: stage-switch\n  config:\n    section: S.\n    stages:\n"
        "      - {name: a, instruction: A., tools: {allow: [x]}}\n"
    )
    assert any("unknown key" in line for line in problems(text))


def test_fingerprint_input_changes_only_for_graphs_with_policies() -> None:
    plain = config(BASE)
    assert plain.graph is not None
    assert (
        "tool_groups" not in normalised(plain.graph) and "tools" not in normalised(plain.graph)["stages"][0]
    )
    cfg = config()
    assert cfg.graph is not None
    norm = normalised(cfg.graph)
    assert norm["tool_groups"]["read"] == ["read_file", "grep"]
    assert norm["stages"][0]["tools"]["allow"][1] == {
        "tool": "write_file",
        "paths": ["**/*.md"],
        "path_args": [],
    }


def test_the_schema_describes_the_keys_and_accepts_the_shipped_graph() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    defs = schema["$defs"]
    assert "tools" in defs["StageConfig"]["properties"] and "tools" in defs["PlanModeConfig"]["properties"]
    assert defs["NativeFile"]["properties"]["tool_groups"]["type"] == "object"
    assert set(defs["ToolPolicyConfig"]["properties"]) == {"allow", "ask"}
    validator = jsonschema.Draft202012Validator(schema)
    import yaml

    from fsm_stage.resources import data_dir

    shipped = yaml.safe_load((data_dir("stage_graphs") / "feature-work.yaml").read_text(encoding="utf-8"))
    assert list(validator.iter_errors(shipped)) == []
    bad = json.loads(json.dumps(shipped))
    bad["stages"][0]["tools"]["deny"] = ["x"]
    assert list(validator.iter_errors(bad)) != []


def test_feature_work_ships_a_policy() -> None:
    from fsm_stage.resources import data_dir

    cfg = load_config(
        data_dir("stage_graphs") / "feature-work.yaml",
        tools=["read_file", "grep", "list_files", "apply_patch", "write_file", "run_tests"],
    )
    assert cfg.graph is not None and cfg.plan_mode is not None and cfg.plan_mode.tools is not None
    assert [s.tools is not None for s in cfg.graph.stages] == [True, False, True]
