"""Tool-spec exports for the common function-calling formats.

Every function takes a ``ToolSpec`` and returns a fresh plain dict (deep copies; nothing is
shared with fsm_stage's objects), shaped like the SDK parameter type named in its docstring.
No SDK is imported. Output schemas travel where the target has a slot for them: MCP
``outputSchema``, Gemini ``response_json_schema``, OpenAI Responses ``output_schema``; Chat
Completions and Anthropic have none, so the output schema is dropped there.

``strict_schema`` rewrites a JSON Schema into OpenAI strict form (every property required,
optional ones nullable, ``additionalProperties: false`` on every object). ``with_stage_enum``
gives a spec's ``stage`` property an ``enum`` (``fsm_stage.integrations.goto_stage_spec_for``
builds ``goto_stage`` with the graph's stages).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from fsm_stage.runtime.tools import ToolSpec

OpenAIApi = Literal["chat", "responses"]
Target = Literal["openai-chat", "openai-responses", "anthropic", "mcp", "gemini"]

__all__ = [
    "export_specs",
    "strict_schema",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai",
    "with_stage_enum",
]


def _copy(value: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(value))  # type: ignore[no-any-return]


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """``prop`` also accepting JSON null (``type`` list, ``enum`` + null, or ``anyOf``)."""
    t = prop.get("type")
    if isinstance(t, str) and "anyOf" not in prop and "const" not in prop:
        out = dict(prop, type=[t, "null"]) if t != "null" else prop
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    if isinstance(t, list) and "anyOf" not in prop and "const" not in prop:
        out = dict(prop, type=t if "null" in t else [*t, "null"])
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    variants = prop.get("anyOf")
    if isinstance(variants, list) and len(prop) == 1:
        if any(isinstance(v, Mapping) and v.get("type") == "null" for v in variants):
            return prop
        return {"anyOf": [*variants, {"type": "null"}]}
    return {"anyOf": [prop, {"type": "null"}]}


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) if k in ("items", "anyOf", "$defs", "definitions", "prefixItems") else v
           for k, v in node.items()}
    for key in ("$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {name: _strict(s) for name, s in node[key].items()}
    props = node.get("properties")
    is_object = node.get("type") == "object" or (isinstance(node.get("type"), list)
                                                 and "object" in node["type"]) or props is not None
    if is_object:
        props = props if isinstance(props, dict) else {}
        required = set(node.get("required") or ())
        new_props: dict[str, Any] = {}
        for name, prop in props.items():
            sub = _strict(prop)
            new_props[name] = sub if name in required else _nullable(sub)
        out["properties"] = new_props
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten for OpenAI strict mode (a new dict; the input is not changed).

    On every object schema (``type: object`` or with ``properties``), including nested ones
    under ``properties``, ``items``, ``anyOf``, ``$defs`` and ``definitions``: ``required``
    lists every property, ``additionalProperties`` is ``false``, and each property that was
    optional also accepts ``null`` (``{"type": ["string", "null"]}``; an ``enum`` gains
    ``null``; other shapes are wrapped in ``anyOf: [..., {"type": "null"}]``). A strict-mode
    model sends ``null`` for an optional argument it leaves out, so the tool must read
    ``null`` as "absent".
    """
    return _strict(_copy(schema))  # type: ignore[no-any-return]


def to_openai(spec: ToolSpec, *, strict: bool = False, api: OpenAIApi = "chat") -> dict[str, Any]:
    """``spec`` as an OpenAI function tool.

    ``api="chat"`` gives Chat Completions' ``ChatCompletionFunctionToolParam``: ``{"type":
    "function", "function": {"name", "description", "parameters"[, "strict": true]}}`` (no
    output schema slot). ``api="responses"`` gives the Responses API's flat
    ``FunctionToolParam``: ``{"type": "function", "name", "description", "parameters",
    "strict"[, "output_schema"]}``. With ``strict=True`` the parameters are ``strict_schema``'d
    and ``strict`` is true. Raises ``ValueError`` for another ``api``.
    """
    params = strict_schema(spec.parameters) if strict else _copy(spec.parameters)
    if api == "chat":
        function: dict[str, Any] = {"name": spec.name, "description": spec.description,
                                    "parameters": params}
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}
    if api == "responses":
        out: dict[str, Any] = {"type": "function", "name": spec.name, "description": spec.description,
                               "parameters": params, "strict": strict}
        if spec.output is not None:
            out["output_schema"] = _copy(spec.output)
        return out
    raise ValueError(f"unknown OpenAI api {api!r}; expected 'chat' or 'responses'")


def to_anthropic(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an Anthropic ``ToolParam``: ``{"name", "description", "input_schema"}``
    (Anthropic has no output-schema slot)."""
    return {"name": spec.name, "description": spec.description,
            "input_schema": _copy(spec.parameters)}


def to_mcp(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as an MCP ``Tool`` (wire form): ``{"name", "description", "inputSchema"[,
    "outputSchema"]}``. ``outputSchema`` is given only for an object-typed output schema
    (MCP requires ``type: object`` there; structured results are then JSON objects)."""
    out: dict[str, Any] = {"name": spec.name, "description": spec.description,
                           "inputSchema": _copy(spec.parameters)}
    if spec.output is not None and spec.output.get("type") == "object":
        out["outputSchema"] = _copy(spec.output)
    return out


def to_gemini(spec: ToolSpec) -> dict[str, Any]:
    """``spec`` as a google-genai ``FunctionDeclaration``: ``{"name", "description",
    "parameters_json_schema"[, "response_json_schema"]}`` (plain JSON Schema, not Gemini's
    OpenAPI ``Schema`` subset; ``FunctionDeclaration.model_validate`` accepts it)."""
    out: dict[str, Any] = {"name": spec.name, "description": spec.description,
                           "parameters_json_schema": _copy(spec.parameters)}
    if spec.output is not None:
        out["response_json_schema"] = _copy(spec.output)
    return out


def export_specs(specs: Iterable[ToolSpec], target: Target, *, strict: bool = False) -> list[dict[str, Any]]:
    """Export every spec for ``target``: ``"openai-chat"``, ``"openai-responses"`` (both honour
    ``strict``), ``"anthropic"``, ``"mcp"`` or ``"gemini"``. Raises ``ValueError`` for another
    target."""
    if target == "openai-chat":
        return [to_openai(s, strict=strict, api="chat") for s in specs]
    if target == "openai-responses":
        return [to_openai(s, strict=strict, api="responses") for s in specs]
    one = {"anthropic": to_anthropic, "mcp": to_mcp, "gemini": to_gemini}.get(target)
    if one is None:
        raise ValueError(f"unknown tool export target {target!r}; expected openai-chat, "
                         "openai-responses, anthropic, mcp or gemini")
    return [one(s) for s in specs]


def with_stage_enum(spec: ToolSpec, stages: Iterable[str], *, prop: str = "stage") -> ToolSpec:
    """A copy of ``spec`` whose ``prop`` property carries ``enum: [sorted stage names]``.

    Sorted so the exported catalog is byte-stable whatever order the graph lists its stages
    in (cache-safe prompts). Raises ``ValueError`` when ``spec`` has no such property or
    ``stages`` is empty.
    """
    names = sorted(set(stages))
    if not names:
        raise ValueError("with_stage_enum needs at least one stage name")
    params = copy.deepcopy(dict(spec.parameters))
    props = params.get("properties")
    if not isinstance(props, dict) or not isinstance(props.get(prop), dict):
        raise ValueError(f"tool {spec.name!r} has no {prop!r} property to constrain")
    props[prop] = dict(props[prop], enum=names)
    return ToolSpec(spec.name, spec.description, params,
                    None if spec.output is None else _copy(spec.output))
