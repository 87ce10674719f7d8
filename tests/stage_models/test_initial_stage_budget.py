"""The initial stage's budget counts from the session's first step: its stage notice is logged
inside that step, and that step is the stage's spend too (``steps: N`` allows exactly N)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from two_stages import two_stages

from fsm_stage import Loop, MemoryLog, ModelReply, ScriptedModel, SessionHeader, open_session
from fsm_stage.config import load_config_text


@pytest.mark.parametrize(("budget", "allowed"), [("steps: 1", 1), ("steps: 2", 2), ("turns: 2", 2)])
def test_the_initial_stage_gets_exactly_its_budget(tmp_path: Path, budget: str, allowed: int) -> None:
    log = MemoryLog(SessionHeader("b", cwd=str(tmp_path)))
    host = open_session(load_config_text(two_stages(budget=budget)), log)
    loop = Loop(host.runtime, host.agent, ScriptedModel([ModelReply.say(str(i)) for i in range(6)]))
    reasons = [asyncio.run(loop.prompt(p))[0].reason for p in "abcd"]
    assert reasons == ["completed"] * allowed + ["blocked"] * (4 - allowed)
