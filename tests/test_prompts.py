"""The shared jinja2 environment, template rendering and wording catalogs (fsm_stage.prompts)."""

from __future__ import annotations

import copy
from pathlib import Path

import jinja2.sandbox
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm_stage import prompts
from fsm_stage.errors import UserError
from fsm_stage.prompts import (
    PromptTemplateError,
    deep_merge,
    environment,
    load_catalog,
    render,
    template_variables,
)

TEST_TEMPLATES = Path(__file__).parent / "data" / "templates"


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    prompts.clear_caches()


# --------------------------------------------------------------------------- environment


def test_environment_is_one_shared_sandboxed_strict_env() -> None:
    env = environment()
    assert env is environment()
    assert isinstance(env, jinja2.sandbox.SandboxedEnvironment)
    assert env.undefined is jinja2.StrictUndefined
    assert (env.variable_start_string, env.variable_end_string) == ("<<", ">>")
    assert env.autoescape is False
    assert env.keep_trailing_newline is True


def test_render_substitutes_angle_variables_and_leaves_markdown_and_braces_alone() -> None:
    text = "# Stage << stage_current >>\n{{stage_current}} {x} `a < b > c` & <b>bold</b>\n"
    out = render(text, stage_current="explore")
    assert out == "# Stage explore\n{{stage_current}} {x} `a < b > c` & <b>bold</b>\n"


def test_render_blocks_and_comments_use_their_own_delimiters() -> None:
    out = render("<# hidden #><% for t in targets %><< t >>;<% endfor %>", targets=["a", "b"])
    assert out == "a;b;"


def test_render_does_not_rescan_or_escape_inserted_values() -> None:
    """Inserted values are literal (the spirit of S116 b/c): no re-scan, no escaping."""
    value = "<< other >> {y} \\1 $1 <tag>"
    assert render("[<< v >>]", v=value) == f"[{value}]"


def test_render_keeps_trailing_newline() -> None:
    assert render("line << a >>\n", a=1) == "line 1\n"


def test_undefined_variable_is_a_user_error_naming_it() -> None:
    with pytest.raises(PromptTemplateError) as info:
        render("Hello << stage_curent >>", stage_current="x")
    message = str(info.value)
    assert "stage_curent" in message
    assert "stage_current" in message  # the variables that were given
    assert isinstance(info.value, UserError)
    assert "\n" not in message


def test_syntax_error_is_a_user_error_with_line() -> None:
    with pytest.raises(PromptTemplateError, match="line 2"):
        render("ok\n<< unclosed ", a=1)


def test_sandbox_refuses_unsafe_attribute_access() -> None:
    with pytest.raises(PromptTemplateError, match="sandbox"):
        render("<< x.__class__.__mro__ >>", x=1)


def test_template_variables_lists_free_variables_only() -> None:
    text = "<< stage_current >> <% for t in items %><< t >><< sep >><% endfor %>"
    assert template_variables(text) == {"stage_current", "items", "sep"}
    assert template_variables("no variables {{x}}") == set()


def test_template_variables_reports_syntax_errors() -> None:
    with pytest.raises(PromptTemplateError):
        template_variables("<% if %>")


# --------------------------------------------------------------------------- deep_merge


EN = {
    "review": {"header": "H", "full_question": "Q << stage >>"},
    "errors": {"not_configured": "N"},
    "list": [1, 2],
}
ZH = {"review": {"header": "阶段", "full_question": "问 << stage >>"}}


def test_deep_merge_overlays_per_key_S103() -> None:
    """S103: the zh review replaces en's review; every other group stays English."""
    merged = deep_merge(EN, ZH)
    assert merged["review"] == ZH["review"]
    assert merged["errors"] == EN["errors"]
    assert merged["list"] == EN["list"]


def test_deep_merge_keeps_untouched_nested_keys() -> None:
    merged = deep_merge(EN, {"review": {"header": "X"}})
    assert merged["review"] == {"header": "X", "full_question": "Q << stage >>"}


def test_deep_merge_never_mutates_inputs_S104() -> None:
    """S104: the English base (and the overlay) are unchanged after a merge, and the result
    shares no mutable structure with them."""
    en_before, zh_before = copy.deepcopy(EN), copy.deepcopy(ZH)
    merged = deep_merge(EN, ZH)
    assert en_before == EN and zh_before == ZH
    merged["errors"]["not_configured"] = "changed"
    merged["list"].append(3)
    assert en_before == EN


def test_deep_merge_is_idempotent_S105() -> None:
    """S105: merge(merge(en, zh), zh) == merge(en, zh)."""
    once = deep_merge(EN, ZH)
    assert deep_merge(once, ZH) == once


def test_deep_merge_empty_overlay_returns_base_S106() -> None:
    """S106."""
    assert deep_merge(EN, {}) == EN


@pytest.mark.parametrize("overlay", ["x", 42, None, [1]])
def test_deep_merge_non_mapping_overlay_wins_S107(overlay: object) -> None:
    """S107: a primitive (or list) overlay is the result."""
    assert deep_merge(EN, overlay) == overlay


_trees = st.recursive(
    st.text(max_size=3),
    lambda children: st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
    max_leaves=10,
)


@given(_trees, _trees)
def test_deep_merge_properties(base: object, overlay: object) -> None:
    """S104/S105 as properties: inputs unchanged, idempotent, overlay leaves win."""
    base_before, overlay_before = copy.deepcopy(base), copy.deepcopy(overlay)
    once = deep_merge(base, overlay)
    assert base == base_before and overlay == overlay_before
    assert deep_merge(once, overlay) == once
    if not isinstance(overlay, dict):
        assert once == overlay


# --------------------------------------------------------------------------- catalogs


def test_catalog_text_renders_dotted_keys() -> None:
    cat = load_catalog("demo", base_dir=TEST_TEMPLATES)
    expected = "Switch to verify and archive the conversation?"
    assert cat.text("review.full_question", stage="verify") == expected
    assert cat.raw("review.full_question") == "Switch to << stage >> and archive the conversation?"
    assert cat.text("notice.block", stages=["a", "b"]) == "Stages:\n- a\n- b\n"


def test_catalog_keeps_leading_and_trailing_spaces() -> None:
    """Leading/trailing spaces are load-bearing (docs/contracts.md: handoffPath starts with a space,
    userSwitchPrefix ends with one)."""
    cat = load_catalog("demo", base_dir=TEST_TEMPLATES)
    assert cat.text("tool_result.handoff_path", path="h/x.md").startswith(" Read")
    assert cat.text("notice.user_switch_prefix", stage="a").endswith(". ")


def test_catalog_missing_key_names_key_and_catalog() -> None:
    cat = load_catalog("demo", base_dir=TEST_TEMPLATES)
    with pytest.raises(KeyError) as info:
        cat.text("review.nope")
    assert "review.nope" in str(info.value) and "demo" in str(info.value)
    with pytest.raises(KeyError, match="group"):
        cat.raw("review")
    assert not cat.has("review.nope") and cat.has("review.header")


def test_catalog_undefined_variable_names_catalog_and_key() -> None:
    cat = load_catalog("demo", base_dir=TEST_TEMPLATES)
    with pytest.raises(PromptTemplateError) as info:
        cat.text("review.full_question")
    assert "review.full_question" in str(info.value) and "stage" in str(info.value)


def test_zh_falls_back_to_english_per_key() -> None:
    """Like S103/S114: zh ships review texts only; every other key stays English."""
    en = load_catalog("demo", base_dir=TEST_TEMPLATES)
    zh = load_catalog("demo", "zh", base_dir=TEST_TEMPLATES)
    assert zh.text("review.header") == "阶段切换"
    assert zh.text("review.full_question", stage="verify") == "是否切换到 verify 并归档当前对话？"
    assert zh.raw("review.approve_label") == en.raw("review.approve_label")
    assert zh.raw("notice.user_switch_prefix") == en.raw("notice.user_switch_prefix")
    assert zh.keys() == en.keys()


def test_zh_without_overlay_file_is_english(tmp_path: Path) -> None:
    """Like S116 f: a missing zh overlay renders English."""
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "c.yaml").write_text("a: A << x >>\n", encoding="utf-8")
    assert load_catalog("c", "zh", base_dir=tmp_path).text("a", x=1) == "A 1"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_override_folder_is_merged_on_top(tmp_path: Path) -> None:
    _write(tmp_path / "en" / "demo.yaml", "review:\n  header: Deployer header\n")
    _write(tmp_path / "zh" / "demo.yaml", "review:\n  approve_label: 批准\n")
    en = load_catalog("demo", override_dir=tmp_path, base_dir=TEST_TEMPLATES)
    assert en.raw("review.header") == "Deployer header"
    assert en.raw("review.approve_label") == "Approve"
    zh = load_catalog("demo", "zh", override_dir=tmp_path, base_dir=TEST_TEMPLATES)
    assert zh.raw("review.header") == "阶段切换"  # shipped zh beats a deployer's English text
    assert zh.raw("review.approve_label") == "批准"
    assert zh.sources[-1] == tmp_path / "zh" / "demo.yaml"


def test_override_with_unknown_key_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "en" / "demo.yaml", "review:\n  headr: typo\n")
    with pytest.raises(PromptTemplateError, match=r"review\.headr: unknown catalog key"):
        load_catalog("demo", override_dir=tmp_path, base_dir=TEST_TEMPLATES)


def test_override_changing_shape_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "en" / "demo.yaml", "review: just text\n")
    with pytest.raises(PromptTemplateError, match="group"):
        load_catalog("demo", override_dir=tmp_path, base_dir=TEST_TEMPLATES)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: [1, 2]\n", "must be a text"),
        ("a: 3\n", "must be a text"),
        ("- a\n", "mapping"),
        ("a: 'unclosed\n", "invalid YAML"),
        ("a: << x\n", "syntax error"),
    ],
)
def test_bad_catalog_files_are_user_errors(tmp_path: Path, text: str, fragment: str) -> None:
    _write(tmp_path / "en" / "c.yaml", text)
    with pytest.raises(PromptTemplateError, match=fragment):
        load_catalog("c", base_dir=tmp_path)


def test_missing_catalog_and_bad_language_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(PromptTemplateError, match="no English file"):
        load_catalog("absent", base_dir=tmp_path)
    with pytest.raises(PromptTemplateError, match="language"):
        load_catalog("demo", "fr", base_dir=TEST_TEMPLATES)


def test_catalogs_are_cached_and_reloaded_when_a_file_changes(tmp_path: Path) -> None:
    _write(tmp_path / "en" / "c.yaml", "a: one\n")
    first = load_catalog("c", base_dir=tmp_path)
    assert load_catalog("c", base_dir=tmp_path) is first
    assert {first: 1}[first] == 1  # usable as a dict key
    _write(tmp_path / "en" / "c.yaml", "a: two, longer\n")
    assert load_catalog("c", base_dir=tmp_path).raw("a") == "two, longer"


def test_catalog_as_dict_is_a_copy() -> None:
    cat = load_catalog("demo", base_dir=TEST_TEMPLATES)
    data = cat.as_dict()
    data["review"]["header"] = "mutated"
    assert cat.raw("review.header") == "Stage transition"
    assert cat.variables("review.full_question") == {"stage"}


def test_shipped_catalogs_load_in_every_language() -> None:
    """Every shipped catalog (written by the plan-mode / stage-switch owners) loads and compiles
    in en and zh, and zh has exactly the English keys."""
    from fsm_stage.resources import data_dir

    names = sorted(p.stem for p in (data_dir("templates") / "en").glob("*.yaml"))
    assert {"plan_mode", "stage_switch"} <= set(names), names  # data_dir resolves the shipped ones
    for name in names:
        en, zh = load_catalog(name), load_catalog(name, "zh")
        assert en.keys() == zh.keys(), name


# --------------------------------------------------------------------------- sandbox, errors, empty output


def test_environment_exposes_no_globals() -> None:
    """A template sees only the variables it is given: no ``lipsum``, ``range``,
    ``dict``, ``cycler``, ``joiner`` or ``namespace`` from jinja's defaults."""
    assert dict(environment().globals) == {}
    for name in ("lipsum", "range", "dict", "cycler", "joiner", "namespace"):
        with pytest.raises(PromptTemplateError, match=f"undefined variable.*{name}"):
            render(f"<< {name} >>")
    assert template_variables("<< lipsum >> << range(10) >>") == {"lipsum", "range"}


@pytest.mark.parametrize(
    ("text", "variables"),
    [
        ("<< x * 100000000000 >>", {"x": "ab"}),  # would need 200 GB (MemoryError / OverflowError)
        ("<< 10 ** 10000000 >>", {}),  # a ten-million-digit integer
        ("<< 1 // 0 >>", {}),  # ZeroDivisionError
        ("<< x + 1 >>", {"x": "a"}),  # TypeError
        ("<< x.__class__ >>", {"x": "a"}),  # sandbox
        ("<% for a in x %><% for b in x %><< a >><% endfor %><% endfor %>", {"x": "y" * 2000}),
    ],
)
def test_any_template_runtime_error_is_a_one_line_prompt_template_error(
    text: str, variables: dict[str, str]
) -> None:
    """A template that blows up at render time is a ``PromptTemplateError`` (a
    ``UserError``) with one line, never an OverflowError/SecurityError/MemoryError traceback;
    the output is bounded, so a loop that explodes is refused rather than filling memory."""
    with pytest.raises(PromptTemplateError) as info:
        render(text, **variables)
    assert isinstance(info.value, UserError)
    assert "\n" not in str(info.value)


def test_section_lists_targets_plainly_only_for_bare_outputs() -> None:
    """The "renders empty" cases: bare ``<< stage_targets >>`` outputs only."""
    from fsm_stage.prompts import section_lists_targets_plainly

    assert section_lists_targets_plainly("one of << stage_targets >>.")
    branching = "<% if stage_targets %><< stage_targets >><% else %>x<% endif %>"
    assert not section_lists_targets_plainly(branching)
    assert not section_lists_targets_plainly("<< stage_targets or 'none' >>")
    assert not section_lists_targets_plainly("<< stage_current >>")
    assert not section_lists_targets_plainly("<% if %>")
