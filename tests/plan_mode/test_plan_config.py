"""Configuration (docs/contracts.md)."""

from __future__ import annotations

import pytest
from plan_helpers import CAT

from fsm_stage.config import PlanModeConfig
from fsm_stage.errors import ConfigError, UserError
from fsm_stage.plan_mode import PlanModeController, resolve_config


@pytest.mark.parametrize("raw", [{}, {"section": 5}, {"section": None}, {"section": ["x"]}])
def test_section_must_be_a_string_B1(raw: dict[str, object]) -> None:
    """B1: a missing or non-string section fails with CFG_NOT_STRING (a one-line UserError)."""
    with pytest.raises(ConfigError) as err:
        resolve_config(raw)
    assert str(err.value) == CAT.text("config.not_string")
    assert isinstance(err.value, ConfigError) and isinstance(err.value, UserError)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("section", ["", "   ", "\n\t "])
def test_section_must_not_be_blank_B2(section: str) -> None:
    """B2: a blank section fails with CFG_BLANK."""
    with pytest.raises(ConfigError, match="must not be empty"):
        resolve_config({"section": section})


def test_unknown_keys_listed_in_order_and_checked_last_B3() -> None:
    """B3: unknown keys are listed in insertion order, comma-space joined; type and blank
    checks come first."""
    with pytest.raises(ConfigError) as err:
        resolve_config({"tools": [], "section": "x", "modes": 1})
    assert str(err.value) == CAT.text("config.unknown_keys", keys="tools, modes")
    with pytest.raises(ConfigError) as err2:
        resolve_config({"tools": [], "section": 5})
    assert str(err2.value) == CAT.text("config.not_string")
    with pytest.raises(ConfigError, match="must not be empty"):
        resolve_config({"tools": [], "section": "  "})


def test_valid_config_is_a_new_untrimmed_object_B4() -> None:
    """B4: a valid config resolves to a new object; section kept exactly (untrimmed)."""
    raw = {"section": "  Plan first.\n"}
    cfg = resolve_config(raw)
    assert isinstance(cfg, PlanModeConfig) and cfg.section == "  Plan first.\n"
    raw["section"] = "changed"
    assert cfg.section == "  Plan first.\n"
    given = PlanModeConfig(section="P")
    again = resolve_config(given)
    assert again == given and again is not given


def test_missing_config_fails_like_blank_B5() -> None:
    """B5: a controller without config fails at construction like an empty section; no other
    knobs (mode names, tool filters, sandbox, approval policy) are accepted."""
    with pytest.raises(ConfigError, match="must not be empty"):
        PlanModeController()
    with pytest.raises(ConfigError, match="unknown key"):
        PlanModeController({"section": "x", "approval_policy": "never"})


def test_controller_from_the_shipped_yaml_files() -> None:
    """The plan_mode of a loaded YAML file (native and the seed's plugin-list form) builds a
    controller whose section is the configured text, verbatim."""
    from plan_helpers import REPO

    from fsm_stage.config import load_config

    for name in ("seed-plan-mode.yaml", "feature-work.yaml"):
        cfg = load_config(REPO / "stage_graphs" / name).plan_mode
        assert cfg is not None
        assert PlanModeController(cfg).config.section == cfg.section
