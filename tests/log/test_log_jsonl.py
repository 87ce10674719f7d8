"""``JsonlLog``: DSH-shaped writing, one writer, fsync'd whole lines, rollback, torn-tail repair."""

from __future__ import annotations

import errno
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fsm_stage.errors import LogFormatError, LogLockedError, LogWriteError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import MemoryLog, Replace, SessionHeader
from fsm_stage.log.jsonl import JsonlLog, NewEvent

USER_EMPTY = "user/message"
EMPTY = {"content": []}  # the smallest user/message data a writer accepts
HEADER = SessionHeader(id="sess-1", created_at=1_700_000_000_000, cwd="/work")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


_ticks = itertools.count(1_007, 7)


def tick() -> int:
    """A clock that moves 7 ms on at every call."""
    return next(_ticks)


def test_written_log_is_dsh_shaped(tmp_path: Path) -> None:
    """Header with delegationDepth, contiguous seqs, integer time, ignorable fsm types,
    replace written {op, start, end}, no other envelope keys."""
    path = tmp_path / "session.jsonl"
    with JsonlLog(path, header=HEADER, clock=tick, ignorable_types={"stage/change"}) as log:
        log.append("turn/start", {"turn": 1})
        log.append("user/message", {"content": [{"type": "text", "text": "a"}]}, surface_op="append")
        log.append("fsm/transition", {"to": "b"})
        log.append("stage/change", {"stage": "b"})
        log.append("user/message", {"content": []}, surface_op=Replace(1, 1), source_event_seqs=[1])
    recs = lines(path)
    assert recs[0] == {
        "type": "session",
        "version": 0,
        "id": "sess-1",
        "createdAt": 1_700_000_000_000,
        "cwd": "/work",
        "delegationDepth": 0,
    }
    body = recs[1:]
    assert [r["seq"] for r in body] == [0, 1, 2, 3, 4]
    assert all(isinstance(r["time"], int) for r in body)
    assert [r.get("ignorable") for r in body] == [None, None, True, True, None]
    assert body[4]["surfaceOp"] == {"op": "replace", "start": 1, "end": 1}
    allowed = {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
    assert all(set(r) <= allowed for r in body)
    # a strict (DSH-like) read accepts it: fsm types are ignorable
    assert len(read_log(path, strict=True).events) == 5


def test_reopen_reads_back_identical_events(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER, clock=tick) as log:
        written = [log.append("turn/start", {"turn": 1}), log.append("plan/mode", {"active": True})]
    with JsonlLog(path) as log:
        assert list(log.events) == written
        assert log.header == HEADER
        assert log.append("turn/end", {"turn": 1}).seq == 2


def test_open_of_an_existing_empty_file_without_header_says_it_is_empty(tmp_path: Path) -> None:
    """An existing but empty file is not "no such session log": the error names the real
    problem (no header line) and how to fix it; with ``header=`` the file is written."""
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(LogFormatError, match="is empty") as err:
        JsonlLog(path)
    assert "no such session log" not in str(err.value) and "create=" in str(err.value)
    with JsonlLog(path, header=HEADER) as log:
        assert log.append("turn/start", {"turn": 1}).seq == 0
    assert lines(path)[0]["id"] == HEADER.id


def test_open_without_header_or_with_other_id(tmp_path: Path) -> None:
    with pytest.raises(LogFormatError, match="no such session log"):
        JsonlLog(tmp_path / "missing.jsonl")
    JsonlLog(tmp_path / "s.jsonl", header=HEADER).close()
    with pytest.raises(LogFormatError, match="does not match"):
        JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(id="other"))
    # the refused open released its lock
    JsonlLog(tmp_path / "s.jsonl").close()


def test_second_writer_in_same_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER), pytest.raises(LogLockedError, match="locked by another writer"):
        JsonlLog(path)
    with JsonlLog(path) as again:  # released on close
        assert len(again) == 0


WRITER = textwrap.dedent(
    """
    import sys, time
    from fsm_stage.errors import LogLockedError
    from fsm_stage.log.jsonl import JsonlLog
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        log = JsonlLog(path)
    except LogLockedError as err:
        print("LOCKED", err, flush=True)
        sys.exit(3)
    print("OWNER", flush=True)
    for i in range(n):
        log.append("fsm/probe", {"writer": tag, "i": i, "pad": "x" * 500})
    sys.stdin.readline()  # hold the lock until told to finish
    log.close()
    """
)


def test_two_processes_lock_refuses_second_writer_and_lines_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    JsonlLog(path, header=HEADER).close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "A", "200"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert first.stdout is not None and first.stdin is not None
    assert first.stdout.readline().strip() == "OWNER"
    second = subprocess.run(
        [sys.executable, "-c", WRITER, str(path), "B", "200"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert second.returncode == 3 and second.stdout.startswith("LOCKED")
    assert "locked by another writer" in second.stdout
    first.stdin.write("\n")
    first.stdin.flush()
    assert first.wait(timeout=60) == 0
    recs = lines(path)[1:]
    assert [r["data"]["writer"] for r in recs] == ["A"] * 200
    assert [r["seq"] for r in recs] == list(range(200))


def test_failed_write_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        log.append("turn/start", {"turn": 1})
        before = path.read_bytes()
        real_fsync = os.fsync
        calls = {"n": 0}

        def failing_fsync(fd: int) -> None:
            calls["n"] += 1
            if calls["n"] == 1:
                raise OSError(28, "No space left on device")
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(LogWriteError, match="rolled back"):
            log.append("turn/end", {"turn": 1})
        assert path.read_bytes() == before
        assert len(log) == 1 and log.size == len(before)
        monkeypatch.setattr(os, "fsync", real_fsync)
        # C1: retrying fsync after a failure is unsound ("fsyncgate"): the log refuses further
        # appends until it is reopened
        with pytest.raises(LogWriteError, match="reopen"):
            log.append("turn/end", {"turn": 1})
    with JsonlLog(path) as log:
        assert log.append("turn/end", {"turn": 1}).seq == 1
    assert [r.get("seq") for r in lines(path)[1:]] == [0, 1]


def _half_then_enospc(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the next ``os.write`` write half its bytes, and the one after raise ENOSPC (a disk
    filling up mid-batch); returns the list of write sizes attempted."""
    real_write = os.write
    sizes: list[int] = []

    def flaky(fd: int, data: bytes | memoryview) -> int:
        sizes.append(len(data))
        if len(sizes) == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", flaky)
    return sizes


def test_write_failing_part_way_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """C1: the write itself fails after half a batch hit the file: the file is exactly as
    before (no stale bytes buffered to reappear later), the same log appends again, and the
    log reopens with every event."""
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        log.append("turn/start", {"turn": 1})
        before = path.read_bytes()
        real_write = os.write
        sizes = _half_then_enospc(monkeypatch)
        with pytest.raises(LogWriteError, match="rolled back"):
            log.append_many(
                [NewEvent(USER_EMPTY, {"content": [{"type": "text", "text": "x" * 40}]}, "append"),
                 NewEvent("turn/end", {"turn": 1})]
            )
        assert len(sizes) == 2  # half written, then the failure
        assert path.read_bytes() == before
        assert len(log) == 1 and log.size == len(before) and log.surface.nodes == []
        monkeypatch.setattr(os, "write", real_write)
        assert log.append(USER_EMPTY, EMPTY, surface_op="append").seq == 1
        assert log.append("turn/end", {"turn": 1}).seq == 2
    res = read_log(path)
    assert [(e.seq, e.type) for e in res.events] == [(0, "turn/start"), (1, USER_EMPTY), (2, "turn/end")]
    assert not res.warnings and res.torn_tail_offset is None
    with JsonlLog(path) as log:
        assert log.warnings == [] and len(log) == 3
        assert log.append("fsm/x", {}).seq == 3


def test_failed_rollback_makes_the_log_unusable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """C1: when the rollback itself fails the log's state is unknown: every later append
    raises a ``LogWriteError`` telling to reopen (nothing is suppressed), and reopening repairs
    the torn tail and appends again."""
    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=HEADER)
    log.append("turn/start", {"turn": 1})
    before = path.read_bytes()
    real_write, real_ftruncate = os.write, os.ftruncate
    _half_then_enospc(monkeypatch)

    def refuse(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", refuse)
    with pytest.raises(LogWriteError, match="reopen") as err:
        log.append("turn/end", {"turn": 1})
    assert "Input/output error" in str(err.value)
    monkeypatch.setattr(os, "write", real_write)
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    for _ in range(2):
        with pytest.raises(LogWriteError, match="reopen"):
            log.append("fsm/x", {})
    assert len(log) == 1
    assert path.read_bytes().startswith(before) and path.read_bytes() != before  # the torn half
    log.close()
    log.close()  # idempotent
    with JsonlLog(path) as again:  # the writer lock was released: reopen in the same process
        assert [e.seq for e in again.events] == [0]
        assert any("torn tail" in w for w in again.warnings)
        assert path.read_bytes() == before
        assert again.append("turn/end", {"turn": 1}).seq == 1


def test_non_json_data_and_refused_surface_op_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        before = path.read_bytes()
        with pytest.raises(LogWriteError, match="not JSON"):
            log.append("fsm/x", {"bad": object()})
        with pytest.raises(LogWriteError, match="not JSON"):
            log.append("fsm/x", {"nan": float("nan")})
        with pytest.raises(LogWriteError):
            log.append("user/message", {"content": []}, surface_op=Replace(0, 0), source_event_seqs=[0])
        assert path.read_bytes() == before and len(log) == 0


def test_append_many_is_all_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        log.append("user/message", {"content": []}, surface_op="append")
        before = path.read_bytes()
        with pytest.raises(LogWriteError):
            log.append_many([NewEvent("fsm/a", {}), NewEvent(USER_EMPTY, EMPTY, Replace(5, 5), [5])])
        assert path.read_bytes() == before and len(log) == 1
        evs = log.append_many([NewEvent("fsm/a", {}), NewEvent(USER_EMPTY, EMPTY, Replace(0, 0), [0])])
        assert [e.seq for e in evs] == [1, 2] and log.surface.nodes == [2]
    assert len(read_log(path).events) == 3


def test_torn_tail_truncated_only_at_reported_offset_on_open(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        log.append("turn/start", {"turn": 1})
    good = path.read_bytes()
    path.write_bytes(good + b'{"type":"turn/end","seq":1,"ti')
    with JsonlLog(path) as log:
        assert len(log) == 1
        assert any("truncated torn tail" in w for w in log.warnings)
        assert path.read_bytes() == good
        log.append("turn/end", {"turn": 1})
    assert [e.type for e in read_log(path).events] == ["turn/start", "turn/end"]


def test_corrupt_log_refuses_to_open_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        log.append("turn/start", {"turn": 1})
        log.append("turn/end", {"turn": 1})
    data = path.read_bytes().replace(b'"seq":0', b'"seq":9')
    path.write_bytes(data)
    with pytest.raises(LogFormatError, match="corrupt"):
        JsonlLog(path)
    assert path.read_bytes() == data


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "s.jsonl", header=HEADER)
    log.close()
    log.close()
    with pytest.raises(LogWriteError, match="closed"):
        log.append("turn/start", {})


def test_memory_log_matches_jsonl_rules() -> None:
    """MemoryLog: same ignorable marking, surface validation and atomic batches as JsonlLog."""
    log = MemoryLog(HEADER, clock=lambda: 5)
    assert log.append("fsm/x", {}).ignorable
    log.append("user/message", {"content": []}, surface_op="append")
    with pytest.raises(LogWriteError):
        log.append_many([NewEvent("fsm/y", {}), NewEvent(USER_EMPTY, {"content": []}, Replace(9, 9), [9])])
    assert len(log) == 2
    log.fail_next = OSError("disk")
    with pytest.raises(LogWriteError, match="refused"):
        log.append("turn/start", {})
    assert len(log) == 2


def test_threads_of_one_process_serialise_their_appends(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:

        def work(tag: str) -> None:
            for i in range(40):
                log.append("fsm/probe", {"tag": tag, "i": i})

        threads = [threading.Thread(target=work, args=(t,)) for t in "abcd"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(log) == 160
    res = read_log(path)
    assert [e.seq for e in res.events] == list(range(160))
    assert sorted((e.data["tag"], e.data["i"]) for e in res.events) == [
        (t, i) for t in "abcd" for i in range(40)
    ]


def test_stored_log_with_impossible_surface_op_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        json.dumps(HEADER.to_json())
        + "\n"
        + json.dumps(
            {
                "type": "user/message",
                "seq": 0,
                "time": 0,
                "data": {},
                "surfaceOp": {"op": "replace", "start": 5, "end": 5},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(LogFormatError, match="invalid surface op"):
        JsonlLog(path)
    with pytest.raises(LogFormatError):  # not LogLockedError: the failed open released its lock
        JsonlLog(path)


def test_os_refusal_to_open_is_a_log_write_error(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(LogWriteError, match="cannot open the log for writing"):
        JsonlLog(tmp_path / "dir.jsonl", header=HEADER)


def test_a_path_that_is_no_log_gets_no_lock_file(tmp_path: Path) -> None:
    """A folder, a missing file or an empty one opened without a header to create it is refused
    before the ``.lock`` file is made beside it (one was left behind each time)."""
    folder = tmp_path / "adir"
    folder.mkdir()
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(LogWriteError, match="Is a directory"):
        JsonlLog(folder)
    with pytest.raises(LogFormatError, match="no such session log"):
        JsonlLog(tmp_path / "missing.jsonl")
    with pytest.raises(LogFormatError, match="the file is empty"):
        JsonlLog(tmp_path / "empty.jsonl")
    (tmp_path / "README.md").write_text("# not a log\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    for name in ("README.md", "blob.bin"):
        with pytest.raises(LogFormatError, match="first line is not JSON"):
            JsonlLog(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "adir", "blob.bin", "empty.jsonl"]
    # a log whose header line starts with a UTF-8 BOM still opens, as the reader reads it
    bom = tmp_path / "bom.jsonl"
    with JsonlLog(bom, header=SessionHeader("bom", cwd=str(tmp_path))):
        pass
    bom.write_bytes(b"\xef\xbb\xbf" + bom.read_bytes())
    with JsonlLog(bom) as log:
        assert log.header.id == "bom"


def test_the_not_json_check_never_reads_a_fifo(tmp_path: Path) -> None:
    """The check before the lock reads only regular files: opening a FIFO for reading blocks
    until a writer comes, and a log path naming one hung for ever."""
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    code = textwrap.dedent("""
        import sys
        from fsm_stage import SessionHeader
        from fsm_stage.log.jsonl import JsonlLog
        try:
            JsonlLog(sys.argv[1], header=SessionHeader("s")).close()
        except Exception:
            pass
        print("returned")
    """)
    run = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "returned", run.stderr[-500:]
