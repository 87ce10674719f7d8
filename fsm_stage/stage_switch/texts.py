"""Fixed texts of the stage switch and the stage-prompt body.

``CATALOG_NAME`` names the wording catalog (``templates/<lang>/stage_switch.yaml``); the
``*_MESSAGE`` constants are the fixed, non-catalog texts the spec pins; ``stage_body`` is the
``Current stage: X`` body of a stage record and ``should_narrate`` the user-jump narration rule;
``check_stage_name`` validates a stage name against ``constants.STAGE_NAME_RE``.
"""

from __future__ import annotations

from typing import Final

from fsm_stage.config import GraphConfig
from fsm_stage.constants import CURRENT_STAGE_PREFIX, STAGE_NAME_RE
from fsm_stage.errors import PROJECTION_UNAVAILABLE_MESSAGE as PROJECTION_UNAVAILABLE_MESSAGE
from fsm_stage.policy._gate import policy_summary

__all__ = [
    "CATALOG_NAME",
    "COMMAND_HINT",
    "FLUSH_FAILURE_MESSAGE",
    "NO_AGENT_MESSAGE",
    "PREDICATE_TYPE_MESSAGE",
    "PROJECTION_UNAVAILABLE_MESSAGE",
    "RELOADED_MESSAGE",
    "check_stage_name",
    "should_narrate",
    "stage_body",
]

CATALOG_NAME: Final = "stage_switch"
"""Name of the wording catalog (``templates/<lang>/stage_switch.yaml``)."""

NO_AGENT_MESSAGE: Final = "goto_stage needs a calling agent: there is no session to switch."
"""Fixed failure of an agent-less ``goto_stage`` call (S43)."""

RELOADED_MESSAGE: Final = (
    "The stage-switch service was reloaded while the transition was under review; "
    "present the transition once more."
)
"""Fixed failure when the controller closed while a review was open (S60)."""

PREDICATE_TYPE_MESSAGE: Final = "eligibility predicate must be a function (a callable taking the agent)"
"""Message of the ``TypeError`` for a non-callable predicate (S37e)."""

FLUSH_FAILURE_MESSAGE: Final = "stage switch: applying the pending transition to {stage} failed: {error}"
"""Error-level log line of a failed boundary flush (S80)."""

COMMAND_HINT: Final = "[stage|message]"
"""Input hint of ``/stage`` (spec §3.1 item 10)."""

def check_stage_name(stage: object) -> str:
    """Return ``stage`` when it is a ``str`` fully matching ``constants.STAGE_NAME_RE``
    (``[a-z][a-z0-9_-]*``); raises ``TypeError`` for a non-str and ``ValueError`` (one line
    naming the grammar) otherwise. Whether the stage is configured is not checked (S89)."""
    if not isinstance(stage, str):
        raise TypeError(f"a stage name must be a str, got {type(stage).__name__} {stage!r}")
    if STAGE_NAME_RE.fullmatch(stage) is None:
        raise ValueError(f"{stage!r} is not a valid stage name: stage names match "
                         f"{STAGE_NAME_RE.pattern} (lowercase letter first)")
    return stage


def stage_body(config: GraphConfig, stage: str) -> str:
    """``Current stage: <stage>`` plus ``\\n<instruction>`` when ``stage`` is configured (§1.3, S89),
    plus ``\\nTools in this stage: …`` when it has a tool policy (``fsm_stage.policy``)."""
    body = f"{CURRENT_STAGE_PREFIX}{stage}"
    configured = config.stage(stage)
    tools = policy_summary(config, stage)  # the stage's tool policy, in the notice
    body = f"{body}\n{configured.instruction}" if configured is not None else body
    return body if tools is None else f"{body}\n{tools}"


def should_narrate(stage_at_last_header: str | None, initial: str, target: str) -> bool:
    """Whether a user jump to ``target`` is narrated (§1.6, S92).

    The model was last told ``stage_at_last_header`` (``initial`` when no header was logged or
    the header came before any record); narrate only when that differs from ``target``.
    """
    told = stage_at_last_header if stage_at_last_header is not None else initial
    return told != target
