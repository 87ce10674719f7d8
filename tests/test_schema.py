"""The JSON Schema agrees with the loader (issue: stage graphs, item 9).

Every example is accepted by both; every bad graph the schema can judge is refused by both;
every bad graph whose header says the schema cannot judge it is accepted by the schema (so a
rule the schema could express but does not would show up here). The shipped schema file is the
generated one, and the schema follows the attrs classes (a field added to the model appears).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import jsonschema
import pytest
from ruamel.yaml import YAML
from test_config_bad_graphs import BAD_GRAPHS, BadGraph

from fsm_stage.config import GraphConfig, InvalidConfigError, StageConfig, load_config, load_config_text
from fsm_stage.resources import data_dir
from fsm_stage.schema import SCHEMA_FILE_NAME, json_schema, schema_text

EXAMPLES = sorted(data_dir("stage_graphs").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _data(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


def test_schema_is_valid_draft_2020_12(validator: jsonschema.Draft202012Validator) -> None:
    assert validator.schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_shipped_schema_file_is_the_generated_schema() -> None:
    """stage_graphs/stage-graph.schema.json is exactly `fsm-stage schema` (never hand-edited)."""
    shipped = data_dir("stage_graphs") / SCHEMA_FILE_NAME
    assert shipped.read_text(encoding="utf-8") == schema_text(), "regenerate with: fsm-stage schema > " + str(
        shipped
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_accepted_by_schema_and_loader(
    path: Any, validator: jsonschema.Draft202012Validator
) -> None:
    """Each example loads, passes the schema and names the schema on its first line."""
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == f"# yaml-language-server: $schema=./{SCHEMA_FILE_NAME}"
    load_config(path, strict=True)
    errors = list(validator.iter_errors(_data(text)))
    assert errors == [], [e.message for e in errors]


def _yaml_data_or_none(bad: BadGraph) -> tuple[bool, Any]:
    try:
        return True, _data(bad.path.read_text(encoding="utf-8"))
    except Exception:
        return False, None


@pytest.mark.parametrize("bad", BAD_GRAPHS, ids=lambda g: g.id)
def test_bad_graphs_judged_alike_by_schema_and_loader(
    bad: BadGraph, validator: jsonschema.Draft202012Validator
) -> None:
    """Loader refuses every bad graph; the schema refuses exactly those it can judge."""
    with pytest.raises(InvalidConfigError):
        load_config(bad.path, strict=bad.strict)
    parsed, data = _yaml_data_or_none(bad)
    if not parsed or data is None:
        assert not bad.schema_refuses, "a file that is not one YAML document cannot be schema-checked"
        return
    schema_errors = list(validator.iter_errors(data))
    if bad.schema_refuses:
        assert schema_errors, "the schema accepts a graph the loader refuses"
    else:
        assert schema_errors == [], [e.message for e in schema_errors]


def test_schema_properties_follow_the_attrs_fields() -> None:
    """Derived, not hand-written: native properties are the attrs fields (EdgeConfig.target is `to`)."""
    defs = json_schema()["$defs"]
    assert list(defs["NativeFile"]["properties"]) == [f.name for f in attrs.fields(GraphConfig)] + [
        "plan_mode"
    ]
    assert list(defs["StageConfig"]["properties"]) == [f.name for f in attrs.fields(StageConfig)]
    assert list(defs["EdgeConfig"]["properties"]) == ["to", "guards"]
    assert list(defs["PluginGraphConfig"]["properties"]) == [
        "stages",
        "section",
        "initial",
        "handoffDir",
        "minHandoffTokens",
        "language",
    ]
    assert list(defs["PluginStageConfig"]["properties"]) == ["name", "instruction"]
    assert defs["NativeFile"]["properties"]["handoff_dir"]["default"] == "handoff"
    assert defs["NativeFile"]["properties"]["language"]["enum"] == ["en", "zh"]


def test_schema_name_pattern_rejects_a_trailing_newline_like_the_loader(
    validator: jsonschema.Draft202012Validator,
) -> None:
    """S12g: `explore\\n` is refused by both (the schema pattern is end-anchored without `$`)."""
    data = {"stages": [{"name": "explore\n", "instruction": "x"}], "section": "s"}
    assert list(validator.iter_errors(data))
    with pytest.raises(InvalidConfigError):
        load_config_text(json.dumps(data))
    data["stages"][0]["name"] = "explore"
    assert not list(validator.iter_errors(data))
    load_config_text(json.dumps(data))


@pytest.mark.parametrize(
    ("handoff_dir", "valid"),
    [
        ("handoff", True),
        (".fsm/handoff", True),
        ("a..b", True),
        ("/abs", False),
        ("..", False),
        ("a/../b", False),
        ("a\\..\\b", False),
        ("C:\\x", False),
        ("~/x", False),
        ("   ", False),
    ],
)
def test_schema_and_loader_agree_on_handoff_dir(
    handoff_dir: str, valid: bool, validator: jsonschema.Draft202012Validator
) -> None:
    """handoff_dir: relative, never leaving the session directory, judged by both alike."""
    data = {"stages": [{"name": "a", "instruction": "x"}], "section": "s", "handoff_dir": handoff_dir}
    assert (not list(validator.iter_errors(data))) is valid
    try:
        load_config_text(json.dumps(data))
        loaded = True
    except InvalidConfigError:
        loaded = False
    assert loaded is valid
