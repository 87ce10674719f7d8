"""Wrong argument types are refused where they are passed, with a clear ``TypeError``, not
later (in a tool result the model reads, or a self-contradicting message)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm_stage.config import load_config, load_config_text
from fsm_stage.driver import ModelReply
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session
from fsm_stage.runtime.tools import ToolCall
from fsm_stage.stage_switch import StageController

GRAPH = Path(__file__).resolve().parents[2] / "stage_graphs" / "feature-work.yaml"


class _SyncAsk:
    def ask(self, questions: Any, agent: Any, *, signal: Any = None) -> list[Any]:
        return []


def _agent() -> InboxAgent:
    return InboxAgent(Session(MemoryLog(SessionHeader("s"))))


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: Runtime(review=5), r"Runtime\(review=\) must be a ReviewChannel .* got int"),
        (lambda: Runtime(review=_SyncAsk()), r"_SyncAsk.ask must be async"),
        (lambda: PlanModeController(review="x"), r"PlanModeController\(review=\) must be a ReviewChannel"),
        (lambda: _agent().steer("hello"),
         r"steer\(message\): message must be a message dict .*user_message.* got str"),
        (lambda: _agent().inject(None), r"inject\(message\): message must be a message dict, got NoneType"),
        (lambda: ModelReply.call(5, "x"), r"name must be the tool's name as a non-empty str, got int"),  # type: ignore[arg-type]
        (lambda: ToolCall.of("x", "notadict"), r"args must be a dict of arguments \(or None\), got str"),  # type: ignore[arg-type]
        (lambda: ToolCall.of(None), r"name must be the tool's name as a non-empty str, got NoneType"),  # type: ignore[arg-type]
        (lambda: ToolCall.of(""), r"non-empty str, got ''"),
        (lambda: ToolCall.of("x", id=3), r"id must be a str or None, got int"),  # type: ignore[arg-type]
        (lambda: load_config_text(b"name: g"), r"expected the YAML text as str, got bytes"),  # type: ignore[arg-type]
        (lambda: load_config_text({}), r"expected the YAML text as str, got dict"),  # type: ignore[arg-type]
        (lambda: StageController(load_config(GRAPH).graph, handoffs="x"),  # type: ignore[arg-type]
         r"StageController\(handoffs=\) must be a HandoffStore .* got str"),
        (lambda: StageController(load_config(GRAPH).graph, review=object()),  # type: ignore[arg-type]
         r"StageController\(review=\) must be a ReviewChannel"),
    ],
)
def test_wrong_argument_types_are_refused_at_once(call: Callable[[], Any], words: str) -> None:
    with pytest.raises(TypeError, match=words):
        call()


def test_pre_step_names_the_wrong_element_not_only_the_list() -> None:
    agent = _agent()
    with pytest.raises(TypeError, match="got a list holding a str"):
        Runtime().pre_step(agent, ["hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="messages must be a list of message dicts, got str"):
        Runtime().pre_step(agent, "hello")  # type: ignore[arg-type]
