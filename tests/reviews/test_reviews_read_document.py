"""The safe re-read of a handoff document a review names (``read_handoff_document``): what it
returns, what it refuses, and that it reads exactly the file's bytes whatever their size."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews._answer import MAX_HANDOFF_BYTES, read_handoff_document
from fsm_stage.runtime.session import Session


def _session(cwd: Path | None) -> Session:
    return Session(MemoryLog(SessionHeader("read-doc", cwd=None if cwd is None else str(cwd))))


@pytest.mark.parametrize("size", [0, 1, 59, 4095, 4096, 4097, 70_000, MAX_HANDOFF_BYTES])
def test_a_document_reads_back_exactly_at_every_size(tmp_path: Path, size: int) -> None:
    text = ("é" * size)[: size // 2] + "x" * (size - 2 * (size // 2))  # UTF-8 of exactly `size` bytes
    doc = tmp_path / "handoff" / "s" / "next.md"
    doc.parent.mkdir(parents=True)
    doc.write_bytes(text.encode("utf-8"))
    assert len(doc.read_bytes()) == size
    assert read_handoff_document(_session(tmp_path), str(doc)) == text


def test_a_document_over_the_limit_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "big.md"
    doc.write_bytes(b"x" * (MAX_HANDOFF_BYTES + 1))
    with pytest.raises(OSError, match=f"larger than {MAX_HANDOFF_BYTES} bytes"):
        read_handoff_document(_session(tmp_path), str(doc))


def test_a_document_outside_the_session_cwd_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    outside = tmp_path / "elsewhere.md"
    outside.write_text("secret")
    with pytest.raises(PermissionError, match="outside the session cwd"):
        read_handoff_document(_session(tmp_path / "ws"), str(outside))
    # a path that climbs out through a symlinked folder inside the cwd is outside too
    (tmp_path / "ws" / "link").symlink_to(tmp_path)
    with pytest.raises(PermissionError, match="outside the session cwd"):
        read_handoff_document(_session(tmp_path / "ws"), str(tmp_path / "ws" / "link" / "elsewhere.md"))


def test_without_a_cwd_any_regular_file_reads(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("## Done\n")
    assert read_handoff_document(_session(None), str(doc)) == "## Done\n"


def test_a_symlinked_document_a_fifo_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "real.md"
    target.write_text("real")
    (tmp_path / "link.md").symlink_to(target)
    with pytest.raises(OSError):
        read_handoff_document(_session(tmp_path), str(tmp_path / "link.md"))
    os.mkfifo(tmp_path / "pipe.md")  # opened non-blocking: refused, never waited on
    with pytest.raises(OSError, match="not a regular file"):
        read_handoff_document(_session(tmp_path), str(tmp_path / "pipe.md"))
    with pytest.raises(FileNotFoundError):
        read_handoff_document(_session(tmp_path), str(tmp_path / "gone.md"))


def test_bytes_that_are_not_utf8_raise_a_decode_error(tmp_path: Path) -> None:
    doc = tmp_path / "bad.md"
    doc.write_bytes(b"ok \xff\xfe")
    with pytest.raises(UnicodeDecodeError):
        read_handoff_document(_session(tmp_path), str(doc))


def test_a_document_that_grows_after_fstat_is_read_to_its_end(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "grows.md"
    doc.write_text("a" * 10)
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        with open(doc, "a") as more:  # another writer appends once fstat has seen 10 bytes
            more.write("b" * 5000)
        return info

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    assert read_handoff_document(_session(tmp_path), str(doc)) == "a" * 10 + "b" * 5000


def test_a_document_that_grows_past_the_limit_after_fstat_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "grows.md"
    doc.write_text("a" * 10)
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        with open(doc, "ab") as more:
            more.write(b"b" * MAX_HANDOFF_BYTES)
        return info

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    with pytest.raises(OSError, match=f"larger than {MAX_HANDOFF_BYTES} bytes"):
        read_handoff_document(_session(tmp_path), str(doc))
