"""Issue 15 items 1 and 4: one writer per log *file* (symlinks, hard links) and a reopen that
never cuts intact lines after a damaged one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsm_stage.errors import LogFormatError, LogLockedError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog


def _new_log(path: Path, n: int = 3) -> None:
    with JsonlLog(path, header=SessionHeader(id="s1")) as log:
        for i in range(n):
            log.append("fsm/note", {"i": i}, ignorable=True)


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_second_writer_through_another_name_is_refused(tmp_path: Path, link: str) -> None:
    real = tmp_path / "a" / "log.jsonl"
    real.parent.mkdir()
    _new_log(real, 0)
    other = tmp_path / "other.jsonl"
    if link == "symlink":
        other.symlink_to(real)
    else:
        os.link(real, other)
    with JsonlLog(real) as first:
        with pytest.raises(LogLockedError):
            JsonlLog(other)
        for i in range(20):
            first.append("fsm/note", {"i": i}, ignorable=True)
    assert [e.data["i"] for e in read_log(real).events] == list(range(20))


def test_the_second_name_may_write_once_the_first_writer_closed(tmp_path: Path) -> None:
    real = tmp_path / "log.jsonl"
    _new_log(real, 1)
    os.link(real, tmp_path / "hard.jsonl")
    with JsonlLog(tmp_path / "hard.jsonl") as log:
        log.append("fsm/note", {"i": 1}, ignorable=True)
    assert len(read_log(real).events) == 2


def _damage_line(path: Path, index: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[index] = b'{"type":"fsm/note","seq":' + b"\xff garbage\n"
    path.write_bytes(b"".join(lines))


def test_a_damaged_middle_line_refuses_to_open_and_cuts_nothing(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    _new_log(log_path, 11)
    _damage_line(log_path, 4)  # header is line 1: event seq 3 is line 5
    before = log_path.read_bytes()
    with pytest.raises(LogFormatError, match=r"line 5 is damaged .* 7 line\(s\) follow it"):
        JsonlLog(log_path)
    assert log_path.read_bytes() == before  # no intact event deleted


def test_repair_keeps_every_line_it_can_and_backs_up_the_rest(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    _new_log(log_path, 11)
    lines = log_path.read_bytes().splitlines(keepends=True)
    lines.insert(5, b"not json at all\n")  # an extra damaged line: removing it alone is clean
    log_path.write_bytes(b"".join(lines))
    summary = JsonlLog.repair(log_path)
    assert "every other line kept" in summary
    assert len(read_log(log_path).events) == 11
    backups = list(tmp_path.glob("log.jsonl.damaged-*"))
    assert [b.read_bytes() for b in backups] == [b"not json at all\n"]
    with JsonlLog(log_path) as log:
        log.append("fsm/note", {"i": 11}, ignorable=True)


def test_repair_cuts_when_it_must_and_keeps_the_cut_bytes(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    _new_log(log_path, 11)
    _damage_line(log_path, 4)
    original = log_path.read_bytes()
    JsonlLog.repair(log_path)
    kept = log_path.read_bytes()
    (backup,) = tmp_path.glob("log.jsonl.damaged-*")
    assert kept + backup.read_bytes() == original
    assert len(read_log(log_path).events) == 3


def test_a_torn_final_line_is_cut_with_a_backup(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    _new_log(log_path, 2)
    with open(log_path, "ab") as fh:
        fh.write(b'{"type":"fsm/no')
    with JsonlLog(log_path) as log:
        assert len(log) == 2
        assert any("torn-" in w for w in log.warnings)
    (backup,) = tmp_path.glob("log.jsonl.torn-*")
    assert backup.read_bytes() == b'{"type":"fsm/no'


def test_the_repair_command_and_the_refusal_name_each_other(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fsm_stage.cli import main

    log_path = tmp_path / "log.jsonl"
    _new_log(log_path, 11)
    _damage_line(log_path, 4)
    with pytest.raises(LogFormatError, match="fsm-stage repair"):
        JsonlLog(log_path)
    res = CliRunner().invoke(main, ["repair", str(log_path)])
    assert res.exit_code == 0 and "saved to" in res.output
    JsonlLog(log_path).close()
    res = CliRunner().invoke(main, ["repair", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 1 and "no such session log" in res.output


def _turns_log(path: Path) -> None:
    """A log of two whole turns: damage before the second ``turn/end`` is corruption to readers."""
    with JsonlLog(path, header=SessionHeader(id="s1")) as log:
        for turn in (1, 2):
            log.append("turn/start", {"turn": turn})
            log.append("fsm/note", {"turn": turn}, ignorable=True)
            log.append("turn/end", {"turn": turn})


def test_repair_removes_one_stray_line_even_before_a_later_turn_end(tmp_path: Path) -> None:
    """Readers refuse the log (damage before a later ``turn/end`` is corruption, as DSH reads
    it); repair removes the one line that is not JSON when the rest reads cleanly, saved aside."""
    log_path = tmp_path / "log.jsonl"
    _turns_log(log_path)
    lines = log_path.read_bytes().splitlines(keepends=True)
    lines.insert(3, b"garbage \xff\n")
    log_path.write_bytes(b"".join(lines))
    with pytest.raises(LogFormatError, match=r"a later turn/end exists \(fsm-stage repair LOG removes"):
        read_log(log_path)
    summary = JsonlLog.repair(log_path)
    assert "removed the damaged line 4" in summary and "every other line kept" in summary
    assert [e.type for e in read_log(log_path).events].count("turn/end") == 2
    (backup,) = tmp_path.glob("log.jsonl.damaged-*")
    assert backup.read_bytes() == b"garbage \xff\n"


def test_repair_refuses_corruption_that_one_removed_line_does_not_clear(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    _turns_log(log_path)
    lines = log_path.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"type":"fsm/note","seq":' + b"\xff garbage\n"  # an event line: its seq is lost
    lines.insert(2, b"garbage\n")
    log_path.write_bytes(b"".join(lines))
    before = log_path.read_bytes()
    with pytest.raises(LogFormatError, match="a later turn/end exists"):
        JsonlLog.repair(log_path)
    assert log_path.read_bytes() == before and not list(tmp_path.glob("log.jsonl.damaged-*"))
