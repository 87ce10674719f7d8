"""``fsm_stage.log.jsonl.writer_lock``: the one-writer lock ``JsonlLog`` and ``simulate --log``
share — "locked by another writer" versus "the lock file cannot be created"."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm_stage.errors import LogLockedError, LogWriteError, UserError
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog, LockFileError, lock_path, writer_lock
from fsm_stage.simulate import LogTarget

NEEDS_PROC = pytest.mark.skipif(not Path("/proc/self").is_dir(),
                                reason="needs Linux /proc (a folder that refuses new files)")


def test_a_held_lock_is_reported_as_another_writer(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    held = writer_lock(target)
    try:
        with pytest.raises(LogLockedError, match="is locked by another writer") as info:
            writer_lock(target)
        assert str(lock_path(target)) in str(info.value) and "\n" not in str(info.value)
        assert not isinstance(info.value, LockFileError)
        # JsonlLog and the simulator's --log target take the same lock
        with pytest.raises(LogLockedError, match="is locked by another writer"):
            JsonlLog(target, header=SessionHeader(id="s", cwd=str(tmp_path)))
        with pytest.raises(LogLockedError, match="is locked by another writer"):
            LogTarget.open(target, inputs={}, replace=True)
    finally:
        held.release()
    again = writer_lock(target)  # released: free again
    again.release()


def test_the_lock_creates_missing_parent_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "s.jsonl"
    lock = writer_lock(target)
    try:
        assert lock.is_locked and lock_path(target).exists()
    finally:
        lock.release()


@NEEDS_PROC
def test_a_folder_refusing_new_files_is_not_reported_as_contention() -> None:
    """filelock reports `/proc/x.lock` as a timeout; writer_lock names the folder instead."""
    with pytest.raises(LockFileError) as info:
        writer_lock("/proc/x.jsonl")
    message = str(info.value)
    assert message == ("/proc/x.jsonl: cannot write session log: cannot create files in /proc "
                       "(lock file x.jsonl.lock)")
    assert isinstance(info.value, LogWriteError) and isinstance(info.value, UserError)
    assert not isinstance(info.value, LogLockedError)


@NEEDS_PROC
def test_jsonl_log_and_log_target_report_the_folder_too() -> None:
    with pytest.raises(LockFileError, match="cannot create files in /proc"):
        JsonlLog("/proc/x.jsonl", header=SessionHeader(id="x", cwd="/"))
    with pytest.raises(LockFileError, match="cannot create files in /proc"):
        LogTarget.open("/proc/x.jsonl", inputs={}, replace=False)


def test_an_os_error_creating_the_lock_is_one_line_naming_the_log(tmp_path: Path) -> None:
    """A parent "folder" that is a regular file: the OS refuses; not reported as contention."""
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / "s.jsonl"
    with pytest.raises(LockFileError) as info:
        writer_lock(target)
    message = str(info.value)
    assert message.startswith(f"{target}: cannot write session log: ") and "\n" not in message
    assert not isinstance(info.value, LogLockedError)
    with pytest.raises(LockFileError, match="cannot write session log"):
        JsonlLog(target, header=SessionHeader(id="s", cwd=str(tmp_path)))
