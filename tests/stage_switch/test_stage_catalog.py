"""Stage-switch wording catalogs, the zh review overlay and the file-level overlay (S98–S116).

fsm_stage keeps ONE source of wording per language (``templates/<lang>/stage_switch.yaml``,
package data) instead of a JSON file plus an embedded copy; templates use ``<< name >>`` and
undefined variables are errors (DESIGN.md §4.6). The tests pin those choices where the seed had
a fallback copy or left unknown ``{name}`` placeholders in place.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from language_overlay import apply_language_overlay
from ruamel.yaml import YAML

from fsm_stage.prompts import CatalogError, PromptTemplateError, deep_merge, load_catalog
from fsm_stage.resources import data_dir
from fsm_stage.stage_switch import CATALOG_NAME

REVIEW_KEYS = [
    "approve_label", "full_approve_description", "full_question", "header", "keep_stage_description",
    "keep_stage_label", "light_approve_description", "light_question",
]
GROUPS = ["goto_tool", "review", "tool_result", "present", "notice", "errors", "command"]


def raw(language: str, root: Path | None = None) -> dict[str, Any]:
    base = root if root is not None else data_dir("templates")
    loaded: dict[str, Any] = YAML(typ="safe", pure=True).load(
        (base / language / f"{CATALOG_NAME}.yaml").read_text("utf-8"))
    return loaded


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the shipped en + zh stage-switch catalogs."""
    for lang in ("en", "zh"):
        (tmp_path / lang).mkdir()
        shutil.copy(data_dir("templates") / lang / f"{CATALOG_NAME}.yaml", tmp_path / lang)
    return tmp_path


def test_loaded_catalog_is_the_shipped_file_S98() -> None:
    """S98 (single source): the loaded English catalog is exactly the shipped file, all groups present."""
    cat = load_catalog(CATALOG_NAME)
    assert cat.as_dict() == raw("en")
    assert list(raw("en")) == GROUPS
    for key in cat.keys():  # noqa: SIM118 - Catalog.keys() is not a dict view
        assert cat.raw(key).strip(), key
    assert cat.raw("tool_result.handoff_path").startswith(" ")
    assert cat.raw("notice.user_switch_prefix").endswith(" ")


def test_zh_overlay_is_review_only_S99() -> None:
    """S99."""
    assert list(raw("zh")) == ["review"]


def test_zh_has_the_english_review_keys_S100() -> None:
    """S100."""
    assert sorted(raw("zh")["review"]) == REVIEW_KEYS == sorted(raw("en")["review"])


def test_zh_questions_keep_the_stage_placeholder_S101() -> None:
    """S101: both questions use << stage >> (and render the stage)."""
    zh = load_catalog(CATALOG_NAME, "zh")
    for key in ("review.full_question", "review.light_question"):
        assert zh.variables(key) == {"stage"}
        assert "placeholder-stage" in zh.text(key, stage="placeholder-stage")


def test_zh_values_are_non_empty_strings_S102() -> None:
    """S102."""
    assert all(isinstance(v, str) and v.strip() for v in raw("zh")["review"].values())


def test_merge_keeps_everything_but_review_english_S103() -> None:
    """S103: deep_merge(en, zh) and load_catalog(zh): review is zh, every other group is en."""
    en, zh = raw("en"), raw("zh")
    merged = deep_merge(en, zh)
    assert merged["review"] == zh["review"]
    for group in GROUPS:
        if group != "review":
            assert merged[group] == en[group]
    assert load_catalog(CATALOG_NAME, "zh").as_dict() == merged


def test_merge_does_not_mutate_and_is_idempotent_S104_S105_S106_S107() -> None:
    """S104: inputs untouched; S105: idempotent; S106: empty overlay; S107: primitive overlays win."""
    en, zh = raw("en"), raw("zh")
    before = copy.deepcopy(en)
    once = deep_merge(en, zh)
    assert en == before
    assert deep_merge(once, zh) == once
    assert deep_merge(en, {}) == en
    assert deep_merge(en, "x") == "x" and deep_merge(en, 42) == 42 and deep_merge(en, None) is None


def test_file_level_overlay_writes_the_merge_S108(tree: Path) -> None:
    """S108: the rewritten English file has the zh review and unchanged other groups."""
    apply_language_overlay(tree)
    after = raw("en", tree)
    assert after["review"] == raw("zh")["review"]
    assert after["goto_tool"] == raw("en")["goto_tool"] and after["errors"] == raw("en")["errors"]


def test_file_level_overlay_is_idempotent_S109(tree: Path) -> None:
    """S109."""
    apply_language_overlay(tree)
    first = (tree / "en" / f"{CATALOG_NAME}.yaml").read_text("utf-8")
    apply_language_overlay(tree)
    assert (tree / "en" / f"{CATALOG_NAME}.yaml").read_text("utf-8") == first
    assert raw("en", tree)["review"] == raw("zh")["review"]


def test_file_level_overlay_returns_the_merge_S110(tree: Path) -> None:
    """S110."""
    merged = apply_language_overlay(tree)
    assert merged is not None and merged["review"] == raw("zh")["review"]


def test_missing_overlay_writes_nothing_S111(tree: Path) -> None:
    """S111: without the zh file → None and the en file unchanged."""
    (tree / "zh" / f"{CATALOG_NAME}.yaml").unlink()
    before = (tree / "en" / f"{CATALOG_NAME}.yaml").read_bytes()
    assert apply_language_overlay(tree) is None
    assert (tree / "en" / f"{CATALOG_NAME}.yaml").read_bytes() == before


def test_missing_english_file_S112(tree: Path) -> None:
    """S112: without the en file → None."""
    (tree / "en" / f"{CATALOG_NAME}.yaml").unlink()
    assert apply_language_overlay(tree) is None


def test_overlay_breaks_hard_links_S113(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """S113: an installed copy hard-linked to the source tree: the source stays byte-identical; the
    install gets the zh review (temp file + rename → new inode)."""
    install = tmp_path_factory.mktemp("install")
    (install / "en").mkdir()
    (install / "zh").mkdir()
    src = tree / "en" / f"{CATALOG_NAME}.yaml"
    os.link(src, install / "en" / f"{CATALOG_NAME}.yaml")
    shutil.copy(tree / "zh" / f"{CATALOG_NAME}.yaml", install / "zh")
    before = src.read_bytes()
    inode = (install / "en" / f"{CATALOG_NAME}.yaml").stat().st_ino
    apply_language_overlay(install)
    assert src.read_bytes() == before
    assert (install / "en" / f"{CATALOG_NAME}.yaml").stat().st_ino != inode
    assert raw("en", install)["review"]["header"] == raw("zh")["review"]["header"]
    assert raw("en", install)["goto_tool"] == raw("en")["goto_tool"]


def test_loader_over_an_overlaid_tree_S114(tree: Path) -> None:
    """S114: loading from the overlaid tree gives zh review, English elsewhere, zh question renders."""
    apply_language_overlay(tree)
    cat = load_catalog(CATALOG_NAME, "en", base_dir=tree)
    zh = raw("zh")["review"]
    assert cat.raw("review.header") == zh["header"]
    assert cat.raw("review.approve_label") == zh["approve_label"]
    assert cat.raw("review.keep_stage_label") == zh["keep_stage_label"]
    en = load_catalog(CATALOG_NAME)
    for key in ("goto_tool.description", "errors.not_configured", "notice.handoff_replaced",
                "command.description", "present.call_title"):
        assert cat.raw(key) == en.raw(key)
    assert cat.text("review.full_question", stage="placeholder-stage") == load_catalog(
        CATALOG_NAME, "zh").text("review.full_question", stage="placeholder-stage")


def test_shipped_catalog_untouched_by_an_overlay_elsewhere_S115(tree: Path) -> None:
    """S115: overlaying a copy leaves the shipped English catalog English."""
    apply_language_overlay(tree)
    en = load_catalog(CATALOG_NAME)
    assert en.raw("review.header") == raw("en")["review"]["header"]
    assert en.raw("review.approve_label") == "Approve"


def test_rendering_rules_S116(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """S116a–g (fsm_stage's rules): (a) a missing variable is an error, not left in place; (b) values
    are not re-scanned; (c) backslashes and $1 are literal; (d) a missing English file is a clear
    error; (e) an override file holding one key changes just that key; (f) zh without its file is
    English; (g) en is the loaded file unchanged."""
    en = load_catalog(CATALOG_NAME)
    with pytest.raises(PromptTemplateError, match="stage"):
        en.text("errors.already_current")  # (a)
    literal = en.raw("errors.already_current").replace("<< stage >>", "<< stages >>")
    assert en.text("errors.already_current", stage="<< stages >>") == literal  # (b)
    assert "a\\b $1" in en.text("errors.already_current", stage="a\\b $1")  # (c)
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(CatalogError, match="no English file"):
        load_catalog(CATALOG_NAME, base_dir=empty)  # (d)
    override = tmp_path_factory.mktemp("override")
    (override / "en").mkdir()
    (override / "en" / f"{CATALOG_NAME}.yaml").write_text("review:\n  header: H\n", "utf-8")
    over = load_catalog(CATALOG_NAME, override_dir=override)
    expected = raw("en")
    expected["review"]["header"] = "H"
    assert over.as_dict() == expected  # (e)
    (tree / "zh" / f"{CATALOG_NAME}.yaml").unlink()
    assert load_catalog(CATALOG_NAME, "zh", base_dir=tree).as_dict() == raw("en")  # (f)
    assert en.as_dict() == raw("en")  # (g)


def test_overlay_keeps_the_english_file_layout_S108(tree: Path) -> None:
    """S108: only the overlaid review values change; order, comments and other lines are kept."""
    before = (tree / "en" / f"{CATALOG_NAME}.yaml").read_text("utf-8").splitlines()
    apply_language_overlay(tree)
    after = (tree / "en" / f"{CATALOG_NAME}.yaml").read_text("utf-8").splitlines()
    assert before[0] == after[0] and before[0].startswith("#")  # comments kept
    head = before.index("review:")
    assert after[: head + 1] == before[: head + 1]  # everything up to the review group is unchanged
    tail_before = before[before.index("tool_result:"):]
    tail_after = after[after.index("tool_result:"):]
    assert tail_after == tail_before  # ... and everything after it
    assert after != before
    assert list(raw("en", tree)) == GROUPS
