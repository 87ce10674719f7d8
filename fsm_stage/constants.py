"""Protocol constants kept verbatim from the DeepSeek Harness seeds (docs/architecture.md).

These strings are part of the wire/log format: changing any of them breaks interoperability
with DSH session logs and with the seeds' tests. All other user-visible wording lives in the
template catalogs under ``templates/``.
"""

from __future__ import annotations

import re
from typing import Final

# --- session log event types (docs/session-log.md) ---------------------------------------
SESSION_HEADER_TYPE: Final = "session"
SESSION_FORMAT_VERSION: Final = 0
USER_MESSAGE: Final = "user/message"
ASSISTANT_MESSAGE: Final = "assistant/message"
ASSISTANT_CHUNK: Final = "assistant/chunk"
TOOL_CALL: Final = "tool/call"
TOOL_RESULT: Final = "tool/result"
TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
REQUEST_HEADER: Final = "request/header"
COMMAND_RUN: Final = "command/run"
COMMAND_DONE: Final = "command/done"
SYSTEM_MESSAGE: Final = "system/message"
SESSION_END_SEED: Final = "session/end-seed"
SURFACE_EVENT_TYPES: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
KNOWN_EVENT_TYPES: Final = frozenset(
    [
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    ]
)
"""DSH HEAD's known event vocabulary (48 names, docs/session-log.md)."""

# --- plan mode (docs/contracts.md) -------------------------------------------------------
PLAN_MODE_EVENT: Final = "plan/mode"
PLAN_POLICY_SECTION: Final = "plan:policy"
PLAN_POLICY_ORDER: Final = 50
EXIT_PLAN_MODE: Final = "exit_plan_mode"
PLAN_REVIEW_ID: Final = "plan-review"
PLAN_COMMAND: Final = "plan"
PLAN_SOURCE_PLUGIN: Final = "plan-mode"
PLAN_PROJECTION_STATE_VERSION: Final = 2

# --- stage switch (docs/contracts.md) ----------------------------------------
STAGE_SOURCE_KIND: Final = "stage-switch"
STAGE_SOURCE_KINDS: Final = frozenset({"stage-switch", "plugin:stage-switch"})
NOTICE_FORM: Final = "notice"
CURRENT_STAGE_PREFIX: Final = "Current stage: "
STAGE_SWITCHED_PREFIX: Final = "Stage switched to "
STAGE_SUMMARY_RE: Final = re.compile(r"^(?:Current stage: |Stage switched to )([a-z][a-z0-9_-]*)$")
STAGE_NAME_RE: Final = re.compile(r"[a-z][a-z0-9_-]*")
GOTO_STAGE: Final = "goto_stage"
STAGE_REVIEW_ID: Final = "stage-review"
STAGE_COMMAND: Final = "stage"
STAGE_POLICY_CONTEXT: Final = "stage:policy"
STAGE_POLICY_ORDER: Final = 116

# --- review ------------------------------------------------------------------------------
APPROVE_LABEL: Final = "Approve"
KEEP_PLANNING_LABEL: Final = "Keep planning"

# --- template variables (config templates) ---------------------------------------------------
TEMPLATE_VARIABLES: Final = frozenset({"stage_current", "stage_targets"})

# --- fsm_stage-owned event types (always written with "ignorable": true) --------------------
FSM_EVENT_PREFIX: Final = "fsm/"
REVIEW_REQUEST: Final = "fsm/review/request"
REVIEW_ANSWER: Final = "fsm/review/answer"
REVIEW_EXPIRED_BY: Final = "deadline"
"""The ``by`` of the answer that closes a review at its deadline (nobody decided)."""
REVIEW_REDEEMED: Final = "fsm/review/redeemed"
GRAPH_EVENT: Final = "fsm/graph"
BUDGET_EVENT: Final = "fsm/budget"
"""``{scope: "stage"|"plan", stage, action: "stop"|"fresh"|"told", limits, spent, language}``: a
budget stop, a fresh budget for the current visit, and the notice that told the model."""
#: Review kind of a budget review (``on_budget: review``), and the prefix of its move options.
BUDGET_KIND: Final = "budget"
MOVE_PREFIX: Final = "Move to "
REVIEW_OUTCOMES: Final = ("approve", "keep", "dismiss")
APPROVE_FRESH_LABEL: Final = "Approve and start fresh"
APPROVE_KEEP_CONVERSATION_LABEL: Final = "Approve and keep the conversation"

# --- per-stage models (stage graphs' ``model`` keys) ------------------------------------------
QUALIFIED_MODEL_RE: Final = re.compile(r"[A-Za-z0-9_.-]+:[!-9;-~][!-~]*")
"""A provider-qualified model name ``provider:model`` (``openai:gpt-5``), printable ASCII without
spaces (no control, escape or bidi character can reach a terminal or a request through it);
anything else in a stage's ``model`` is an alias of the graph's ``models`` mapping."""

#: Longest review deadline (seconds): 366 days. The config refuses a longer one; a logged one
#: above it (a forged or damaged log) is unreadable and expires at once.
MAX_DEADLINE_SECONDS: Final = 366 * 86400
#: A reviewer (or group) name of review rules and reviewers files; names equal up to case are
#: one person.
REVIEWER_NAME_PATTERN: Final = r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}"
