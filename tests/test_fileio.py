"""Shared file I/O: user-named inputs give one-line errors; atomic writes keep umask permissions."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from unprivileged import as_nobody

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


def test_atomic_write_leaves_the_process_umask_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permissions come from the kernel applying the umask at creation: the process umask is
    never set to 0 and back, which another thread creating a file meanwhile would inherit."""
    def no_umask(mask: int) -> int:
        raise AssertionError("os.umask was called")

    old_mask = os.umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", no_umask)
        atomic_write(tmp_path / "a.txt", b"a")
    finally:
        monkeypatch.undo()
        os.umask(old_mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640


def test_atomic_write_with_an_explicit_mode_sets_it_exactly(tmp_path: Path) -> None:
    old_mask = os.umask(0o077)
    try:
        atomic_write(tmp_path / "a.txt", b"a", mode=0o664)
    finally:
        os.umask(old_mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o664


def test_atomic_write_takes_the_longest_file_name(tmp_path: Path) -> None:
    """The temporary sibling's name is bounded, so any name the folder takes can be written."""
    name = "n" * 255
    atomic_write(tmp_path / name, b"x")
    assert (tmp_path / name).read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_atomic_write_never_writes_through_a_planted_temporary_symlink(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary sibling is created exclusively: a name taken meanwhile (here a symlink
    planted under the first name tried) is skipped, never followed or overwritten."""
    import secrets

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    names = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    (tmp_path / ".out.txt.aaaaaaaaaaaa.tmp").symlink_to(outside)
    atomic_write(tmp_path / "out.txt", b"new")
    assert (tmp_path / "out.txt").read_bytes() == b"new"
    assert outside.read_text() == "keep"


@pytest.mark.parametrize("sync_folder", [False, True])
def test_atomic_write_syncs_the_file_and_the_folder_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync_folder: bool) -> None:
    """The file's data is always fsynced before the rename; the folder (so the new name
    survives a crash) only with ``sync_folder=True``."""
    import stat

    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    atomic_write(tmp_path / "out.txt", b"x", sync_folder=sync_folder)
    assert synced == (["file", "folder"] if sync_folder else ["file"])


def test_atomic_write_failure_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_text("x")  # a non-empty folder cannot be replaced
    with pytest.raises(OSError):
        atomic_write(tmp_path / "taken", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


@pytest.mark.parametrize("sync_folder", [False, True])
def test_atomic_write_into_a_folder_one_may_write_in_but_not_list(sync_folder: bool) -> None:
    """Writing a file by path needs write and search permission on its folder, not read
    permission; so does ``atomic_write`` (the folder's own fsync is then let be)."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="fsm-fileio-"))  # not under pytest's 0700 folders
    drop = top / "drop"
    try:
        drop.mkdir()
        top.chmod(0o711)
        drop.chmod(0o333)  # write + search for everyone, no read (root ignores it)
        def write() -> str:
            atomic_write(drop / "out.txt", b"x", sync_folder=sync_folder)
            return "written"

        assert as_nobody(write) == "ok:written"
        (drop / "out.txt").unlink()

        def write_without_o_path() -> str:  # as on macOS: a folder is opened only to read it
            import fsm_stage.fileio as fileio

            saved, fileio.SEARCH_FLAGS = fileio.SEARCH_FLAGS, fileio.FOLDER_FLAGS
            try:
                atomic_write(drop / "out.txt", b"x", sync_folder=sync_folder)
            finally:
                fileio.SEARCH_FLAGS = saved
            return "written"

        assert as_nobody(write_without_o_path) == "ok:written"
        drop.chmod(0o755)
        assert (drop / "out.txt").read_bytes() == b"x"
        assert [p.name for p in drop.iterdir()] == ["out.txt"]
    finally:
        drop.chmod(0o755)
        shutil.rmtree(top)


def test_atomic_write_with_a_strict_mode_never_exposes_the_data_under_looser_bits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With an explicit ``mode`` the temporary file is created for its owner only and gets
    ``mode`` after the data is written, so nobody can open it meanwhile under the umask's
    looser bits (an open descriptor keeps reading what is written later)."""
    seen: list[int] = []
    real_write = os.write

    def recording_write(fd: int, data: object) -> int:
        seen.append(os.fstat(fd).st_mode & 0o777)
        return real_write(fd, data)  # type: ignore[arg-type]

    old_mask = os.umask(0o022)
    try:
        monkeypatch.setattr(os, "write", recording_write)
        atomic_write(tmp_path / "secret", b"s" * 10, mode=0o640)
    finally:
        monkeypatch.undo()
        os.umask(old_mask)
    assert seen and all(bits == 0o600 for bits in seen)
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("name", [".", "/", "..", "sub/..", "new.txt/", "sub/."])
def test_atomic_write_to_a_folders_own_name_says_it_is_a_directory(tmp_path: Path, name: str) -> None:
    (tmp_path / "sub").mkdir()
    target = name if name == "/" else os.path.join(tmp_path, name)  # as given: a Path drops "/" and "/."
    with pytest.raises(IsADirectoryError) as info:
        atomic_write(target, b"x")
    message = str(output_error(target, info.value, what="diagram"))
    assert message.endswith(": cannot write diagram: it is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"] and not any((tmp_path / "sub").iterdir())


@pytest.mark.parametrize("name", ["é" * 127, "日" * 85], ids=["latin", "cjk"])
def test_atomic_write_takes_the_longest_name_in_any_script(tmp_path: Path, name: str) -> None:
    """The temporary sibling's name is cut by bytes, not characters (127 x "é" is 254 bytes)."""
    atomic_write(tmp_path / name, b"x")
    assert (tmp_path / name).read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_atomic_write_works_by_path_where_the_system_has_no_dir_fd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a system without ``dir_fd`` (Windows) the same replace runs by path: the temporary
    sibling, its fsync and ``os.replace``, no folder descriptor (nor folder fsync)."""
    import stat

    monkeypatch.setattr(os, "supports_dir_fd", set())
    real_open, real_fsync = os.open, os.fsync
    opened: list[str] = []
    synced: list[str] = []

    def no_dir_fd_open(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        assert dir_fd is None
        opened.append(str(path))
        return real_open(path, flags, mode)

    def recording_fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "open", no_dir_fd_open)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    (tmp_path / "out.txt").write_bytes(b"old")
    atomic_write(tmp_path / "out.txt", b"new", mode=0o640, sync_folder=True)
    monkeypatch.undo()
    assert (tmp_path / "out.txt").read_bytes() == b"new"
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o640
    assert [os.path.dirname(p) for p in opened] == [str(tmp_path)] and synced == ["file"]
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_the_temporary_name_is_cut_at_a_whole_character_on_any_filesystem_encoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows encodes names as UTF-8 with surrogatepass, which cannot decode half a character:
    the temporary name is cut by characters until it fits, never by bytes then decoded."""
    monkeypatch.setattr(os, "supports_dir_fd", set())
    monkeypatch.setattr(os, "fsencode", lambda s: s.encode("utf-8", "surrogatepass"))
    monkeypatch.setattr(os, "fsdecode", lambda b: b.decode("utf-8", "surrogatepass"))
    name = "漢" * 70  # 210 bytes: the cut falls inside a character
    atomic_write(tmp_path / name, b"x")
    monkeypatch.undo()
    assert (tmp_path / name).read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_output_error_of_a_name_too_long_to_ask_about_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / ("n" * 300)
    with pytest.raises(OSError) as info:
        atomic_write(target, b"x")
    message = str(output_error(target, info.value, what="diagram"))
    assert message.startswith(f"{target}: cannot write diagram: ") and "\n" not in message
