"""Stage-switch configuration through the loader, in the seed's plugin-list form (S1–S12).

fsm_stage reports *every* positioned problem of a file (docs/architecture.md) where the seed stops at
the first; and unknown keys inside a stage entry are errors (docs/architecture.md) where the seed
silently dropped them. The tests pin those documented differences next to the spec's rules.
"""

from __future__ import annotations

from typing import Any, cast

import attrs
import pytest

from fsm_stage.config import GraphConfig, load_config_text
from fsm_stage.errors import ConfigError, UserError

BASE = """\
- id: stage-switch
  config:
    stages:
      - name: alpha
        instruction: Instruction for the alpha stage.
      - name: beta
        instruction: Instruction for the beta stage.
      - name: gamma
        instruction: Instruction for the gamma stage.
    section: When this stage is done, call goto_stage to move on.
"""


def load(extra: str = "", text: str = BASE) -> GraphConfig:
    graph = load_config_text(text + extra).graph
    assert graph is not None
    return graph


def error(extra: str = "", text: str = BASE) -> str:
    with pytest.raises(ConfigError) as err:
        load_config_text(text + extra)
    assert isinstance(err.value, UserError)
    return str(err.value)


def test_valid_config_resolves_unchanged_S1() -> None:
    """S1: a complete valid config resolves to the same stages and section, no optional keys set."""
    g = load()
    assert [(s.name, s.instruction) for s in g.stages] == [
        ("alpha", "Instruction for the alpha stage."),
        ("beta", "Instruction for the beta stage."),
        ("gamma", "Instruction for the gamma stage."),
    ]
    assert g.section == "When this stage is done, call goto_stage to move on."
    assert g.initial is None and g.min_handoff_tokens is None
    assert g.initial_stage == "alpha" and g.handoff_dir == "handoff" and g.language == "en"


def test_optional_fields_are_echoed_S2() -> None:
    """S2: handoffDir, initial and minHandoffTokens are echoed."""
    g = load("    handoffDir: docs/handoffs\n    initial: beta\n    minHandoffTokens: 500\n")
    assert (g.handoff_dir, g.initial, g.min_handoff_tokens) == ("docs/handoffs", "beta", 500)


@pytest.mark.parametrize("stages", ["    stages: []\n", ""])
def test_missing_or_empty_stages_S3(stages: str) -> None:
    """S3: an empty or missing stages list is refused with the non-empty `stages` fragment."""
    text = BASE.split("    stages:\n")[0] + stages + "    section: Call goto_stage.\n"
    msg = error(text=text)
    assert "stages" in msg
    if stages:
        assert "non-empty `stages`" in msg


def test_duplicate_stage_S4() -> None:
    """S4: two entries named alpha are refused with `duplicate stage "alpha"`."""
    assert 'duplicate stage "alpha"' in error(text=BASE.replace("name: beta", "name: alpha"))


@pytest.mark.parametrize("name", ["Implement", "'stage 2'", "a/b", "''", '"explore\\n"'])
def test_unsafe_stage_names_S5_S12g(name: str) -> None:
    """S5, S12g: Implement, 'stage 2', a/b, '' and 'explore\\n' (trailing newline) must match the grammar."""
    assert "must match" in error(text=BASE.replace("name: beta", f"name: {name}"))


def test_blank_instruction_S6() -> None:
    """S6: a whitespace-only instruction is refused."""
    msg = error(text=BASE.replace("instruction: Instruction for the beta stage.", "instruction: '   '"))
    assert "non-empty string `instruction`" in msg


def test_blank_section_S7() -> None:
    """S7: an empty section is refused."""
    section = "section: When this stage is done, call goto_stage to move on."
    msg = error(text=BASE.replace(section, "section: ''"))
    assert "non-empty string `section`" in msg


def test_initial_outside_the_list_S8() -> None:
    """S8: initial 'ghost' must name a configured stage."""
    assert "must name a configured stage" in error("    initial: ghost\n")


def test_negative_threshold_S9() -> None:
    """S9: minHandoffTokens -1 is refused."""
    assert "non-negative finite number" in error("    minHandoffTokens: -1\n")


def test_languages_S10() -> None:
    """S10: zh and en are echoed, absent means en, fr is refused."""
    assert load("    language: zh\n").language == "zh"
    assert load("    language: en\n").language == "en"
    assert load().language == "en"
    assert 'must be "en" or "zh"' in error("    language: fr\n")


def test_unknown_key_S11() -> None:
    """S11: an extra top-level key `modes` is refused naming it."""
    assert "unknown key(s) modes" in error("    modes: [plan]\n")


@pytest.mark.parametrize("value", ["'  '", "3"])
def test_bad_handoff_dir_S12a(value: str) -> None:
    """S12a: handoffDir blank or not a string is refused."""
    assert "handoffDir" in error(f"    handoffDir: {value}\n")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "'12'"])
def test_bad_thresholds_S12b(value: str) -> None:
    """S12b: NaN, ±inf and strings are refused; 0 is accepted."""
    assert "non-negative finite number" in error(f"    minHandoffTokens: {value}\n")


def test_zero_threshold_is_accepted_S12b() -> None:
    """S12b: 0 is a valid threshold (every call full, meter still required: see S68b)."""
    assert load("    minHandoffTokens: 0\n").min_handoff_tokens == 0


def test_extra_stage_keys_are_refused_S12c() -> None:
    """S12c (documented difference): an extra key inside a stage entry is an error, not dropped."""
    msg = error(text=BASE.replace("instruction: Instruction for the alpha stage.",
                                  "instruction: Instruction for the alpha stage.\n        extra: 1"))
    assert "unknown key(s) extra" in msg


def test_problem_order_and_all_unknown_keys_S12d_S12e() -> None:
    """S12d/e: a bad stage is reported before an unknown key; two unknown keys are both named."""
    msg = error("    zzz: 1\n", text=BASE.replace("name: beta", "name: Bad"))
    assert msg.index("must match") < msg.index("unknown key(s) zzz")
    msg = error("    a: 1\n    b: 2\n")
    assert "unknown key(s) a" in msg and "unknown key(s) b" in msg


def test_resolved_config_is_detached_and_frozen_S12f() -> None:
    """S12f: the result shares nothing mutable: frozen attrs with tuples throughout."""
    g = load()
    assert isinstance(g.stages, tuple)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cast(Any, g.stages[0]).name = "x"


@pytest.mark.parametrize("key", ["initial", "minHandoffTokens", "handoffDir", "language"])
def test_null_optional_values_are_errors_appendix_b2(key: str) -> None:
    """B2: YAML null for an optional key is an error (as JS null), never a default."""
    assert "null" in error(f"    {key}: null\n")
