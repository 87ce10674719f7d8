"""The safe re-read of a handoff document a review names (``read_handoff_document``): what it
returns, what it refuses, and that it reads exactly the file's bytes whatever their size."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from unprivileged import as_nobody

from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.reviews._document import MAX_HANDOFF_BYTES, read_handoff_document
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


def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The folders are resolved and checked, then opened one by one without following a
    symlink: a folder turned into a symlink to outside the cwd in between is not followed."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "handoff").mkdir(parents=True)
    (ws / "handoff" / "next.md").write_text("approved text")
    outside.mkdir()
    (outside / "next.md").write_text("SECRET")
    real_realpath = os.path.realpath

    def resolve_then_swap(p: str, *, strict: bool = False) -> str:
        got = real_realpath(p, strict=strict)
        if p.endswith("handoff"):  # the document's folder has been checked: swap it now
            (ws / "handoff").rename(ws / "was-handoff")
            (ws / "handoff").symlink_to(outside)
        return got

    monkeypatch.setattr(os.path, "realpath", resolve_then_swap)
    with pytest.raises(OSError) as caught:
        read_handoff_document(_session(ws), str(ws / "handoff" / "next.md"))
    assert not isinstance(caught.value, PermissionError)  # refused by the walk, not by the check
    monkeypatch.undo()
    assert (ws / "handoff").is_symlink()  # the swap happened, and SECRET was never returned


def test_a_symlinked_folder_that_stays_inside_the_cwd_still_reads(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "doc.md").write_text("inside")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_handoff_document(_session(tmp_path), str(tmp_path / "link" / "doc.md")) == "inside"


@pytest.mark.parametrize("path", ["bad\0name.md", b"bytes.md", None, 7])
def test_a_path_that_is_not_a_usable_string_is_an_oserror(tmp_path: Path, path: object) -> None:
    for cwd in (tmp_path, None):
        with pytest.raises(OSError, match="not a usable path"):
            read_handoff_document(_session(cwd), path)  # type: ignore[arg-type]


def test_a_session_cwd_holding_a_nul_is_an_oserror(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("x")
    with pytest.raises(OSError, match="not a usable path"):
        read_handoff_document(_session(Path(str(tmp_path) + "\0evil")), str(doc))


def test_names_of_folders_are_refused_as_documents(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    sub = str(tmp_path / "sub")
    for path in (str(tmp_path), str(tmp_path) + "/", sub + "/..", sub + "/."):
        with pytest.raises(OSError):
            read_handoff_document(_session(tmp_path), path)


def test_a_symlink_chain_too_long_to_resolve_is_an_oserror(tmp_path: Path) -> None:
    (tmp_path / "l0").mkdir()
    for i in range(1, 1500):  # deeper than realpath follows (recursion) or the kernel does (ELOOP)
        (tmp_path / f"l{i}").symlink_to(tmp_path / f"l{i - 1}")
    for cwd in (tmp_path, None):
        with pytest.raises(OSError):
            read_handoff_document(_session(cwd), str(tmp_path / "l1499" / "doc.md"))


@pytest.mark.skipif(not Path("/proc/self/cmdline").is_file(), reason="no /proc on this system")
def test_a_file_that_reports_size_zero_is_read_to_its_end() -> None:
    """A pseudo-file reports size 0 and may return nothing from a non-zero offset: the first
    read takes a whole chunk."""
    want = Path("/proc/self/cmdline").read_bytes().decode("utf-8")
    assert os.stat("/proc/self/cmdline").st_size == 0 and len(want) > 1
    assert read_handoff_document(_session(None), "/proc/self/cmdline") == want


def test_a_lone_surrogate_in_the_path_or_the_cwd_is_an_oserror(tmp_path: Path) -> None:
    bad = "\ud800"  # a hostile log's JSON may hold one; the filesystem encoding cannot
    with pytest.raises(OSError, match="not a usable path"):
        read_handoff_document(_session(tmp_path), str(tmp_path / f"{bad}.md"))
    with pytest.raises(OSError, match="not a usable path"):
        read_handoff_document(_session(Path(f"{tmp_path}/{bad}")), str(tmp_path / "doc.md"))
    with pytest.raises(OSError, match="not a usable path"):
        read_handoff_document(_session(None), f"{bad}.md")


@pytest.mark.parametrize("kind", ["missing", "file", "loop"])
def test_a_dotdot_after_something_that_is_not_a_folder_is_refused(tmp_path: Path, kind: str) -> None:
    """``x/../doc.md`` is opened by the system only when x is a folder: a missing name, a file
    or a symlink loop before the ``..`` is refused, not cancelled as text."""
    (tmp_path / "doc.md").write_text("approved text")
    if kind == "file":
        (tmp_path / "x").write_text("a file")
    elif kind == "loop":
        (tmp_path / "x").symlink_to(tmp_path / "x")
    with pytest.raises(OSError):
        open(tmp_path / "x" / ".." / "doc.md").close()  # the system refuses it
    with pytest.raises(OSError):
        read_handoff_document(_session(tmp_path), f"{tmp_path}/x/../doc.md")


def test_the_folders_are_opened_to_search_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening each folder needs no read permission on it (``O_PATH``), as an open by path needs
    none: a folder the reader may pass through but not list stays passable."""
    if not hasattr(os, "O_PATH"):
        pytest.skip("this system has no O_PATH")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "doc.md").write_text("text")
    flags_of: dict[str, int] = {}
    real_open = os.open

    def recording_open(name: str, flags: int, *args: object, **kwargs: object) -> int:
        flags_of[os.path.basename(str(name))] = flags
        return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", recording_open)
    assert read_handoff_document(_session(tmp_path), str(tmp_path / "a" / "b" / "doc.md")) == "text"
    assert all(flags_of[name] & os.O_PATH for name in (tmp_path.name, "a", "b"))
    assert not flags_of["doc.md"] & os.O_PATH  # the document itself is opened to read


def _read_as_unprivileged(cwd: Path, path: Path) -> str:
    """``read_handoff_document`` as ``nobody`` (``as_nobody``); raises ``PermissionError``
    with the child's error text when the read failed."""
    got = as_nobody(lambda: read_handoff_document(_session(cwd), str(path)))
    if not got.startswith("ok:"):
        raise PermissionError(got)
    return got[3:]


def test_a_folder_the_reader_may_pass_but_not_list_stays_passable() -> None:
    """Search permission is all an open by path needs on a folder; so it is for the re-read."""
    top = Path(tempfile.mkdtemp(prefix="fsm-read-doc-"))  # not under pytest's 0700 folders
    try:
        (top / "notes").mkdir()
        (top / "notes" / "doc.md").write_text("text")
        (top / "notes" / "doc.md").chmod(0o644)
        top.chmod(0o711)
        (top / "notes").chmod(0o311)  # search, no read (for everyone but root)
        assert _read_as_unprivileged(top, top / "notes" / "doc.md") == "text"
        (top / "notes").chmod(0o600)  # no search: refused, as an open by path would be
        with pytest.raises(PermissionError):
            _read_as_unprivileged(top, top / "notes" / "doc.md")
    finally:
        (top / "notes").chmod(0o755)
        shutil.rmtree(top)
