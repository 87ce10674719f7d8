"""Plan-mode API misuse: a missing config names the missing plan_mode
(B5 still holds), set() with a non-bool, and /plan after close() (docs/contracts.md)."""

from __future__ import annotations

from typing import Any

import pytest
from plan_helpers import run

from fsm_stage.errors import ConfigError
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session


def test_none_config_says_the_graph_has_no_plan_mode_B5() -> None:
    """B5 (fails like a blank section) and the message says why: no plan-mode config was
    given, which is what `load_config(...).plan_mode` is for a graph without `plan_mode`."""
    with pytest.raises(ConfigError, match="must not be empty") as info:
        PlanModeController(None)
    assert "no plan_mode" in str(info.value)
    assert isinstance(info.value, ConfigError)
    with pytest.raises(ConfigError) as blank:
        PlanModeController({"section": "  "})
    assert "no plan_mode" not in str(blank.value)


@pytest.mark.parametrize("bad", [None, 1, "yes", 0])
def test_set_refuses_a_non_bool(bad: Any) -> None:
    """set() takes a bool only (TypeError, nothing written)."""
    controller = PlanModeController({"section": "Plan."})
    Runtime().attach(controller)
    agent = InboxAgent(Session(MemoryLog(SessionHeader("p"))))
    with pytest.raises(TypeError, match="bool"):
        controller.set(agent, bad)
    assert len(agent.session) == 0


def test_plan_command_is_gone_after_close_B_1_13() -> None:
    """docs/contracts.md: disposal removes the command, so `/plan` is no longer a command (None,
    nothing logged) — the same answer as a runtime that never had plan mode."""
    runtime = Runtime()
    controller = PlanModeController({"section": "Plan."})
    runtime.attach(controller)
    agent = InboxAgent(Session(MemoryLog(SessionHeader("p"))))
    controller.close()
    assert run(runtime.run_command(agent, "/plan")) is None
    assert len(agent.session) == 0
