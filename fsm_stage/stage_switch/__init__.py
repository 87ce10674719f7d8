"""The stage switch: a session moves through the stages of a compiled stage graph.

Port of DeepSeek Harness's ``dsh-stage-switch`` (stage-switch spec S1…S116). Build a
``StageController(load_config(path).graph, handoffs=LocalHandoffStore())`` and
``attach(runtime)``: it contributes the ``stage:policy`` context entry, the ``goto_stage`` tool,
``/stage``, a pre-step participant and the ``stage`` service; ``close()`` removes them all.

Modules: ``controller`` (``StageController``: state, user jumps, boundary flush), ``goto`` (the
``goto_stage`` validation chain), ``tool`` (its schema, argument check and cards), ``command``
(``/stage``), ``eligibility`` (predicates and named guards), ``state`` (values and the closed-read
error), ``texts`` (fixed texts, stage body); the review question and consent rule live in
``fsm_stage.reviews``. The rules where fsm_stage differs from the seed are
tabled in ``docs/stage-switch-decisions.md``.
"""

from fsm_stage.prompts import section_lists_targets_plainly
from fsm_stage.reviews._stage import Consent, Decline, build_review_question, evaluate_review
from fsm_stage.stage_switch.command import StageCommand, handle_stage_command
from fsm_stage.stage_switch.controller import StageController
from fsm_stage.stage_switch.eligibility import Eligibility, Predicate
from fsm_stage.stage_switch.goto import requires_handoff, run_goto_stage
from fsm_stage.stage_switch.state import (
    PendingTransition,
    ProjectionUnavailableError,
    SetOutcome,
    StageStatus,
)
from fsm_stage.stage_switch.texts import (
    CATALOG_NAME,
    COMMAND_HINT,
    FLUSH_FAILURE_MESSAGE,
    NO_AGENT_MESSAGE,
    PREDICATE_TYPE_MESSAGE,
    PROJECTION_UNAVAILABLE_MESSAGE,
    RELOADED_MESSAGE,
    check_stage_name,
    should_narrate,
    stage_body,
)
from fsm_stage.stage_switch.tool import (
    GOTO_STAGE_PARAMETERS,
    GotoStageTool,
    goto_stage_argument_problem,
    goto_stage_tool_spec,
    presentation_meta,
)

__all__ = [
    "CATALOG_NAME",
    "COMMAND_HINT",
    "FLUSH_FAILURE_MESSAGE",
    "GOTO_STAGE_PARAMETERS",
    "NO_AGENT_MESSAGE",
    "PREDICATE_TYPE_MESSAGE",
    "PROJECTION_UNAVAILABLE_MESSAGE",
    "RELOADED_MESSAGE",
    "Consent",
    "Decline",
    "Eligibility",
    "GotoStageTool",
    "PendingTransition",
    "Predicate",
    "ProjectionUnavailableError",
    "SetOutcome",
    "StageCommand",
    "StageController",
    "StageStatus",
    "build_review_question",
    "check_stage_name",
    "evaluate_review",
    "goto_stage_argument_problem",
    "goto_stage_tool_spec",
    "handle_stage_command",
    "presentation_meta",
    "requires_handoff",
    "run_goto_stage",
    "section_lists_targets_plainly",
    "should_narrate",
    "stage_body",
]
