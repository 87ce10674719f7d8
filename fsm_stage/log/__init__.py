"""The session log: events, stores, the DSH reader, the surface and the projections.

Open a log with ``open_log(location)`` (a file path, ``memory:`` or a registered scheme) and
read one without writing with ``read_location``. Every name below is importable from
``fsm_stage.log`` and loaded on first use (PEP 562), so ``import fsm_stage.log`` is cheap.
Modules (docs/architecture.md, docs/session-log.md): ``events`` (``Event``, ``SessionHeader``, the
``EventLog`` protocol), ``memory`` (``MemoryLog``), ``jsonl`` (``JsonlLog``), ``locations``
(``open_log``, the scheme table), ``postgres`` (``PostgresLog``; psycopg is imported only
when a PostgreSQL log is opened), ``dsh`` (the DSH reader), ``surface`` (the model-visible
node list), ``writer_checks`` (what a strict reader would refuse), ``projections`` (folds)
and ``checkpoints`` (``CheckpointStore``, ``cold_fold``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.log.checkpoints import CheckpointStore, checkpoint_log, cold_fold
    from fsm_stage.log.dsh import ReadResult, iter_events, read_log, read_log_data, read_stream, read_streams
    from fsm_stage.log.events import (
        Clock,
        Event,
        EventLog,
        NewEvent,
        Replace,
        SessionHeader,
        SurfaceOp,
        wall_clock_ms,
    )
    from fsm_stage.log.jsonl import JsonlLog, LockFileError, lock_path, writer_lock
    from fsm_stage.log.locations import (
        LogOpener,
        StoredLog,
        log_schemes,
        open_log,
        read_location,
        register_log_scheme,
        unregister_log_scheme,
    )
    from fsm_stage.log.memory import MemoryLog
    from fsm_stage.log.postgres import PostgresLog
    from fsm_stage.log.projections import (
        HeaderRelative,
        OpenTurn,
        PlanModeFold,
        PlanView,
        Projection,
        ProjectionCursor,
        StageProjection,
        ToldProjection,
        current_stage,
        fold,
        fold_plan_mode,
        fold_stage,
        standard_projections,
        told,
    )
    from fsm_stage.log.surface import LogWriteError, Surface, fold_surface, shadow_range
    from fsm_stage.log.writer_checks import check_new_event


_EXPORTS: dict[str, str] = {
    "CheckpointStore": "checkpoints",
    "checkpoint_log": "checkpoints",
    "cold_fold": "checkpoints",
    "ReadResult": "dsh",
    "iter_events": "dsh",
    "read_log": "dsh",
    "read_log_data": "dsh",
    "read_stream": "dsh",
    "read_streams": "dsh",
    "Clock": "events",
    "Event": "events",
    "EventLog": "events",
    "NewEvent": "events",
    "Replace": "events",
    "SessionHeader": "events",
    "SurfaceOp": "events",
    "wall_clock_ms": "events",
    "JsonlLog": "jsonl",
    "LockFileError": "jsonl",
    "lock_path": "jsonl",
    "writer_lock": "jsonl",
    "LogOpener": "locations",
    "StoredLog": "locations",
    "log_schemes": "locations",
    "open_log": "locations",
    "read_location": "locations",
    "register_log_scheme": "locations",
    "unregister_log_scheme": "locations",
    "MemoryLog": "memory",
    "PostgresLog": "postgres",
    "HeaderRelative": "projections",
    "OpenTurn": "projections",
    "PlanModeFold": "projections",
    "PlanView": "projections",
    "Projection": "projections",
    "ProjectionCursor": "projections",
    "StageProjection": "projections",
    "ToldProjection": "projections",
    "current_stage": "projections",
    "fold": "projections",
    "fold_plan_mode": "projections",
    "fold_stage": "projections",
    "standard_projections": "projections",
    "told": "projections",
    "Surface": "surface",
    "LogWriteError": "surface",
    "fold_surface": "surface",
    "shadow_range": "surface",
    "check_new_event": "writer_checks",
}
"""Public name -> the submodule of ``fsm_stage.log`` that defines it."""

__all__ = [
    "CheckpointStore",
    "Clock",
    "Event",
    "EventLog",
    "HeaderRelative",
    "JsonlLog",
    "LockFileError",
    "LogOpener",
    "LogWriteError",
    "MemoryLog",
    "NewEvent",
    "OpenTurn",
    "PlanModeFold",
    "PlanView",
    "PostgresLog",
    "Projection",
    "ProjectionCursor",
    "ReadResult",
    "Replace",
    "SessionHeader",
    "StageProjection",
    "StoredLog",
    "Surface",
    "SurfaceOp",
    "ToldProjection",
    "check_new_event",
    "checkpoint_log",
    "cold_fold",
    "current_stage",
    "fold",
    "fold_plan_mode",
    "fold_stage",
    "fold_surface",
    "iter_events",
    "lock_path",
    "log_schemes",
    "open_log",
    "read_location",
    "read_log",
    "read_log_data",
    "read_stream",
    "read_streams",
    "register_log_scheme",
    "shadow_range",
    "standard_projections",
    "told",
    "unregister_log_scheme",
    "wall_clock_ms",
    "writer_lock",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
