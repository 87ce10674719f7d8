"""JSON Schema (draft 2020-12) of stage-graph YAML files, derived from the config classes.

Properties, types, defaults and descriptions come from ``attrs.fields`` of the classes in
``fsm_stage.config.model``; the rule keywords (``pattern``, ``minLength``, ``maxLength``,
``minimum``, ``minItems``, ``items.pattern``, ``items.maxLength``, ``not``) from the
``FieldRule`` metadata the loader also enforces. Both YAML forms are described; the root and
the plugin entries pick their branch with ``if``/``then``/``else`` (list or mapping; entry
``id``) so validators blame the right one. Every pattern is ECMA-262 under the ``u`` flag
(``ecma_pattern``) and "blank" is the loader's ``str.strip`` set, not an engine's ``\\s``.
What only the loader judges is listed in ``docs/schema.md``.

``json_schema()`` is the document, ``schema_text()`` its JSON text (``fsm-stage schema``);
``stage_graphs/stage-graph.schema.json`` is the same document (checked by a test), for
editors: ``# yaml-language-server: $schema=./stage-graph.schema.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import attrs

from fsm_stage.config import (
    CONFIG_CLASSES,
    EXTENSION_PREFIX,
    GUARD_NAME_PATTERN,
    PLAN_MODE_KEY,
    PLAN_MODE_PLUGIN_ID,
    PLUGIN_PACKAGES,
    SCALAR_SHORTHAND,
    STAGE_NAME_PATTERN,
    STAGE_SWITCH_PLUGIN_ID,
    GraphConfig,
    PlanModeConfig,
    field_rule,
    plugin_name_pattern,
    yaml_key,
)

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:fsm-stage:stage-graph"
#: File name of the shipped copy inside ``stage_graphs/``.
SCHEMA_FILE_NAME = "stage-graph.schema.json"

Form = Literal["native", "plugin"]

__all__ = ["SCHEMA_DIALECT", "SCHEMA_FILE_NAME", "SCHEMA_ID", "json_schema", "schema_text"]


_SYNTAX = frozenset("^$\\.*+?()[]{}|/")


def ecma_pattern(pattern: str) -> str:
    """``pattern`` (Python ``re`` syntax) with identity escapes that ECMA-262's ``u`` flag
    refuses made literal: ``re.escape``'s ``\\-`` outside a class, ``\\ ``, ``\\#``, ``\\~``….

    Escapes of letters and digits (``\\s``, ``\\x00``), of syntax characters and of ``/``
    are kept, as is ``\\-`` inside a class; both engines read the result alike.
    """
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            keep = (n.isascii() and n.isalnum()) or n in _SYNTAX or (n == "-" and in_class)
            out.append(c + n if keep else n)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def _u_escape(code: int) -> str:
    return f"\\u{code:04x}" if code > 0xFF else f"\\x{code:02x}"


def _blank_class() -> str:
    """A class of the characters ``str.strip`` removes (``isspace``), in ``\\xHH``/``\\uHHHH``
    ranges: Python's ``\\s`` also has them, ECMA-262's lacks ``\\x1c``–``\\x1f`` and
    ``\\x85`` and adds ``\\ufeff``, so neither ``\\s`` agrees with the loader everywhere."""
    codes = [c for c in range(0x3001) if chr(c).isspace()]
    ranges: list[tuple[int, int]] = []
    for c in codes:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1] = (ranges[-1][0], c)
        else:
            ranges.append((c, c))
    return "".join(_u_escape(a) if a == b else f"{_u_escape(a)}-{_u_escape(b)}" for a, b in ranges)


#: A string with a character the loader's ``str.strip`` keeps (the loader's "not blank").
NOT_BLANK = f"[^{_blank_class()}]"


#: Each rule pattern in words, appended to the description (editors show it on hover; the
#: error of a failed ``pattern`` is the regex, as ``patternErrorMessage`` would break ajv's strict mode).
_PATTERN_WORDS = {
    STAGE_NAME_PATTERN: "a lowercase letter, then lowercase letters, digits, `_` or `-`",
    GUARD_NAME_PATTERN: "a letter or `_`, then letters, digits, `_`, `.` or `-`",
}


def _form(rule: Any) -> str:
    """The "Form: …" sentence of a field's description (empty when it has no string rule)."""
    parts: list[str] = []
    for pattern, each in ((rule.pattern, ""), (rule.item_pattern, "each ")):
        if pattern is not None:
            parts.append(each + _PATTERN_WORDS.get(pattern, f"matching `{pattern}`"))
    if rule.max_length is not None or rule.item_max_length is not None:
        parts.append(f"at most {rule.max_length or rule.item_max_length} characters")
    if rule.non_blank:
        parts.append("not blank (some character other than whitespace)")
    parts.extend(message.split(";")[0].replace("is ", "not ", 1).replace("leaves", "never leaving", 1)
                 .replace("contains", "without", 1) for _, message in rule.forbid)
    return f" Form: {'; '.join(parts)}." if parts else ""


def _anchored(pattern: str) -> str:
    """A full-match regex for JSON Schema's search semantics, same in Python and ECMA-262.

    ``(?![\\s\\S])`` is "end of string" in both (``$`` would accept a trailing newline in
    Python, ``\\Z`` does not exist in ECMA-262).
    """
    return f"^(?:{ecma_pattern(pattern)})(?![\\s\\S])"


def _def_name(cl: type, form: Form) -> str:
    return cl.__name__ if form == "native" else f"Plugin{cl.__name__}"


def _type_schema(t: Any, form: Form) -> dict[str, Any]:
    """JSON Schema of a field type (str, float, Literal, tuple[X, ...], X | None, classes)."""
    args = get_args(t)
    origin: object = get_origin(t)
    if origin is Literal:
        return {"enum": list(args)}
    if len(args) == 2 and type(None) in args:  # optional: null is an error, see config docstring
        return _type_schema(next(a for a in args if a is not type(None)), form)
    if origin is Mapping and len(args) == 2 and args[0] is str:
        if args[1] is Any:  # model_settings: free-form JSON values
            return {"type": "object"}
        if args[1] is str:  # models: alias -> provider-qualified name
            return {"type": "object", "additionalProperties": _type_schema(str, form)}
        # tool_groups: name -> non-empty list
        return {"type": "object", "additionalProperties": {**_type_schema(args[1], form), "minItems": 1}}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": _type_schema(args[0], form)}
    if t is str:
        return {"type": "string"}
    if t is bool:
        return {"type": "boolean"}
    if t is float or t is int:
        return {"type": "number"}
    if attrs.has(t):
        ref = {"$ref": f"#/$defs/{_def_name(t, form)}"}
        if t in SCALAR_SHORTHAND:
            shorthand = attrs.fields_dict(t)[SCALAR_SHORTHAND[t]]
            return {"anyOf": [_field_schema(shorthand, form), ref]}
        return ref
    raise TypeError(f"no JSON Schema mapping for config type {t!r}")


def _field_schema(field: attrs.Attribute[Any], form: Form) -> dict[str, Any]:
    rule = field_rule(field)
    schema: dict[str, Any] = {"description": rule.doc + _form(rule), **_type_schema(field.type, form)}
    if rule.pattern is not None:
        schema["pattern"] = _anchored(rule.pattern)
    if rule.non_blank:
        schema["minLength"] = 1
        schema.setdefault("pattern", NOT_BLANK)
    if rule.max_length is not None:
        schema["maxLength"] = rule.max_length
    if rule.minimum is not None:
        schema["minimum"] = rule.minimum
    if rule.maximum is not None:
        schema["maximum"] = rule.maximum
    if rule.min_items is not None:
        schema["minItems"] = rule.min_items
    if rule.item_pattern is not None:
        schema["items"] = {**schema["items"], "pattern": _anchored(rule.item_pattern)}
    if rule.item_max_length is not None:
        schema["items"] = {**schema["items"], "maxLength": rule.item_max_length}
    if rule.forbid:
        schema["allOf"] = [
            {"not": {"pattern": ecma_pattern(regex)}, "description": msg} for regex, msg in rule.forbid
        ]
    if field.default is not attrs.NOTHING and field.default is not None:
        default = field.default
        schema["default"] = list(default) if isinstance(default, tuple) else default
    return schema


def _key(field: attrs.Attribute[Any], form: Form) -> str | None:
    return yaml_key(field) if form == "native" else field_rule(field).plugin_key


def _class_schema(cl: type, form: Form) -> dict[str, Any]:
    """Object schema of an attrs config class in ``form`` (plugin form: plugin keys only)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cl):
        key = _key(field, form)
        if key is None:
            continue
        properties[key] = _field_schema(field, form)
        if field.default is attrs.NOTHING and not (cl is GraphConfig and field.name == "name"):
            required.append(key)
    schema: dict[str, Any] = {
        "type": "object",
        "description": (cl.__doc__ or "").strip().splitlines()[0].replace("``", "`"),
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _native_file() -> dict[str, Any]:
    """The native root: a graph mapping plus an optional ``plan_mode`` mapping."""
    graph = _class_schema(GraphConfig, "native")
    required = graph.pop("required")
    graph_keys = list(graph["properties"])
    graph["properties"][PLAN_MODE_KEY] = {
        "description": "Plan mode for sessions using this file.",
        "$ref": f"#/$defs/{_def_name(PlanModeConfig, 'native')}",
    }
    graph["description"] = "Native form: a stage graph and/or plan-mode settings (docs/architecture.md)."
    graph["patternProperties"] = {
        f"^{EXTENSION_PREFIX}": {"description": "Ignored: a place for YAML anchors."}
    }
    # any graph key makes it a graph, which then needs its required keys
    graph["dependentRequired"] = {k: required for k in graph_keys}
    # each branch names the keys it requires under `properties` too (`true`: the root's own
    # `properties` judge them), so ajv's strict mode (`strictRequired`) accepts the branch
    graph["anyOf"] = [{"properties": dict.fromkeys(keys, True), "required": keys}
                      for keys in (required, [PLAN_MODE_KEY])]
    return graph


def _plugin_entry(plugin_id: str, config_cl: type) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "id": {"const": plugin_id},
            "name": {
                "type": "string",
                "pattern": _anchored(plugin_name_pattern(plugin_id)),
                "description": f"The package this entry configures: {PLUGIN_PACKAGES[plugin_id]} "
                "(any npm scope, or none).",
            },
            "config": {"$ref": f"#/$defs/{_def_name(config_cl, 'plugin')}"},
        },
        "required": ["id", "config"],
        "additionalProperties": False,
    }


def _entry_def(plugin_id: str) -> str:
    return "PluginEntry_" + "".join(part.capitalize() for part in plugin_id.split("-"))


def _plugin_item() -> dict[str, Any]:
    """A plugin-list entry: an object whose ``id`` picks the entry schema (``if``/``then``)."""
    ids = [STAGE_SWITCH_PLUGIN_ID, PLAN_MODE_PLUGIN_ID]
    return {
        "type": "object",
        "description": f"A plugin entry: `id` is one of {', '.join(ids)}.",
        "required": ["id"],
        "properties": {"id": {"enum": ids, "description": "Which plugin this entry configures."}},
        "allOf": [
            {
                "if": {"properties": {"id": {"const": pid}}, "required": ["id"]},
                "then": {"$ref": f"#/$defs/{_entry_def(pid)}"},
            }
            for pid in ids
        ],
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema document (a plain dict) of stage-graph files, both forms."""
    defs: dict[str, Any] = {"NativeFile": _native_file()}
    for cl in CONFIG_CLASSES:
        if cl is not GraphConfig:
            defs[_def_name(cl, "native")] = _class_schema(cl, "native")
    plugin_classes = [cl for cl in CONFIG_CLASSES if any(field_rule(f).plugin_key for f in attrs.fields(cl))]
    for cl in plugin_classes:
        defs[_def_name(cl, "plugin")] = _class_schema(cl, "plugin")
    defs["PluginList"] = {
        "type": "array",
        "description": "DeepSeek Harness plugin-list form (the seeds' YAML, verbatim).",
        "minItems": 1,
        "items": _plugin_item(),
    }
    defs[_entry_def(STAGE_SWITCH_PLUGIN_ID)] = _plugin_entry(STAGE_SWITCH_PLUGIN_ID, GraphConfig)
    defs[_entry_def(PLAN_MODE_PLUGIN_ID)] = _plugin_entry(PLAN_MODE_PLUGIN_ID, PlanModeConfig)
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID,
        "title": "fsm_stage stage graph",
        "description": "A stage graph and/or plan-mode settings for fsm_stage, in the native "
        "snake_case form or the DeepSeek Harness plugin-list form.",
        # a list is the plugin form, anything else the native one: errors name the right form
        "if": {"type": "array"},
        "then": {"$ref": "#/$defs/PluginList"},
        "else": {"$ref": "#/$defs/NativeFile"},
        "$defs": defs,
    }


def schema_text() -> str:
    """``json_schema()`` as indented JSON text with a trailing newline (what the CLI prints)."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
