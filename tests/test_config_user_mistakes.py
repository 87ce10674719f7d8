"""User mistakes in stage-graph files: overlong names, a plugin entry naming another package,
a terminal stage whose guidance lists targets, tagged plugin lists, and the positioned-problem
helpers. Behaviour IDs: S5 (stage names are safe file names).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fsm_stage.config import (
    MAX_NAME_LENGTH,
    ConfigError,
    ProblemReport,
    StageConfig,
    load_config_text,
    positioned_problems,
    strict_converter,
)
from fsm_stage.schema import json_schema

SECTION = "section: go\n"


def _problems(text: str, **kw: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, "g.yaml", **kw)
    return info.value.problems


# -- a stage name becomes `<stage>.md`, so it has a maximum length ----------------------------


def test_s5_stage_name_of_max_length_is_accepted() -> None:
    name = "a" * MAX_NAME_LENGTH
    cfg = load_config_text(f"stages:\n  - name: {name}\n    instruction: x\n{SECTION}")
    assert cfg.graph is not None and cfg.graph.stages[0].name == name


def test_s5_overlong_stage_name_is_one_positioned_problem() -> None:
    name = "a" * 300
    (line,) = _problems(f"stages:\n  - name: {name}\n    instruction: x\n{SECTION}")
    assert line.startswith("g.yaml:2:11: stages[0].name: ")
    assert f"at most {MAX_NAME_LENGTH} characters" in line
    assert "got 300" in line
    assert name not in line  # the message stays readable


def test_overlong_name_in_the_plugin_form() -> None:
    name = "b" * (MAX_NAME_LENGTH + 1)
    text = (
        "- id: stage-switch\n  config:\n    stages:\n"
        f"      - name: {name}\n        instruction: x\n    section: s\n"
    )
    (line,) = _problems(text)
    assert line.startswith("g.yaml:4:15: [0].config.stages[0].name: ")


def test_overlong_guard_name_is_refused() -> None:
    guard = "g" * (MAX_NAME_LENGTH + 1)
    text = (
        "stages:\n  - name: a\n    instruction: x\n    targets: [{to: b, guards: ["
        + guard
        + "]}]\n  - name: b\n    instruction: y\n"
        + SECTION
    )
    (line,) = _problems(text)
    assert "stages[0].targets[0].guards[0]" in line and f"at most {MAX_NAME_LENGTH}" in line


def test_schema_carries_the_length_limit() -> None:
    """The JSON Schema gets ``maxLength`` from the same field metadata the loader reads."""
    defs = json_schema()["$defs"]
    assert defs["StageConfig"]["properties"]["name"]["maxLength"] == MAX_NAME_LENGTH
    assert defs["PluginStageConfig"]["properties"]["name"]["maxLength"] == MAX_NAME_LENGTH
    assert defs["NativeFile"]["properties"]["initial"]["maxLength"] == MAX_NAME_LENGTH
    edge = defs["EdgeConfig"]["properties"]
    assert edge["to"]["maxLength"] == MAX_NAME_LENGTH
    assert edge["guards"]["items"]["maxLength"] == MAX_NAME_LENGTH
    assert StageConfig.__attrs_attrs__.name.metadata["rule"].max_length == MAX_NAME_LENGTH


# -- the plugin entry `name` must be the package fsm_stage implements --------------------------

_PLUGIN = """\
- id: stage-switch
  name: {name}
  config:
    stages:
      - name: explore
        instruction: x
    section: s
"""


@pytest.mark.parametrize(
    "name",
    ["'@ai4rpg/dsh-stage-switch'", "dsh-stage-switch", "'@myfork/dsh-stage-switch'"],
)
def test_plugin_name_of_the_stage_switch_package_is_accepted(name: str) -> None:
    load_config_text(_PLUGIN.format(name=name))


@pytest.mark.parametrize("name", ["'@totally/wrong'", "'@deepseek-ai/dsh-plan-mode'", "stage-switch"])
def test_plugin_name_of_another_package_is_a_positioned_problem(name: str) -> None:
    (line,) = _problems(_PLUGIN.format(name=name))
    assert line.startswith("g.yaml:2:9: [0].name: ")
    assert "@ai4rpg/dsh-stage-switch" in line


def test_plan_mode_entry_name_is_checked_too() -> None:
    text = "- id: plan-mode\n  name: '@ai4rpg/dsh-stage-switch'\n  config: {section: s}\n"
    (line,) = _problems(text)
    assert line.startswith("g.yaml:2:9: [0].name: ") and "@deepseek-ai/dsh-plan-mode" in line


def test_schema_refuses_a_wrong_plugin_name() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = [{"id": "stage-switch", "name": "@totally/wrong", "config": {"stages": [], "section": "s"}}]
    validator = jsonschema.Draft202012Validator(json_schema())
    doc[0]["config"] = {"stages": [{"name": "a", "instruction": "x"}], "section": "s"}
    assert not validator.is_valid(doc)
    doc[0]["name"] = "@ai4rpg/dsh-stage-switch"
    assert validator.is_valid(doc)


# -- a terminal stage with guidance that lists the targets -----------------------------------


def test_terminal_stage_with_stage_targets_in_section_is_a_warning() -> None:
    text = (
        "stages:\n  - name: a\n    instruction: x\n    targets: [b]\n"
        "  - name: b\n    instruction: y\n    targets: []\n"
        "section: 'Go on: call goto_stage with one of << stage_targets >>.'\n"
    )
    cfg = load_config_text(text, "g.yaml")
    (w,) = cfg.warning_details
    assert (w.line, w.column, w.key, w.severity) == (7, 14, "stages[1].targets", "warning")
    assert "<< stage_targets >>" in w.message and "no way out" in w.message


def test_terminal_stage_without_stage_targets_in_section_is_fine() -> None:
    text = (
        "stages:\n  - name: a\n    instruction: x\n    targets: [b]\n"
        "  - name: b\n    instruction: y\n    targets: []\n"
        "section: 'Call goto_stage when done.'\n"
    )
    assert load_config_text(text).warnings == ()


def test_terminal_stage_warning_is_an_error_under_strict() -> None:
    text = (
        "stages:\n  - name: a\n    instruction: x\n    targets: []\n"
        "section: 'one of << stage_targets >>'\n"
    )
    (line,) = _problems(text, strict=True)
    assert line.startswith("g.yaml:4:14: stages[0].targets: ")


def test_plugin_form_section_with_dsh_variable_warns_only_with_terminal_stage() -> None:
    """The plugin form cannot write targets: every stage has a way out, no warning."""
    text = (
        "- id: stage-switch\n  config:\n    stages:\n      - {name: a, instruction: x}\n"
        "    section: 'one of {{stage_targets}}'\n"
    )
    assert load_config_text(text).warnings == ()


# -- the crash on tagged plugin lists (`!!str\n- `) -----------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("!!str\n- ", "<string>:1:1: (file): "),
        ("!foo\n- id: stage-switch\n  config: {section: s}\n", "<string>:1:1: (file): "),
        ("- !!str\n", "<string>:1:3: [0]: "),
    ],
)
def test_tagged_plugin_list_is_a_positioned_one_line_problem(text: str, where: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_text(text)
    assert any(p.startswith(where) for p in info.value.problems), info.value.problems
    assert all("TaggedScalar" not in p and "NoneType" not in p for p in info.value.problems)


_PLUGIN_PIECES = st.sampled_from(
    [
        "- ",
        "-\n",
        "  ",
        "\n",
        "!!str ",
        "!!map ",
        "!!seq ",
        "!!set ",
        "!!omap ",
        "!x ",
        "&a ",
        "*a",
        "<<: *a\n",
        "id: stage-switch\n",
        "id: plan-mode\n",
        "name: n\n",
        "config:\n",
        "config: {section: s}\n",
        "config: !!map {section: s}\n",
        "stages: [{name: a, instruction: x}]\n",
        "section: s\n",
        "{}",
        "[]",
        "null",
        "? ",
        ": ",
    ]
)


@pytest.mark.filterwarnings("ignore::ruamel.yaml.error.ReusedAnchorWarning")
@settings(max_examples=500, deadline=None)
@given(text=st.lists(_PLUGIN_PIECES, min_size=1, max_size=16).map("".join))
@example(text="!!str\n- ")
@example(text="- <<: {id: stage-switch}\n  config: {section: s}\n")
@example(text="- !!omap [id: stage-switch]\n")
def test_odd_plugin_lists_load_or_give_one_line_problems(text: str) -> None:
    """Tagged, aliased, merged plugin-list documents never crash the loader."""
    try:
        load_config_text(text)
    except ConfigError as err:
        assert err.problems
        for p in err.problems:
            assert len(p.splitlines()) == 1 and re.match(r"<string>:\d+:\d+: \S", p), p


# -- the published positioned-problem helper -------------------------------------------------


@attrs.frozen
class Step:
    name: str
    count: int = 0


@attrs.frozen
class Doc:
    steps: tuple[Step, ...]


def test_positioned_problems_reports_cattrs_errors_at_their_yaml_positions() -> None:
    text = "steps:\n  - name: a\n  - name: 5\n    extra: 1\n"
    report = ProblemReport.from_yaml(text, "s.yaml")
    doc, problems = positioned_problems(report, Doc)
    assert doc is None
    assert [str(p) for p in problems] == [
        "s.yaml:3:11: steps[1].name: expected a string, got a number (5)",
        "s.yaml:4:5: steps[1].extra: unknown key(s) extra; expected one of: name, count",
    ]
    ok = ProblemReport.from_yaml("steps: [{name: a, count: 2}]\n", "s.yaml")
    doc, problems = positioned_problems(ok, Doc)
    assert problems == [] and doc == Doc((Step("a", 2),))


def test_positioned_problems_with_a_callers_converter_uses_its_messages() -> None:
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)

    def strict_str(value: object, _: object) -> str:
        if not isinstance(value, str):
            raise TypeError(f"expected text, got {value!r}")
        return value

    conv.register_structure_hook(str, strict_str)
    report = ProblemReport.from_yaml("steps:\n  - count: 1\n  - name: [x]\n", "s.yaml")
    doc, problems = positioned_problems(report, Doc, converter=conv)
    assert doc is None
    assert [str(p) for p in problems] == [
        "s.yaml:2:5: steps[0].name: required key is missing",
        "s.yaml:3:11: steps[1].name: expected text, got ['x']",
    ]


def test_problem_report_turns_yaml_syntax_errors_into_problems() -> None:
    report = ProblemReport.from_yaml("a: [1\n", "s.yaml")
    assert report.data is None
    (p,) = report.problems
    assert (p.line, p.column, p.key) == (1, 4, "(yaml)")
    report.error(("b",), "custom")
    assert [q.key for q in report.problems] == ["b", "(yaml)"]  # by position: b falls back to 1:1


@attrs.frozen
class Item:
    kind: Literal["a", "b"]
    n: int | None = None
    options: Mapping[str, Any] = attrs.field(factory=dict)
    on: bool = False


@attrs.frozen
class Items:
    items: tuple[Item, ...]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "items:\n  - kind: c\n    n: x\n    options: 5\n    on: 1\n",
            [
                's.yaml:2:11: items[0].kind: must be "a" or "b", got a string ("c")',
                's.yaml:3:8: items[0].n: expected an integer, got a string ("x")',
                "s.yaml:4:14: items[0].options: expected a mapping, got a number (5)",
                "s.yaml:5:9: items[0].on: expected true or false, got a number (1)",
            ],
        ),
        ("items: 5\n", ["s.yaml:1:8: items: expected a list, got a number (5)"]),
        (
            "items:\n  - 5\n",
            ["s.yaml:2:5: items[0]: expected a mapping {kind, n, options, on}, got a number (5)"],
        ),
        ("- a\n", ["s.yaml:1:1: (file): expected a mapping {items}, got a list"]),
        (
            "items: [{kind: a, n: ~}]\n",
            ["s.yaml:1:19: items[0].n: is null; give a value, or remove the key to use the default"],
        ),
    ],
)
def test_strict_converter_words_every_problem_without_python_internals(text: str, want: list[str]) -> None:
    report = ProblemReport.from_yaml(text, "s.yaml")
    obj, problems = positioned_problems(report, Items, converter=strict_converter())
    assert obj is None and [str(p) for p in problems] == want


def test_strict_converter_structures_valid_data() -> None:
    report = ProblemReport.from_yaml("items: [{kind: a, n: 3, options: {x: 1}, on: true}]\n", "s.yaml")
    obj, problems = positioned_problems(report, Items, converter=strict_converter())
    assert problems == [] and obj == Items((Item("a", 3, {"x": 1}, True),))


@attrs.frozen
class Names:
    names: tuple[str, ...]


def test_strict_converter_structures_each_list_item_once_and_reports_every_bad_one() -> None:
    seen: list[object] = []
    conv = strict_converter()

    def counting(value: object, _: object) -> str:
        seen.append(value)
        if not isinstance(value, str):
            raise ValueError(f"not a name: {value!r}")
        return value

    conv.register_structure_hook(str, counting)
    report = ProblemReport.from_yaml("names: [a, 1, b, 2, c]\n", "s.yaml")
    obj, problems = positioned_problems(report, Names, converter=conv)
    assert obj is None and seen == ["a", 1, "b", 2, "c"]  # a hook with effects runs once per item
    assert [str(p) for p in problems] == ["s.yaml:1:12: names[1]: not a name: 1",
                                          "s.yaml:1:18: names[3]: not a name: 2"]
    seen.clear()
    ok, _ = positioned_problems(ProblemReport.from_yaml("names: [a, b]\n", "s.yaml"), Names, converter=conv)
    assert ok == Names(("a", "b")) and seen == ["a", "b"]


@pytest.mark.parametrize(("key", "where"), [
    ("review: {approvers: [alice]}", "review rules go on an edge (`targets: [{to: NAME, review: {...}}]`)"),
    ("guards: [ready]", "guards go on an edge (`targets: [{to: NAME, guards: [...]}]`)"),
])
def test_a_key_written_on_the_stage_instead_of_its_edge_says_where_it_goes(key: str, where: str) -> None:
    text = ("name: g\nsection: s\nstages:\n  - name: a\n    instruction: A.\n"
            f"    {key}\n    targets: [b]\n  - {{name: b, instruction: B.}}\n")
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "g.yaml")
    name = key.split(":")[0]
    assert f"g.yaml:6:5: stages[0].{name}: unknown key {name} here: {where}" in str(err.value)
