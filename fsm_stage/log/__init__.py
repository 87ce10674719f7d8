"""The session log: events, stores, the DSH reader, the surface and the projections.

Modules (DESIGN.md §4, dsh-log-format.md §9):

* ``events`` — ``Event``, ``Replace``, ``SessionHeader``, the ``EventLog`` protocol, ``MemoryLog``;
* ``jsonl`` — ``JsonlLog``: durable single-writer JSONL store (fsync, rollback, lock);
* ``dsh`` — ``read_log`` / ``iter_events`` / ``read_stream(s)``: reader for real DSH logs;
* ``surface`` — ``Surface``, ``fold_surface``, ``shadow_range`` (model-visible node list);
* ``projections`` — ``Projection``, ``ProjectionCursor``, ``fold`` and the built-in folds;
* ``checkpoints`` — ``CheckpointStore``, ``cold_fold``, ``checkpoint_log``.
"""
