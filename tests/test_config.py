"""Configuration behaviours: docs/contracts.md (S1–S12) and docs/contracts.md (B1–B5),
plus fsm_stage's additions (edges and guards, both YAML forms, null handling, warnings,
``normalised``). Bad-file positions are covered file by file in ``test_config_bad_graphs.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from docs_text import doc_section
from hypothesis import example, given, settings
from hypothesis import strategies as st
from shared_data import SHARED_DIR

from fsm_stage.config import (
    ConfigError,
    ConfigFile,
    EdgeConfig,
    GraphConfig,
    PlanModeConfig,
    StageConfig,
    load_config,
    load_config_text,
    normalised,
)
from fsm_stage.errors import UserError
from fsm_stage.resources import data_dir

STAGE_GRAPHS = data_dir("stage_graphs")
SHARED = SHARED_DIR

SECTION = "When the current stage is complete, call goto_stage."


def native(**overrides: Any) -> str:
    """The spec fixture in native form as JSON (a YAML subset), with overrides."""
    data: dict[str, Any] = {
        "stages": [
            {"name": n, "instruction": f"Instruction for the {n} stage."} for n in ("alpha", "beta", "gamma")
        ],
        "section": SECTION,
    }
    for key, value in overrides.items():
        if value is _ABSENT:
            data.pop(key, None)
        else:
            data[key] = value
    return json.dumps(data)


def plugin(**overrides: Any) -> str:
    """The spec fixture in the seeds' plugin-list form, with config-key overrides."""
    config: dict[str, Any] = {
        "stages": [
            {"name": n, "instruction": f"Instruction for the {n} stage."} for n in ("alpha", "beta", "gamma")
        ],
        "section": SECTION,
    }
    for key, value in overrides.items():
        if value is _ABSENT:
            config.pop(key, None)
        else:
            config[key] = value
    return json.dumps([{"id": "stage-switch", "name": "@ai4rpg/dsh-stage-switch", "config": config}])


_ABSENT = object()


def problems_of(text: str, **kw: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, "g.yaml", **kw)
    return info.value.problems


def graph_of(text: str) -> GraphConfig:
    cfg = load_config_text(text, "g.yaml")
    assert cfg.graph is not None
    return cfg.graph


FORMS = pytest.mark.parametrize("form", [native, plugin], ids=["native", "plugin"])


# --- docs/contracts.md ----------------------------------------------------------------------


@FORMS
def test_s1_complete_minimal_config_round_trips_without_optional_keys(form: Any) -> None:
    """S1: stages and section come back as given; no optional key is invented."""
    g = graph_of(form())
    assert g.stage_names == ("alpha", "beta", "gamma")
    assert [s.instruction for s in g.stages] == [f"Instruction for the {n} stage." for n in g.stage_names]
    assert g.section == SECTION
    assert g.initial is None and g.min_handoff_tokens is None
    assert all(s.targets is None for s in g.stages)
    assert g.initial_stage == "alpha"  # the default is applied by readers, not written in


def test_s2_optional_keys_are_echoed_in_both_forms() -> None:
    """S2: handoffDir / initial / minHandoffTokens given are kept exactly."""
    for g in (
        graph_of(plugin(handoffDir="docs/handoffs", initial="beta", minHandoffTokens=500)),
        graph_of(native(handoff_dir="docs/handoffs", initial="beta", min_handoff_tokens=500)),
    ):
        assert (g.handoff_dir, g.initial, g.min_handoff_tokens) == ("docs/handoffs", "beta", 500)
        assert g.initial_stage == "beta"


@FORMS
@pytest.mark.parametrize("stages", [[], _ABSENT], ids=["empty", "absent"])
def test_s3_missing_or_empty_stages_rejected(form: Any, stages: Any) -> None:
    """S3: `stages` missing or [] gives the non-empty `stages` fragment."""
    (line,) = problems_of(form(stages=stages))
    assert "non-empty `stages`" in line


@FORMS
def test_s4_duplicate_stage_names_rejected(form: Any) -> None:
    """S4: two stages named alpha."""
    text = form(stages=[{"name": "alpha", "instruction": "a"}, {"name": "alpha", "instruction": "b"}])
    (line,) = problems_of(text)
    assert 'duplicate stage "alpha"' in line
    assert re.search(r"stages\[1\]\.name: ", line)


@FORMS
@pytest.mark.parametrize("name", ["Implement", "stage 2", "a/b", ""])
def test_s5_unsafe_stage_names_rejected(form: Any, name: str) -> None:
    """S5: names outside [a-z][a-z0-9_-]* (file-name safety)."""
    (line,) = problems_of(form(stages=[{"name": name, "instruction": "x"}]))
    assert "must match" in line and json.dumps(name) in line


@FORMS
def test_s6_blank_instruction_rejected(form: Any) -> None:
    """S6: a whitespace-only instruction."""
    (line,) = problems_of(form(stages=[{"name": "alpha", "instruction": " \t "}]))
    assert "non-empty string `instruction`" in line


@FORMS
def test_s7_empty_section_rejected(form: Any) -> None:
    """S7: section ''."""
    (line,) = problems_of(form(section=""))
    assert "non-empty string `section`" in line


def test_s8_initial_outside_the_stage_list_rejected() -> None:
    """S8: initial 'ghost'."""
    for text in (native(initial="ghost"), plugin(initial="ghost")):
        (line,) = problems_of(text)
        assert "must name a configured stage" in line


def test_s9_negative_threshold_rejected() -> None:
    """S9: minHandoffTokens -1."""
    for text in (native(min_handoff_tokens=-1), plugin(minHandoffTokens=-1)):
        (line,) = problems_of(text)
        assert "non-negative finite number" in line


@pytest.mark.parametrize("language", ["zh", "en"])
def test_s10_shipped_languages_accepted(language: str) -> None:
    """S10: zh and en are echoed; absent means the default (en)."""
    assert graph_of(plugin(language=language)).language == language
    assert graph_of(native(language=language)).language == language
    assert graph_of(plugin()).language == "en"


def test_s10_other_language_rejected() -> None:
    """S10: fr gives `must be "en" or "zh"`."""
    for text in (native(language="fr"), plugin(language="fr")):
        (line,) = problems_of(text)
        assert 'must be "en" or "zh"' in line


def test_s11_unknown_top_level_key_rejected() -> None:
    """S11: an extra top-level key `modes`."""
    for text, key in ((native(modes=["x"]), "modes"), (plugin(modes=["x"]), "[0].config.modes")):
        (line,) = problems_of(text)
        assert f"{key}: unknown key(s) modes" in line


@pytest.mark.parametrize("value", ["  ", 5, True, ["handoff"]])
def test_s12a_handoff_dir_blank_or_not_a_string_rejected(value: Any) -> None:
    """S12a: handoffDir '  ' or a non-string."""
    (line,) = problems_of(plugin(handoffDir=value))
    assert "[0].config.handoffDir: " in line
    (line,) = problems_of(native(handoff_dir=value))
    assert "handoff_dir: " in line


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", '"12"'])
def test_s12b_non_finite_or_string_threshold_rejected(value: str) -> None:
    """S12b: NaN, ±∞ and strings are refused (YAML spells them .nan / .inf)."""
    text = f"stages: [{{name: alpha, instruction: x}}]\nsection: s\nmin_handoff_tokens: {value}\n"
    (line,) = problems_of(text)
    assert "non-negative finite number" in line


def test_s12b_zero_threshold_accepted() -> None:
    """S12b: 0 is a valid threshold (every model transition full, meter still required)."""
    assert graph_of(plugin(minHandoffTokens=0)).min_handoff_tokens == 0


def test_s12c_extra_stage_keys_are_errors_not_dropped() -> None:
    """S12c (deliberate change, issue: "unknown keys are errors at every level"): the seed drops
    extra keys inside a stage entry silently; fsm_stage reports them at their position."""
    (line,) = problems_of(plugin(stages=[{"name": "alpha", "instruction": "x", "extra": 1}]))
    assert "[0].config.stages[0].extra: unknown key(s) extra" in line
    (line,) = problems_of(native(stages=[{"name": "alpha", "instruction": "x", "extra": 1}]))
    assert "stages[0].extra: unknown key(s) extra" in line


def test_s12d_every_problem_is_reported_in_file_order() -> None:
    """S12d (deliberate change): the seed reports only the first failure in order; fsm_stage
    reports every problem of the file, one line each, sorted by position."""
    text = "zzz: 1\nstages:\n  - name: Bad\n    instruction: x\nsection: s\n"
    lines = problems_of(text)
    assert [line.split(": ", 2)[0] for line in lines] == ["g.yaml:1:1", "g.yaml:3:11"]
    assert "unknown key(s) zzz" in lines[0] and "must match" in lines[1]


def test_s12e_each_unknown_key_is_its_own_positioned_line() -> None:
    """S12e: two unknown keys a, b: both reported (one line each, in file order)."""
    lines = problems_of(native(a=1, b=2))
    found = [m.group(1) for line in lines if (m := re.search(r"unknown key\(s\) (\w+)", line))]
    assert len(lines) == 2 and found == ["a", "b"]


def test_s12f_result_shares_no_mutable_parts() -> None:
    """S12f: the loaded config is frozen attrs with tuples; nothing mutable is shared."""
    cfg = load_config_text(native(initial="beta"), "g.yaml")

    def walk(value: object) -> None:
        assert not isinstance(value, list | dict | set)
        if attrs.has(type(value)):
            for field in attrs.fields(type(value)):
                walk(getattr(value, field.name))
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    walk(cfg)
    assert cfg.graph is not None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stage: Any = cfg.graph.stages[0]  # frozen: the assignment must raise
        stage.name = "x"


def test_s12g_name_with_trailing_newline_rejected() -> None:
    """S12g: `explore\\n` does not fully match the grammar (re.fullmatch, not `$`)."""
    (line,) = problems_of(native(stages=[{"name": "explore\n", "instruction": "x"}]))
    assert "must match" in line


# --- docs/contracts.md ---------------------------------------------------------------------------


@pytest.mark.parametrize("config", [{}, {"section": 5}], ids=["missing", "number"])
def test_b1_plan_section_missing_or_not_a_string(config: dict[str, Any]) -> None:
    """B1: section missing or not a string (5) fails, in both forms."""
    for text in (json.dumps({"plan_mode": config}), json.dumps([{"id": "plan-mode", "config": config}])):
        (line,) = problems_of(text)
        assert "section: " in line
        assert "required key is missing" in line or "expected a string" in line


def test_b2_plan_section_blank() -> None:
    """B2: three spaces is blank."""
    for text in (
        json.dumps({"plan_mode": {"section": "   "}}),
        json.dumps([{"id": "plan-mode", "config": {"section": "   "}}]),
    ):
        (line,) = problems_of(text)
        assert "non-empty string `section`" in line


def test_b3_plan_unknown_keys_listed_in_insertion_order() -> None:
    """B3: every key besides section is reported, in the order written."""
    text = "plan_mode:\n  section: Plan first.\n  allowed_tools: [read]\n  modes: [x]\n"
    lines = problems_of(text)
    assert [line.split(": ")[1] for line in lines] == ["plan_mode.allowed_tools", "plan_mode.modes"]
    assert all("unknown key(s)" in line for line in lines)


def test_b4_plan_section_kept_verbatim_and_detached() -> None:
    """B4: a valid config resolves to a new object; section kept exactly, untrimmed."""
    section = "  You are in plan mode.\n\n  Explore first.  "
    for text in (
        json.dumps({"plan_mode": {"section": section}}),
        json.dumps([{"id": "plan-mode", "config": {"section": section}}]),
    ):
        cfg = load_config_text(text)
        assert cfg.plan_mode == PlanModeConfig(section)
        assert cfg.graph is None


@pytest.mark.parametrize("key", ["modes", "allowed_tools", "sandbox", "approval_policy"])
def test_b5_no_mode_names_tool_filters_sandbox_or_approval_settings(key: str) -> None:
    """B5: plan mode accepts only `section`; an empty config fails like a missing section."""
    (line,) = problems_of(json.dumps({"plan_mode": {"section": "Plan.", key: "x"}}))
    assert f"plan_mode.{key}: unknown key(s)" in line
    (line,) = problems_of("- id: plan-mode\n  config: {}\n")
    assert "[0].config.section: required key is missing" in line


# --- both forms, templates, edges ------------------------------------------------------------


def test_plugin_form_translates_dsh_template_variables() -> None:
    """{{stage_current}} / {{ stage_targets }} in the plugin form become << … >>."""
    g = graph_of(plugin(section="Now {{stage_current}}; next {{ stage_targets }}."))
    assert g.section == "Now << stage_current >>; next << stage_targets >>."


def test_plugin_form_unknown_template_variable_is_an_error() -> None:
    (line,) = problems_of(plugin(section="Now {{ stage_name }}."))
    assert "[0].config.section: template uses unknown variable(s) stage_name" in line


def test_native_section_may_use_both_variables_and_blocks() -> None:
    g = graph_of(native(section="<< stage_current >> -> << stage_targets >>"))
    assert "<< stage_targets >>" in g.section


def test_plan_mode_section_is_not_a_template() -> None:
    """B4: the plan-mode section is shown verbatim, so `{{x}}` / `<<x>>` in it are just text."""
    cfg = load_config_text(json.dumps({"plan_mode": {"section": "Use {{x}} and << y >> literally."}}))
    assert cfg.plan_mode is not None and cfg.plan_mode.section == "Use {{x}} and << y >> literally."


def test_targets_shorthand_and_guarded_edges() -> None:
    """targets: a stage name, or {to, guards}; None means every other stage (seed behaviour)."""
    text = (
        "stages:\n"
        "  - {name: alpha, instruction: a, targets: [beta, {to: gamma, guards: [ready, tests_pass]}]}\n"
        "  - {name: beta, instruction: b, targets: []}\n"
        "  - {name: gamma, instruction: c}\n"
        "section: s\n"
    )
    g = graph_of(text)
    assert g.stages[0].targets == (EdgeConfig("beta"), EdgeConfig("gamma", ("ready", "tests_pass")))
    assert g.edges_from("beta") == ()
    assert g.edges_from("gamma") == (EdgeConfig("alpha"), EdgeConfig("beta"))


def test_cached_edges_and_names_leave_equality_hash_evolve_and_pickle_unchanged() -> None:
    """edges_from / stage_names are cached per instance (hot path of the simulator and the
    stage switch) without becoming attrs fields: a used graph still equals, hashes and pickles
    like a fresh one, and attrs.evolve builds fresh caches for the new stages."""
    import pickle

    text = (
        "stages:\n"
        "  - {name: alpha, instruction: a}\n"
        "  - {name: beta, instruction: b, targets: [alpha]}\n"
        "  - {name: gamma, instruction: c}\n"
        "section: s\n"
    )
    used, fresh = graph_of(text), graph_of(text)
    assert used.edges_from("alpha") == (EdgeConfig("beta"), EdgeConfig("gamma"))
    assert used.edges_from("alpha") is not used.edges_from("gamma")
    assert used.edges_from("gamma") == (EdgeConfig("alpha"), EdgeConfig("beta"))
    assert used.edges_from("beta") == (EdgeConfig("alpha"),)
    # an unknown stage (removed after a log recorded it) may go anywhere
    assert used.edges_from("removed") == (EdgeConfig("alpha"), EdgeConfig("beta"), EdgeConfig("gamma"))
    assert used.stage_names == ("alpha", "beta", "gamma")
    assert used == fresh and hash(used) == hash(fresh)
    assert {f.name for f in attrs.fields(GraphConfig)}.isdisjoint({"stage_names", "_edges_to_every_stage"})
    assert "_edges_to_every_stage" not in repr(used) and "stage_names" not in repr(used)
    clone = pickle.loads(pickle.dumps(used))
    assert clone == used and clone.edges_from("alpha") == used.edges_from("alpha")
    delta = StageConfig(name="delta", instruction="d")
    grown = attrs.evolve(used, stages=(*used.stages, delta))
    assert grown.stage_names == ("alpha", "beta", "gamma", "delta")
    assert grown.edges_from("alpha") == (EdgeConfig("beta"), EdgeConfig("gamma"), EdgeConfig("delta"))
    assert used.edges_from("alpha") == (EdgeConfig("beta"), EdgeConfig("gamma"))


def test_plugin_and_native_forms_of_the_seed_mean_the_same_graph() -> None:
    """The seed README configuration loads verbatim and equals its native translation."""
    seed = load_config(STAGE_GRAPHS / "seed-stage-switch.yaml")
    assert seed.graph is not None
    text = (
        "name: seed-stage-switch\n"
        "stages:\n"
        "  - {name: explore, instruction: Explore the problem space and present a plan.}\n"
        "  - {name: implement, instruction: Implement the approved plan.}\n"
        "  - {name: verify, instruction: Verify the implementation with tests.}\n"
        "section: |\n"
        "  The current stage is complete. Call goto_stage to switch to a later\n"
        "  stage, submitting a handoff document with completed work, user\n"
        "  requirements, and discussion results.\n"
        "handoff_dir: handoff\ninitial: explore\nmin_handoff_tokens: 4000\n"
    )
    assert load_config_text(text).graph == seed.graph
    assert normalised(load_config_text(text)) == normalised(seed)


def _seed_readme_yaml_blocks() -> list[str]:
    meta = SHARED / "seeds" / "dsh-stage-switch.npm-metadata.json"
    if not meta.exists():
        pytest.skip(f"seed documents not found at {meta} (shared/ must sit beside the repo)")
    readme = json.loads(meta.read_text(encoding="utf-8"))["readme"]
    return re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)


def test_seed_readme_configuration_loads_verbatim() -> None:
    """The YAML block of the stage-switch seed README loads as written."""
    blocks = _seed_readme_yaml_blocks()
    complete = [b for b in blocks if "stages:" in b]
    assert complete
    cfg = load_config_text(complete[0], "seed-readme.yaml")
    assert cfg.graph is not None
    assert cfg.graph.stage_names == ("explore", "implement", "verify")
    assert (cfg.graph.handoff_dir, cfg.graph.initial, cfg.graph.min_handoff_tokens) == (
        "handoff",
        "explore",
        4000,
    )
    shipped = load_config(STAGE_GRAPHS / "seed-stage-switch.yaml").graph
    assert shipped is not None
    assert attrs.evolve(cfg.graph, name=shipped.name) == shipped


def test_seed_readme_language_fragment_is_reported_as_incomplete() -> None:
    """The README's `language: zh` snippet (stages elided) is refused with positioned lines."""
    fragments = [b for b in _seed_readme_yaml_blocks() if "language: zh" in b and "stages:" not in b]
    assert fragments
    lines = problems_of(fragments[0])
    assert any("[0].config.stages: required key is missing" in line for line in lines)
    assert any("[0].config.section: required key is missing" in line for line in lines)


def test_seed_plan_mode_example_loads() -> None:
    cfg = load_config(STAGE_GRAPHS / "seed-plan-mode.yaml")
    assert cfg.graph is None and cfg.plan_mode is not None
    assert cfg.plan_mode.section.startswith("You are in plan mode. Explore and design")


def test_feature_work_example_shape() -> None:
    """Other helpers rely on it: explore -> implement -> verify with targets, a guard and plan mode."""
    cfg = load_config(STAGE_GRAPHS / "feature-work.yaml", strict=True)
    assert cfg.graph is not None and cfg.plan_mode is not None
    g = cfg.graph
    assert g.stage_names == ("explore", "implement", "verify")
    assert g.initial_stage == "explore" and g.min_handoff_tokens == 4000
    assert any(e.guards for s in g.stages for e in s.targets or ())


def test_both_forms_in_one_plugin_list() -> None:
    text = plugin()[:-1] + ', {"id": "plan-mode", "config": {"section": "Plan first."}}]'
    cfg = load_config_text(text)
    assert cfg.graph is not None and cfg.plan_mode == PlanModeConfig("Plan first.")


def test_plugin_form_graph_is_named_after_the_file(tmp_path: Path) -> None:
    path = tmp_path / "my-flow.yaml"
    path.write_text(plugin())
    g = load_config(path).graph
    assert g is not None and g.name == "my-flow"


# --- null (Appendix B item 2) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["initial", "handoff_dir", "min_handoff_tokens", "language", "description", "name"]
)
def test_null_for_an_optional_key_is_an_error_not_absent(key: str) -> None:
    """Appendix B item 2, decided: YAML null (`key:`) is "supplied and invalid", as in the seed;
    the message says to give a value or remove the key."""
    text = f"stages: [{{name: alpha, instruction: x}}]\nsection: s\n{key}:\n"
    (line,) = problems_of(text)
    assert line.startswith(f"g.yaml:3:1: {key}: ")
    assert "null" in line


def test_null_targets_is_an_error_because_it_is_ambiguous() -> None:
    (line,) = problems_of("stages:\n  - name: alpha\n    instruction: x\n    targets:\nsection: s\n")
    assert "stages[0].targets: is null" in line


# --- warnings and strict ---------------------------------------------------------------------


def test_unreachable_stage_is_a_warning_and_an_error_under_strict() -> None:
    text = (
        "stages:\n"
        "  - {name: alpha, instruction: a, targets: [beta]}\n"
        "  - {name: beta, instruction: b, targets: [alpha]}\n"
        "  - {name: gamma, instruction: c, targets: [alpha]}\n"
        "section: s\n"
    )
    cfg = load_config_text(text, "g.yaml")
    assert len(cfg.warnings) == 1
    assert cfg.warnings[0].startswith('g.yaml:4:12: stages[2].name: stage "gamma" is unreachable')
    assert cfg.warning_details[0].severity == "warning"
    (line,) = problems_of(text, strict=True)
    assert line == cfg.warnings[0]


def test_reachability_follows_initial_and_default_targets() -> None:
    """With targets omitted every stage reaches every other; `initial` is the root."""
    assert load_config_text(native()).warnings == ()
    text = native(
        initial="beta",
        stages=[
            {"name": "alpha", "instruction": "a", "targets": []},
            {"name": "beta", "instruction": "b", "targets": ["gamma"]},
            {"name": "gamma", "instruction": "c", "targets": []},
        ],
    )
    (warning,) = load_config_text(text).warnings
    assert 'stage "alpha" is unreachable from initial stage "beta"' in warning


# --- errors, API shape ------------------------------------------------------------------------


def test_config_error_is_a_user_error_with_one_line_per_problem() -> None:
    with pytest.raises(ConfigError) as info:
        load_config_text(native(language="fr", initial="ghost"), "g.yaml")
    assert isinstance(info.value, UserError)
    assert str(info.value).splitlines() == info.value.problems
    assert len(info.value.problems) == 2


def test_problem_line_format_path_line_column_key_message() -> None:
    (line,) = problems_of("stages:\n  - name: alpha\n    instruction: x\nsection: s\nlanguage: fr\n")
    assert re.fullmatch(r"g\.yaml:5:11: language: .+", line)


def test_load_config_accepts_str_and_path(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(native())
    assert load_config(path) == load_config(str(path))
    assert load_config(path).path == str(path)


def test_config_classes_keep_their_published_fields() -> None:
    """The data model other layers read (INTERFACES.md A)."""
    assert [f.name for f in attrs.fields(GraphConfig)][:7] == [
        "name",
        "stages",
        "section",
        "initial",
        "handoff_dir",
        "min_handoff_tokens",
        "language",
    ]
    assert [f.name for f in attrs.fields(StageConfig)][:3] == ["name", "instruction", "targets"]
    assert [f.name for f in attrs.fields(EdgeConfig)] == ["target", "guards", "review"]
    assert [f.name for f in attrs.fields(ConfigFile)][:4] == ["path", "graph", "plan_mode", "warnings"]


# --- normalised --------------------------------------------------------------------------------


def test_normalised_is_json_and_resolves_defaults() -> None:
    cfg = load_config(STAGE_GRAPHS / "feature-work.yaml")
    data = normalised(cfg)
    assert json.loads(json.dumps(data)) == data
    assert data["graph"]["initial"] == "explore"
    assert data["plan_mode"] == {"section": cfg.plan_mode.section if cfg.plan_mode else None,
                                 "tools": {"allow": ["@read"], "ask": []}}
    implicit = graph_of(native())
    explicit = graph_of(
        native(
            initial="alpha",
            handoff_dir="handoff",
            language="en",
            stages=[
                {
                    "name": "alpha",
                    "instruction": "Instruction for the alpha stage.",
                    "targets": ["beta", "gamma"],
                },
                {
                    "name": "beta",
                    "instruction": "Instruction for the beta stage.",
                    "targets": ["alpha", "gamma"],
                },
                {
                    "name": "gamma",
                    "instruction": "Instruction for the gamma stage.",
                    "targets": ["alpha", "beta"],
                },
            ],
        )
    )
    assert implicit != explicit
    assert normalised(implicit) == normalised(explicit)


def test_normalised_ignores_documentation_but_not_behaviour() -> None:
    base = graph_of(native())
    assert normalised(graph_of(native(description="Docs only."))) == normalised(base)
    assert normalised(graph_of(native(min_handoff_tokens=10))) != normalised(base)
    guarded = graph_of(
        native(
            stages=[
                {"name": "alpha", "instruction": "x", "targets": [{"to": "beta", "guards": ["g"]}]},
                {"name": "beta", "instruction": "y"},
            ]
        )
    )
    assert normalised(guarded)["stages"][0]["targets"] == [{"to": "beta", "guards": ["g"]}]


def test_readme_config_section_examples_load() -> None:
    """The YAML examples of the README's config section are valid as written."""
    section = doc_section("config")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", section, flags=re.S) if "stages:" in b]
    assert len(blocks) == 2
    native_cfg, plugin_cfg = (load_config_text(b, "readme.yaml", strict=True) for b in blocks)
    assert native_cfg.graph is not None and native_cfg.plan_mode is not None
    assert plugin_cfg.graph is not None and plugin_cfg.plan_mode is not None
    assert "<< stage_targets >>" in plugin_cfg.graph.section


def test_typo_beside_plan_mode_is_reported_alone() -> None:
    """A plan-mode file with a stray key gets one line for that key, not missing graph keys."""
    (line,) = problems_of("plan_mode:\n  section: Plan first.\nplan_mod: x\n")
    assert line.startswith("g.yaml:3:1: plan_mod: unknown key(s) plan_mod (did you mean `plan_mode`?)")


def test_any_graph_key_makes_the_file_a_graph_needing_stages_and_section() -> None:
    lines = problems_of("language: zh\nplan_mode: {section: Plan first.}\n")
    assert [line.split(": ")[1] for line in lines] == ["stages", "section"]


# --- YAML features and robustness -------------------------------------------------------------


def test_x_keys_hold_anchors_that_stages_merge() -> None:
    """Top-level `x-…` keys are ignored, so they can hold anchors merged with `<<: *anchor`."""
    text = (
        "x-review: &review\n"
        "  instruction: Review the change.\n"
        "  targets: [{to: ship, guards: [review_clean]}]\n"
        "stages:\n"
        "  - <<: *review\n"
        "    name: review\n"
        "  - {name: ship, instruction: Ship it., targets: []}\n"
        "section: s\n"
    )
    g = graph_of(text)
    assert g.stages[0] == StageConfig(
        "review", "Review the change.", (EdgeConfig("ship", ("review_clean",)),)
    )


def test_merged_key_problem_is_positioned_at_the_merging_mapping() -> None:
    text = "x-base: &b\n  instruction: 5\nstages:\n  - <<: *b\n    name: alpha\nsection: s\n"
    (line,) = problems_of(text)
    assert line.startswith("g.yaml:4:5: stages[0].instruction: expected a string")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "stages:\n  - !custom {name: a, instruction: x}\nsection: s\n",
            "g.yaml:2:5: stages[0]: has the YAML tag !custom",
        ),
        # every explicit tag is refused (issue 15 item 7), standard ones too
        ("stages: !!set {a, b}\nsection: s\n", "g.yaml:1:9: stages: has the YAML tag !!set"),
        (
            "section: !!binary aGVsbG8=\nstages: [{name: a, instruction: x}]\n",
            "section: has the YAML tag !!binary",
        ),
        ("section: 2024-01-01\nstages: [{name: a, instruction: x}]\n", "got a date (2024-01-01; quote it"),
        ("!!set\n", "g.yaml:1:1: (file): has the YAML tag !!set"),
    ],
)
def test_unusual_yaml_values_are_one_line_problems(text: str, fragment: str) -> None:
    (line,) = problems_of(text)
    assert fragment in line


_FRAGMENTS = st.sampled_from(
    [
        *"ab:-[]{}'\"\n #&*!|>?%@`\t,.0~",
        "stages",
        "section",
        "name",
        "instruction",
        "targets",
        "plan_mode",
        "  ",
        "- ",
        "\n  ",
        "!!set",
        "!!binary",
        "!custom",
        "<<: *a",
        "&a",
        "? ",
        "{{",
        "<<",
        ">>",
        "<%",
        "id: stage-switch",
        "config:",
        "to:",
        "guards:",
    ]
)


@settings(max_examples=400, deadline=None)
@given(text=st.lists(_FRAGMENTS, max_size=40).map("".join))
@example(text="? a\n\n  a")  # a multi-line key: escaped in the message
def test_any_text_loads_or_gives_one_line_problems(text: str) -> None:
    """No input makes the loader raise anything but ConfigError; problems are single lines."""
    try:
        load_config_text(text)
    except ConfigError as err:
        assert err.problems
        assert all(len(p.splitlines()) == 1 and re.match(r"<string>:\d+:\d+: \S", p) for p in err.problems)


_KEYS = st.sampled_from(
    [
        "a\u2028b",  # a key with a line separator: escaped in messages
        "stages",
        "section",
        "name",
        "instruction",
        "targets",
        "to",
        "guards",
        "plan_mode",
        "initial",
        "handoff_dir",
        "min_handoff_tokens",
        "language",
        "id",
        "config",
        "x",
    ]
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=5)
    | st.sampled_from(["alpha", "<< x >>"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=_JSON)
def test_any_structure_loads_or_gives_one_line_problems(value: Any) -> None:
    try:
        load_config_text(json.dumps(value))
    except ConfigError as err:
        assert all(len(p.splitlines()) == 1 for p in err.problems)
