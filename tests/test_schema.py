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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from test_config_bad_graphs import BAD_GRAPHS, BadGraph

from fsm_stage._yaml.core_schema import CoreResolver
from fsm_stage.config import ConfigError, GraphConfig, StageConfig, load_config, load_config_text
from fsm_stage.resources import data_dir
from fsm_stage.schema import SCHEMA_FILE_NAME, json_schema, schema_text

EXAMPLES = sorted(data_dir("stage_graphs").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _data(text: str) -> Any:
    """The data an editor validates: YAML 1.2 core schema (``1_000`` is a string)."""
    yaml = YAML(typ="safe", pure=True)
    yaml.Resolver = CoreResolver
    return yaml.load(text)


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
    with pytest.raises(ConfigError):
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
    assert list(defs["EdgeConfig"]["properties"]) == ["to", "guards", "review"]
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
    with pytest.raises(ConfigError):
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
    except ConfigError:
        loaded = False
    assert loaded is valid


# --- property: schema and loader agree on generated graphs ---------------------------------


_NAMES = ["alpha", "beta", "gamma", "delta", "epsilon"]
_VALUES: list[Any] = [
    5,
    -1,
    0,
    2.5,
    True,
    None,
    "",
    "  ",
    "ok text",
    "/abs",
    "a/../b",
    "fr",
    "en",
    [],
    ["x"],
    {},
    {"a": 1},
]


@st.composite
def _valid_graphs(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=5, unique=True))
    stages = []
    for name in names:
        stage: dict[str, Any] = {"name": name, "instruction": f"Do the {name} work."}
        if draw(st.booleans()):
            others = [n for n in names if n != name]
            chosen = (
                draw(st.lists(st.sampled_from(others), unique=True, max_size=len(others))) if others else []
            )
            stage["targets"] = [
                {
                    "to": t,
                    "guards": draw(st.lists(st.sampled_from(["ready", "tests_pass", "ok.1"]), unique=True)),
                }
                if draw(st.booleans())
                else t
                for t in chosen
            ]
        stages.append(stage)
    graph: dict[str, Any] = {
        "stages": stages,
        "section": "In << stage_current >>; go to << stage_targets >>.",
    }
    optional = {
        "initial": st.sampled_from(names),
        "handoff_dir": st.sampled_from(["handoff", "docs/handoffs", ".fsm/h"]),
        "min_handoff_tokens": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)),
        "language": st.sampled_from(["en", "zh"]),
        "description": st.text(max_size=20),
        "plan_mode": st.just({"section": "Plan first."}),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            graph[key] = draw(strategy)
    return graph


def _loads(data: Any) -> bool:
    try:
        load_config_text(json.dumps(data), "g.yaml")
    except ConfigError:
        return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=_valid_graphs())
def test_generated_valid_graphs_accepted_by_both(
    graph: dict[str, Any], validator: jsonschema.Draft202012Validator
) -> None:
    assert _loads(graph)
    assert not list(validator.iter_errors(graph))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=_valid_graphs(), data=st.data())
def test_one_mutation_is_judged_alike_by_schema_and_loader(
    graph: dict[str, Any], data: st.DataObject, validator: jsonschema.Draft202012Validator
) -> None:
    """Replace one value the schema can judge (or add an unknown key) with a value from a pool of
    right and wrong ones: the schema and the loader give the same verdict."""
    stage = data.draw(st.sampled_from(graph["stages"]))
    where = data.draw(
        st.sampled_from(
            [
                "instruction",
                "section",
                "handoff_dir",
                "min_handoff_tokens",
                "language",
                "description",
                "plan_section",
                "guard",
                "unknown_top",
                "unknown_stage",
            ]
        )
    )
    value = data.draw(st.sampled_from(_VALUES))
    if where == "instruction":
        stage["instruction"] = value
    elif where == "plan_section":
        graph["plan_mode"] = {"section": value}
    elif where == "guard":
        others = [s["name"] for s in graph["stages"] if s is not stage]
        if not others:  # a one-stage graph has no edge to guard
            return
        stage["targets"] = [{"to": others[0], "guards": [value]}]
    elif where == "unknown_top":
        graph["extra"] = value
    elif where == "unknown_stage":
        stage["extra"] = value
    else:
        graph[where] = value
    assert _loads(graph) is (not list(validator.iter_errors(graph))), (where, value)
