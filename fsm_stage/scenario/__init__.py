"""Scenario files: a scripted session that ``fsm-stage simulate`` runs through the reference loop.

``model`` holds the attrs file model (``Scenario`` and its step kinds), ``load`` the positioned
loader (``load_scenario``, ``load_scenario_text``; raises ``ConfigError``), ``dump`` the YAML
writer (``dump_scenario``), ``replay`` the scenario recovered from a recorded session log
(``replay_events``, ``steps_from_events``) and ``wording`` its recogniser of recorded texts. The
file format is documented in the README ("Simulate"); import every public name from here.
"""

from __future__ import annotations

from fsm_stage.scenario.dump import dump_scenario, step_to_plain
from fsm_stage.scenario.load import load_scenario, load_scenario_text
from fsm_stage.scenario.model import (
    REVIEWED_TOOLS,
    UNSET,
    AnswerOutcome,
    AnswerReview,
    Command,
    EligibilityFlip,
    EndTurn,
    Expect,
    ModelStep,
    NextRequest,
    PrefixExpect,
    Resume,
    Review,
    ReviewKind,
    Scenario,
    SessionSettings,
    Step,
    SystemText,
    ToolCall,
    UserPrompt,
)
from fsm_stage.scenario.replay import (
    GUIDANCE_PREDICATE,
    WAKE_PLACEHOLDER,
    Replay,
    replay_events,
    steps_from_events,
)
from fsm_stage.scenario.wording import PLAN_CATALOG

__all__ = [
    "GUIDANCE_PREDICATE",
    "PLAN_CATALOG",
    "REVIEWED_TOOLS",
    "UNSET",
    "WAKE_PLACEHOLDER",
    "AnswerOutcome",
    "AnswerReview",
    "Command",
    "EligibilityFlip",
    "EndTurn",
    "Expect",
    "ModelStep",
    "NextRequest",
    "PrefixExpect",
    "Replay",
    "Resume",
    "Review",
    "ReviewKind",
    "Scenario",
    "SessionSettings",
    "Step",
    "SystemText",
    "ToolCall",
    "UserPrompt",
    "dump_scenario",
    "load_scenario",
    "load_scenario_text",
    "replay_events",
    "step_to_plain",
    "steps_from_events",
]
