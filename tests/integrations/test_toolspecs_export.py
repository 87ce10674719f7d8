"""Tool-spec exports (fsm_stage.integrations.toolspecs): OpenAI chat/responses (strict mode
checked against OpenAI's documented strict-schema rules), Anthropic, MCP and Gemini, each
validated with the SDK's own types; ``goto_stage`` with its stage ``enum``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from sdk_check import check_typed, sdk

from fsm_stage.config import GraphConfig
from fsm_stage.config.load import load_config
from fsm_stage.integrations import (
    export_specs,
    goto_stage_spec_for,
    strict_schema,
    to_anthropic,
    to_gemini,
    to_mcp,
    to_openai,
    with_stage_enum,
)
from fsm_stage.integrations._toolspecs import OpenAIApi, Target
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.tools import ToolSpec
from fsm_stage.stage_switch import StageController

REPO = Path(__file__).resolve().parents[2]


def _feature_work() -> GraphConfig:
    graph = load_config(REPO / "stage_graphs" / "feature-work.yaml").graph
    assert graph is not None
    return graph


GRAPH = _feature_work()

# OpenAI's structured-outputs rules for strict function schemas ("Supported schemas"): the root
# is an object (not anyOf); every object lists all its properties in `required` and sets
# `additionalProperties: false`; optional means a union with null; composition keywords other
# than anyOf are refused; at most 5000 properties and 10 levels of nesting; at most 1000 enum
# values in all.
_REFUSED = ("allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
            "patternProperties", "unevaluatedProperties", "oneOf")
_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}


def openai_strict_problems(schema: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    counts = {"props": 0, "enum": 0}
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be an object schema, not anyOf")

    def walk(node: Any, path: str, depth: int) -> None:
        if not isinstance(node, dict):
            problems.append(f"{path}: not a schema object")
            return
        if depth > 10:
            problems.append(f"{path}: nested deeper than 10 levels")
        for key in _REFUSED:
            if key in node:
                problems.append(f"{path}: {key} is not supported in strict mode")
        types = node.get("type")
        for t in [types] if isinstance(types, str) else (types or []):
            if t not in _TYPES:
                problems.append(f"{path}: unsupported type {t!r}")
        if "enum" in node:
            counts["enum"] += len(node["enum"])
            if isinstance(types, list) and "null" in types and None not in node["enum"]:
                problems.append(f"{path}: nullable enum must list null")
        if "properties" in node or types == "object" or (isinstance(types, list) and "object" in types):
            props = node.get("properties", {})
            counts["props"] += len(props)
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties must be false")
            if sorted(node.get("required", [])) != sorted(props):
                problems.append(f"{path}: required must list every property")
            for name, sub in props.items():
                walk(sub, f"{path}.{name}", depth + 1)
        if "items" in node:
            walk(node["items"], f"{path}[]", depth + 1)
        for i, sub in enumerate(node.get("anyOf", [])):
            walk(sub, f"{path}|{i}", depth)
        for key in ("$defs", "definitions"):
            for name, sub in (node.get(key) or {}).items():
                walk(sub, f"{path}.{key}.{name}", depth)

    walk(schema, "$", 0)
    if counts["props"] > 5000:
        problems.append("more than 5000 properties")
    if counts["enum"] > 1000:
        problems.append("more than 1000 enum values")
    return problems


def all_specs() -> list[ToolSpec]:
    return [StageController(GRAPH).tool_spec(), goto_stage_spec_for(GRAPH),
            PlanModeController({"section": "Plan first."}).tool_spec(),
            ToolSpec("echo", "Echo.", {"type": "object", "properties": {"x": {"type": "string"}}},
                     output={"type": "string"})]


def test_goto_stage_has_the_graphs_stages_as_a_sorted_enum() -> None:
    spec = goto_stage_spec_for(GRAPH)
    assert spec.parameters["properties"]["stage"]["enum"] == sorted(GRAPH.stage_names)
    base = StageController(GRAPH).tool_spec()
    assert spec.output == base.output and spec.description == base.description
    plain = ToolSpec("t", "d", {"type": "object", "properties": {"stage": {"type": "string"}}})
    assert with_stage_enum(plain, ["b", "a", "b"]).parameters["properties"]["stage"] == {
        "type": "string", "enum": ["a", "b"]}
    assert plain.parameters["properties"]["stage"] == {"type": "string"}  # the input is unchanged
    shuffled = goto_stage_spec_for(list(reversed(GRAPH.stage_names)))
    assert shuffled.parameters == spec.parameters  # byte-stable whatever the graph's order
    with pytest.raises(ValueError, match="at least one stage"):
        goto_stage_spec_for([])
    with pytest.raises(TypeError):
        goto_stage_spec_for("explore")  # one string, not a list of stage names
    with pytest.raises(ValueError, match="no 'stage' property"):
        with_stage_enum(PlanModeController({"section": "Plan first."}).tool_spec(), ["a"])


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)
def test_strict_form_follows_openais_strict_rules(spec: ToolSpec) -> None:
    chat, responses = sdk("openai.types.chat"), sdk("openai.types.responses")
    apis: tuple[OpenAIApi, ...] = ("chat", "responses")
    for api in apis:
        tool = to_openai(spec, strict=True, api=api)
        params = tool["function"]["parameters"] if api == "chat" else tool["parameters"]
        assert openai_strict_problems(params) == []
        if api == "chat":
            assert tool["function"]["strict"] is True
            check_typed(tool, chat.ChatCompletionFunctionToolParam)
        else:
            assert tool["strict"] is True
            check_typed(tool, responses.FunctionToolParam)
    # the loose form keeps the schema as written, and it is not strict-valid when it has optionals
    loose = to_openai(spec)
    assert loose["function"]["parameters"] == dict(spec.parameters) and "strict" not in loose["function"]
    check_typed(loose, chat.ChatCompletionFunctionToolParam)


def test_goto_stage_strict_handoff_is_required_and_nullable() -> None:
    params = to_openai(goto_stage_spec_for(GRAPH), strict=True)["function"]["parameters"]
    assert params["required"] == ["stage", "handoff"]
    assert params["properties"]["handoff"]["type"] == ["string", "null"]
    assert params["properties"]["stage"]["type"] == "string"
    assert openai_strict_problems(dict(StageController(GRAPH).tool_spec().parameters)) == [
        "$: required must list every property"]


def test_strict_schema_rewrites_nested_objects_and_keeps_the_input() -> None:
    schema = {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "string", "enum": ["x", "y"]}}, "required": ["a"]}},
        "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "ref": {"$ref": "#/$defs/Thing"}},
        "$defs": {"Thing": {"type": "object", "properties": {"n": {"type": "number"}}}}}
    before = repr(schema)
    out = strict_schema(schema)
    assert repr(schema) == before
    assert openai_strict_problems(out) == []
    inner = out["properties"]["items"]["type"]
    assert inner == ["array", "null"]
    item = out["properties"]["items"]["items"]
    assert item["properties"]["b"] == {"type": ["string", "null"], "enum": ["x", "y", None]}
    assert item["properties"]["a"] == {"type": "integer"}
    assert out["properties"]["mode"] == {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    assert out["properties"]["ref"] == {"anyOf": [{"$ref": "#/$defs/Thing"}, {"type": "null"}]}
    assert out["$defs"]["Thing"]["properties"]["n"] == {"type": ["number", "null"]}


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)
def test_anthropic_mcp_and_gemini_exports_fit_the_sdk_types(spec: ToolSpec) -> None:
    anthropic_types = sdk("anthropic.types")
    mcp_types = sdk("mcp.types")
    genai_types = sdk("google.genai.types")
    check_typed(to_anthropic(spec), anthropic_types.ToolParam)
    assert to_anthropic(spec) == spec.to_anthropic()  # the same shape as the in-process export
    mcp = to_mcp(spec)
    tool = mcp_types.Tool.model_validate(mcp)
    assert tool.input_schema == dict(spec.parameters)
    assert tool.model_dump(by_alias=True, exclude_none=True, mode="json") == mcp
    if spec.output is not None and spec.output.get("type") == "object":
        assert mcp["outputSchema"] == dict(spec.output)
    else:
        assert "outputSchema" not in mcp
    gem = to_gemini(spec)
    decl = genai_types.FunctionDeclaration.model_validate(gem)
    assert decl.parameters_json_schema == dict(spec.parameters)
    assert decl.response_json_schema == (None if spec.output is None else dict(spec.output))
    genai_types.Tool(function_declarations=[decl])


def test_output_schemas_travel_only_where_the_target_has_a_slot() -> None:
    spec = goto_stage_spec_for(GRAPH)
    assert "output_schema" in to_openai(spec, api="responses")
    assert "output_schema" not in to_openai(spec, api="chat")["function"]
    assert set(to_anthropic(spec)) == {"name", "description", "input_schema"}
    assert "outputSchema" in to_mcp(spec) and "response_json_schema" in to_gemini(spec)


def test_export_specs_and_bad_arguments() -> None:
    specs = all_specs()
    assert export_specs(specs, "openai-chat", strict=True) == [to_openai(s, strict=True) for s in specs]
    assert export_specs(specs, "openai-responses") == [to_openai(s, api="responses") for s in specs]
    singles: tuple[tuple[Target, Callable[[ToolSpec], dict[str, Any]]], ...] = (
        ("anthropic", to_anthropic), ("mcp", to_mcp), ("gemini", to_gemini))
    for target, one in singles:
        assert export_specs(specs, target) == [one(s) for s in specs]
    with pytest.raises(ValueError, match="unknown tool export target"):
        export_specs(specs, cast(Any, "bedrock"))
    with pytest.raises(ValueError, match="unknown OpenAI api"):
        to_openai(specs[0], api=cast(Any, "assistants"))
    out = to_openai(specs[0], strict=True)
    out["function"]["parameters"]["properties"].clear()
    assert specs[0].parameters["properties"]  # exports never share the spec's objects


def test_a_strict_mode_call_with_a_null_handoff_is_accepted() -> None:
    from fsm_stage.stage_switch.tool import goto_stage_argument_problem

    catalog = StageController(GRAPH).catalog
    assert goto_stage_argument_problem({"stage": "implement", "handoff": None}, catalog) is None
    assert goto_stage_argument_problem({"stage": None}, catalog) is not None  # stage stays required
