"""Tool policy at run time: the gate that decides each tool call from the graph's and plan
mode's rules (``config.policy`` parses them) and the ``ask`` verdict's review. Every name below
loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.policy._gate import (
        Decision,
        PolicyState,
        ToolPolicy,
        authorize,
        compile_policy,
        plan_policy,
        policy_state,
        policy_summary,
        stage_policy,
    )

#: exported name -> the module (under this package) that defines it; ``__all__`` is its keys
_EXPORTS: dict[str, str] = {
    "Decision": "_gate",
    "PolicyState": "_gate",
    "ToolPolicy": "_gate",
    "authorize": "_gate",
    "compile_policy": "_gate",
    "plan_policy": "_gate",
    "policy_state": "_gate",
    "policy_summary": "_gate",
    "stage_policy": "_gate",
}

__all__ = [
    "Decision",
    "PolicyState",
    "ToolPolicy",
    "authorize",
    "compile_policy",
    "plan_policy",
    "policy_state",
    "policy_summary",
    "stage_policy",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
