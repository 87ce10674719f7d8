"""Stage-switch API misuse: set() input checks, clear errors for a missing graph, a warning
for a threshold without a token meter, the guard-refusal grammar and /stage after close()."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from fsm_stage.config import EdgeConfig
from fsm_stage.log.projections import fold_stage
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.stage_switch import StageController

from .harness import Harness, Targets, make_config, run


@pytest.mark.parametrize("bad", [None, 5, b"beta", ["beta"]])
def test_set_refuses_a_non_str_stage_with_type_error_S88(bad: Any) -> None:
    """S88 (set does not validate the stage against the graph) still needs a str: anything else
    raises TypeError and writes nothing."""
    h = Harness()
    before = len(h.session)
    with pytest.raises(TypeError, match="stage name must be a str"):
        h.controller.set(h.agent, bad)
    assert len(h.session) == before


@pytest.mark.parametrize("bad", ["", "Fix", "fix\n", "a b", " beta", "9lives", "é"])
def test_set_refuses_a_name_outside_the_grammar_S88(bad: str) -> None:
    """A name that STAGE_NAME_RE does not fully match can never be a stage record (the fold
    would ignore it): ValueError naming the grammar, nothing written, fold unchanged."""
    h = Harness()
    before, stage = len(h.session), fold_stage(h.session.events)
    with pytest.raises(ValueError, match=r"not a valid stage name: .*\[a-z\]\[a-z0-9_-\]\*"):
        h.controller.set(h.agent, bad)
    assert len(h.session) == before and fold_stage(h.session.events) == stage


def test_set_still_accepts_an_unconfigured_name_in_the_grammar_S89() -> None:
    """S89 (kept as specified): a grammatical name outside the graph is committed and folds."""
    h = Harness()
    assert h.controller.set(h.agent, "nowhere") == "committed"
    assert fold_stage(h.session.events) == "nowhere"


def test_stage_controller_without_a_graph_is_a_clear_type_error() -> None:
    """StageController(None) names what it needs instead of an AttributeError."""
    with pytest.raises(TypeError, match="StageController needs a stage graph"):
        StageController(cast(Any, None))


def test_attach_warns_when_a_threshold_has_no_token_meter(caplog: pytest.LogCaptureFixture) -> None:
    """Construction never fails, but attach logs one warning naming min_handoff_tokens
    (every full goto_stage would otherwise fail later); no warning with a meter or no threshold."""
    with caplog.at_level(logging.WARNING, logger="fsm_stage.stage_switch"):
        Runtime().attach(StageController(make_config(min_handoff_tokens=100), handoffs=None))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "min_handoff_tokens" in warnings[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fsm_stage.stage_switch"):
        Runtime().attach(StageController(make_config(), handoffs=None))
        Harness(make_config(min_handoff_tokens=100))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_guard_refusal_agrees_in_number() -> None:
    """Two closed guards "do not hold", one "does not hold"."""
    edges: Targets = {"alpha": [EdgeConfig("beta", guards=("tests_written", "lint_clean"))],
             "beta": [EdgeConfig("gamma", guards=("tests_green",))], "gamma": ["alpha"]}
    h = Harness(make_config(targets=edges))
    two = h.goto("beta", "# H")
    assert "tests_written, lint_clean do not hold." in two.text
    h.controller.set(h.agent, "beta")
    one = h.goto("gamma", "# H")
    assert "tests_green does not hold." in one.text


def test_stage_command_after_close_is_an_error_reply() -> None:
    """After close() the /stage command is unregistered (docs/contracts.md lifecycle): the runtime
    reports it as not a command (None) and writes nothing, like a runtime that never had it."""
    h = Harness()
    h.controller.close()
    before = len(h.session)
    assert run(h.runtime.run_command(h.agent, "/stage beta")) is None
    assert len(h.session) == before
