"""Checkpoints: a cold read seeks to the tail when the checkpoint matches, refolds otherwise (B103)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from log_helpers import DSH_DIR, PLAN_REVIEW

from fsm_stage.log.checkpoints import CheckpointStore, checkpoint_log, cold_fold
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import (
    PlanState,
    PlanView,
    ProjectionCursor,
    StageProjection,
    fold,
    standard_projections,
)

HEADER = SessionHeader(id="s", created_at=7, cwd="/w")


def make_log(path: Path, n: int) -> None:
    with JsonlLog(path, header=HEADER, clock=lambda: 1) as log:
        for i in range(n):
            log.append("step/start", {"turn": 1, "step": i})
        log.append("plan/mode", {"active": True})


def full_states(path: Path) -> dict[str, Any]:
    events = read_log(path).events
    return {p.key: fold(p, events) for p in standard_projections()}


def test_second_cold_read_resumes_and_folds_only_new_events(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 50)
    first = cold_fold(path, standard_projections(), store=store)
    assert first.resumed_from is None and first.events_applied == 51 and first.last_seq == 50
    again = cold_fold(path, standard_projections(), store=store)
    assert again.resumed_from == 50 and again.events_applied == 0
    with JsonlLog(path) as log:
        log.append("plan/mode", {"active": False})
    third = cold_fold(path, standard_projections(), store=store)
    assert third.resumed_from == 50 and third.events_applied == 1
    assert dict(third.states) == full_states(path)


def test_packed_row_watermark_resumes_mid_log(tmp_path: Path) -> None:
    if not (DSH_DIR / PLAN_REVIEW).is_file():
        pytest.skip("corpus absent")
    path, store = tmp_path / "pr.jsonl", CheckpointStore(tmp_path / "ck")
    shutil.copy(DSH_DIR / PLAN_REVIEW, path)
    cold_fold(path, standard_projections(), store=store)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(
            json.dumps({"type": "command/run", "data": {"commandId": "c9", "name": "plan", "args": ""}})
            + "\n"
        )
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from == 342 and res.events_applied == 1 and res.last_seq == 343
    assert PlanView().view(res.states["plan"]) == {"active": False, "pending": True}
    assert dict(res.states) == full_states(path)


@pytest.mark.parametrize("damage", ["rewrite", "truncate", "recreate", "version"])
def test_mismatch_refolds_from_the_start(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B103: a checkpoint from another state version, identity or log content is discarded and
    the log is refolded from the start (docs/session-log.md)."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    if damage == "rewrite":  # the watermark line changed in place
        data = path.read_bytes().replace(b'"active":true', b'"active":false')
        path.write_bytes(data)
    elif damage == "truncate":
        path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-2]))
    elif damage == "recreate":
        path.unlink()
        with JsonlLog(path, header=SessionHeader(id="s", created_at=8, cwd="/w"), clock=lambda: 1) as log:
            for i in range(25):
                log.append("step/start", {"turn": 1, "step": i})
    else:  # B103: a row from another state version is discarded, never migrated
        monkeypatch.setattr(PlanView, "STATE_VERSION", 3)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and res.checkpoint_note
    assert res.events_applied == res.last_seq + 1
    assert dict(res.states) == full_states(path)


def test_corrupt_checkpoint_file_is_ignored(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 3)
    cold_fold(path, standard_projections(), store=store)
    store.path_for(path).write_text("{not json", encoding="utf-8")
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and res.events_applied == 4


def test_checkpoint_from_live_cursors(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    with JsonlLog(path, header=HEADER, clock=lambda: 1) as log:
        cursors = [ProjectionCursor(p, log) for p in (PlanView(), StageProjection())]
        log.append("command/run", {"commandId": "c", "name": "plan", "args": ""})
        assert checkpoint_log(store, log, cursors)
        log.append("plan/mode", {"active": True})
    res = cold_fold(path, [PlanView(), StageProjection()], store=store)
    assert res.resumed_from == 0 and res.events_applied == 1
    assert res.states["plan"] == PlanState(True, None, res.states["plan"].running)
    assert PlanView().view(res.states["plan"]) == {"active": True, "pending": False}


def test_unwritable_store_is_fail_soft(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    make_log(path, 2)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = cold_fold(path, standard_projections(), store=CheckpointStore(blocker / "sub"))
    assert res.last_seq == 2


# -- rewrites the watermark line does not show ------------------------------------------------


def _rewrite_in_place(path: Path, old: bytes, new: bytes, *, keep_mtime: bool = False) -> None:
    """Overwrite the first ``old`` with ``new`` (same length) in place: same inode, same size.
    The modification time is moved one second on (what a later write shows), or kept."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    at = data.index(old)
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(new)
    mtime = st.st_mtime_ns if keep_mtime else st.st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(st.st_atime_ns, mtime))


def test_same_size_rewrite_before_the_watermark_is_detected(tmp_path: Path) -> None:
    """A rewrite before the watermark line that keeps the size and the watermark line: the
    modification time of an unchanged-size file moved, so the log is refolded."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    _rewrite_in_place(path, b'"step":3}', b'"step":4}')
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and "rewritten in place" in (res.checkpoint_note or "")
    assert dict(res.states) == full_states(path)


def test_replaced_file_with_the_same_bytes_at_the_watermark_is_detected(tmp_path: Path) -> None:
    """A log replaced by another file (rename over it: a new inode) is refolded even when size,
    identity and the watermark line are the same."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    other = tmp_path / "other.jsonl"
    other.write_bytes(path.read_bytes().replace(b'"step":3}', b'"step":4}'))
    os.replace(other, path)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and "replaced" in (res.checkpoint_note or "")


def test_changed_header_line_is_detected(tmp_path: Path) -> None:
    """The header line is hashed: a header edited in place (same id, createdAt, cwd) refolds."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    header = SessionHeader(id="s", created_at=7, cwd="/w", origin="cli")
    with JsonlLog(path, header=header, clock=lambda: 1) as log:
        log.append("step/start", {"turn": 1, "step": 0})
    cold_fold(path, standard_projections(), store=store)
    _rewrite_in_place(path, b'"origin":"cli"', b'"origin":"web"', keep_mtime=True)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and "header" in (res.checkpoint_note or "")


def test_known_limit_in_place_rewrite_keeping_size_and_mtime(tmp_path: Path) -> None:
    """What docs/log-decisions.md states is not detected: an in-place rewrite before the watermark line
    that keeps the file size, its inode and modification time (or that is followed by an
    append, which moves both anyway). Logs are append-only, so this needs deliberate tampering."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    _rewrite_in_place(path, b'"step":3}', b'"step":4}', keep_mtime=True)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from == 20


def test_live_checkpoint_survives_its_own_appends(tmp_path: Path) -> None:
    """The writer-side checkpoint records the inode and time of the file it wrote: later
    appends (size grows) still resume."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    with JsonlLog(path, header=HEADER, clock=lambda: 1) as log:
        cursors = [ProjectionCursor(p, log) for p in standard_projections()]
        log.append("step/start", {"turn": 1, "step": 0})
        assert checkpoint_log(store, log, cursors)
        res = cold_fold(path, standard_projections(), store=store, write=False)
        assert res.resumed_from == 0
        log.append("step/start", {"turn": 1, "step": 1})
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from == 0 and res.events_applied == 1


def test_checkpoint_store_writes_with_umask_permissions_and_no_leftovers(tmp_path: Path) -> None:
    """Checkpoints are written with ``fileio.atomic_write``: umask permissions, no temp files."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 2)
    old = os.umask(0o022)
    try:
        cold_fold(path, standard_projections(), store=store)
    finally:
        os.umask(old)
    (saved,) = (tmp_path / "ck").iterdir()
    assert saved == store.path_for(path) and saved.stat().st_mode & 0o777 == 0o644
