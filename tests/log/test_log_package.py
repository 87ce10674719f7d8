"""The ``fsm_stage.log`` front door (lazy re-exports) and the import paths the split packages keep."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from typing import Any

import pytest

import fsm_stage.log

#: every name imported from these paths before they became packages (grep of fsm_stage, tests, bench)
OLD_PATHS: dict[str, tuple[str, ...]] = {
    "fsm_stage.log.dsh": (
        "BodyScan", "KNOWN_EVENT_TYPES", "ReadResult", "RecordDecoder", "gc_paused", "iter_events",
        "open_session_log", "read_header", "read_log", "read_stream", "read_streams", "scan_body",
        "unknown_types_warning", "parse_header", "parse_surface_op", "open_log_bytes", "unwrap_envelope",
        "PACKED_ROW_TYPES", "ENVELOPE_KEYS", "HEADER_KEYS", "RETIRED_HEADER_KEYS", "ZSTD_MAGIC",
        "OpenedLog", "OpenedSession",
    ),
    "fsm_stage.log.projections": (
        "Fold", "HeaderRelative", "HeaderRelativeState", "OpenTurn", "PlanModeFold", "PlanModeProblems",
        "PlanModeProblemsState", "PlanState", "PlanView", "Projection", "ProjectionCursor",
        "RunningSelection", "StageProjection", "StageRecord", "StageState", "ToldProjection", "TurnState",
        "current_stage", "fold", "fold_plan_mode", "fold_stage", "fold_stage_records",
        "plan_mode_problem", "stage_from_event", "standard_projections", "told", "StageFold",
        "ToldFacts", "ToldState", "message_text", "is_stage_prompt",
    ),
    "fsm_stage.log.events": (
        "Clock", "Event", "EventLog", "MemoryLog", "NewEvent", "Replace", "SessionHeader", "SurfaceOp",
        "wall_clock_ms",
    ),
    "fsm_stage.graph": (
        "GOTO_PREFIX", "CompiledGraph", "PLAN_DEFAULT", "PLAN_ENTER", "PLAN_EXIT", "PLAN_LEAVE",
        "PLAN_STATE", "Refusal", "StageCursor", "UnknownStageError", "_GotoTransitions",
        "_add_transitions", "_approved", "_commit", "_eligible_condition", "clear_cache",
        "compile_graph", "compile_plan_mode", "fingerprint", "goto",
    ),
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(OLD_PATHS))
def test_old_import_paths_keep_working(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in OLD_PATHS[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"


@pytest.mark.parametrize(
    "module", ["fsm_stage.log", "fsm_stage.log.dsh", "fsm_stage.log.projections", "fsm_stage.graph"]
)
def test_every_exported_name_resolves_to_a_value_not_a_submodule(module: str) -> None:
    """A submodule named like an exported function would replace it on the package (``told``)."""
    mod = importlib.import_module(module)
    for name in mod.__all__:
        value = getattr(mod, name)
        assert not isinstance(value, types.ModuleType), f"{module}.{name} is a module"
    assert sorted(mod.__all__) == sorted(set(mod.__all__))


def test_log_names_are_the_ones_their_modules_define() -> None:
    from fsm_stage.log import jsonl, locations, memory

    assert fsm_stage.log.open_log is locations.open_log
    assert fsm_stage.log.MemoryLog is memory.MemoryLog
    assert fsm_stage.log.JsonlLog is jsonl.JsonlLog
    assert set(dir(fsm_stage.log)) >= set(fsm_stage.log.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package: Any = fsm_stage.log
        _ = package.nope
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = importlib.import_module("fsm_stage.log.events").nope


def test_importing_the_log_package_loads_no_submodule() -> None:
    code = (
        "import sys, fsm_stage.log\n"
        "print(sorted(m for m in sys.modules if m.startswith('fsm_stage.log.')))\n"
        "fsm_stage.log.open_log\n"
        "print('fsm_stage.log.locations' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "True"]
