"""Shared file I/O: user-named inputs give one-line errors; atomic writes keep umask permissions."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm_stage.errors import UserError
from fsm_stage.fileio import InputFileError, atomic_write, output_error, read_text_input


def test_read_text_input_reads_utf8(tmp_path: Path) -> None:
    p = tmp_path / "g.yaml"
    p.write_text("name: é\n", encoding="utf-8")
    assert read_text_input(p) == "name: é\n"


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "it is a directory"),
        (lambda p: p.write_bytes(b"a\x00b"), "binary file"),
        (lambda p: p.write_bytes(b"name: \xff\n"), "not UTF-8 text (byte 6 is 0xff)"),
    ],
)
def test_read_text_input_errors_are_one_line(
    tmp_path: Path, make: Callable[[Path], object], fragment: str
) -> None:
    p = tmp_path / "in.yaml"
    make(p)
    with pytest.raises(InputFileError) as info:
        read_text_input(p, what="stage graph")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{p}: cannot read stage graph: ")
    assert fragment in message


def test_atomic_write_replaces_and_uses_umask_permissions(tmp_path: Path) -> None:
    p = tmp_path / "out.svg"
    p.write_bytes(b"old")
    old_mask = os.umask(0o022)
    try:
        atomic_write(p, b"new")
    finally:
        os.umask(old_mask)
    assert p.read_bytes() == b"new"
    assert p.stat().st_mode & 0o777 == 0o644
    assert [x.name for x in tmp_path.iterdir()] == ["out.svg"]


def test_atomic_write_into_missing_folder_leaves_nothing_and_maps_to_user_error(tmp_path: Path) -> None:
    p = tmp_path / "nodir" / "x.svg"
    with pytest.raises(OSError) as info:
        atomic_write(p, b"x")
    err = output_error(p, info.value, what="diagram")
    assert isinstance(err, UserError)
    assert str(err) == f"{p}: cannot write diagram: folder {p.parent} does not exist"
    assert list(tmp_path.iterdir()) == []
