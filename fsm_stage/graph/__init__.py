"""Compile stage graphs into shared, read-only ``transitions`` machines (docs/architecture.md).

One ``transitions.Machine`` per graph, cached by fingerprint, shared by every session; a
session's stage lives on a ``StageCursor``. Stage graphs get a ``goto:<target>`` trigger per
model edge, with conditions ``eligible`` and ``approved`` and a ``commit`` ``before``
callback; plan mode (``compile_plan_mode``) has ``enter_plan``, ``leave_plan``, ``exit_plan``.

Modules: ``vocabulary`` (trigger names, ``StageCursor``, ``Refusal``, ``UnknownStageError``),
``conditions`` (``eligible``/``approved``/``commit``), ``canonical`` (``fingerprint``),
``machine`` (populating the machine, lazily built edges), ``compiled`` (``CompiledGraph``),
``build`` (``compile_graph``, ``compile_plan_mode``, ``clear_cache``).
"""

from __future__ import annotations

from fsm_stage.graph.build import clear_cache, compile_graph, compile_plan_mode
from fsm_stage.graph.canonical import fingerprint
from fsm_stage.graph.compiled import CompiledGraph

# private helpers the tests exercise directly (explicit re-exports, not in __all__)
from fsm_stage.graph.conditions import _approved as _approved
from fsm_stage.graph.conditions import _commit as _commit
from fsm_stage.graph.conditions import _eligible_condition as _eligible_condition
from fsm_stage.graph.machine import _add_transitions as _add_transitions
from fsm_stage.graph.machine import _GotoTransitions as _GotoTransitions
from fsm_stage.graph.vocabulary import (
    GOTO_PREFIX,
    PLAN_DEFAULT,
    PLAN_ENTER,
    PLAN_EXIT,
    PLAN_LEAVE,
    PLAN_STATE,
    Refusal,
    StageCursor,
    UnknownStageError,
    goto,
)

__all__ = [
    "GOTO_PREFIX",
    "PLAN_DEFAULT",
    "PLAN_ENTER",
    "PLAN_EXIT",
    "PLAN_LEAVE",
    "PLAN_STATE",
    "CompiledGraph",
    "Refusal",
    "StageCursor",
    "UnknownStageError",
    "clear_cache",
    "compile_graph",
    "compile_plan_mode",
    "fingerprint",
    "goto",
]
