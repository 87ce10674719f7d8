"""Handoff paths and writes: session segments, confinement to the cwd, symlinks, atomicity.

Spec: docs/contracts.md (S69–S72), and path attacks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from fsm_stage.errors import UserError
from fsm_stage.handoff import (
    HandoffPathError,
    LocalHandoffStore,
    MemoryHandoffStore,
    handoff_relative_path,
    session_segment,
)


def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


# ----------------------------------------------------------------------------- segments


@pytest.mark.parametrize(
    ("session_id", "segment"),
    [
        ("agent-1", "agent-1"),
        ("odd id/../x", "odd-id-..-x"),  # S70
        ("", "session"),  # S72a
        (".", "session"),
        ("..", "session"),
        ("a:b\\c", "a-b-c"),  # S72b
        ("é", "-"),  # S72c: one dash per code point
        ("x😀y", "x-y"),
        ("/etc/passwd", "-etc-passwd"),
        ("../../..", "..-..-.."),
        ("a\x00b", "a-b"),
    ],
)
def test_session_segment_sanitises_ids_S70_S72(session_id: str, segment: str) -> None:
    """S70, S72a–c: every code point outside [A-Za-z0-9._-] becomes '-'; '', '.', '..' → session."""
    got = session_segment(session_id)
    # Ids the seed rule changes keep its text, then '-' and 16 hex digits of their own hash.
    if segment == session_id:
        assert got == segment
    else:
        assert re.fullmatch(re.escape(segment) + "-[0-9a-f]{16}", got)
    assert "/" not in segment and segment not in ("", ".", "..")


def test_relative_path_layout_S72d() -> None:
    """S72d: handoff_dir 'docs/handoffs' gives docs/handoffs/<seg>/<stage>.md."""
    assert handoff_relative_path("docs/handoffs", "agent-1", "beta") == PurePosixPath(
        "docs/handoffs/agent-1/beta.md"
    )
    expected = PurePosixPath(f"handoff/{session_segment('odd id/../x')}/beta.md")
    assert handoff_relative_path("handoff", "odd id/../x", "beta") == expected


@pytest.mark.parametrize("handoff_dir", ["/tmp/x", "..", "../outside", "a/../../b", ".", "  ", "a\x00b"])
def test_handoff_dir_escaping_the_cwd_is_refused(handoff_dir: str) -> None:
    """Absolute or escaping handoff folders are refused with a clear UserError."""
    with pytest.raises(HandoffPathError) as err:
        handoff_relative_path(handoff_dir, "agent-1", "beta")
    assert isinstance(err.value, UserError)
    assert "handoff_dir" in str(err.value)


def test_unsafe_stage_name_is_refused() -> None:
    with pytest.raises(HandoffPathError):
        handoff_relative_path("handoff", "agent-1", "../x")


# ----------------------------------------------------------------------------- local store


def test_local_store_writes_inside_cwd_and_returns_absolute_path_S52(tmp_path: Path) -> None:
    """S52, S72d: the document lands at <cwd>/<dir>/<seg>/<stage>.md, byte-exact, path returned."""
    store = LocalHandoffStore()
    text = "# Implement\n\n- Completed: exploration ✓\n"
    path = store.write(handoff_relative_path("docs/handoffs", "agent-1", "beta"), text, cwd=str(tmp_path))
    assert path == str(tmp_path / "docs/handoffs/agent-1/beta.md")
    assert Path(path).read_bytes() == text.encode("utf-8")
    assert _all_files(tmp_path) == {tmp_path / "docs/handoffs/agent-1/beta.md"}  # no temp file left


@pytest.mark.parametrize("session_id", ["odd id/../x", "../../etc", "/abs/path", "", "..", "a/b/c"])
def test_attacking_session_ids_stay_inside_cwd_S70(tmp_path: Path, session_id: str) -> None:
    """S70: ids with '/', '..', empty or absolute never leave <cwd>/handoff (one folder deep)."""
    cwd = tmp_path / "ws"
    cwd.mkdir()
    store = LocalHandoffStore()
    path = Path(store.write(handoff_relative_path("handoff", session_id, "beta"), "x", cwd=str(cwd)))
    assert path.parent.parent == cwd / "handoff"
    assert path.resolve().is_relative_to(cwd.resolve())
    assert _all_files(tmp_path) == {path}


def test_second_write_overwrites_atomically_S72g(tmp_path: Path) -> None:
    """S72g: a second full transition to the same stage overwrites the file (new inode, no temp)."""
    store = LocalHandoffStore()
    rel = handoff_relative_path("handoff", "agent-1", "beta")
    p1 = Path(store.write(rel, "# First", cwd=str(tmp_path)))
    inode = p1.stat().st_ino
    os.link(p1, tmp_path / "hardlink.md")  # a hard link elsewhere keeps the old content
    p2 = Path(store.write(rel, "# Second", cwd=str(tmp_path)))
    assert p1 == p2
    assert p2.read_text() == "# Second"
    assert p2.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert (tmp_path / "hardlink.md").read_text() == "# First"
    assert sorted(p.name for p in p2.parent.iterdir()) == ["beta.md"]


def test_symlinked_handoff_folder_is_refused(tmp_path: Path) -> None:
    """A handoff folder that is a symlink (here pointing outside) is refused; nothing written."""
    cwd, outside = tmp_path / "ws", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    (cwd / "handoff").symlink_to(outside)
    with pytest.raises(HandoffPathError, match="symlink"):
        LocalHandoffStore().write(handoff_relative_path("handoff", "agent-1", "beta"), "x", cwd=str(cwd))
    assert list(outside.iterdir()) == []


def test_symlinked_handoff_folder_inside_cwd_is_refused_too(tmp_path: Path) -> None:
    """The handoff folder itself must be a real folder even when the link stays inside the cwd."""
    (tmp_path / "real").mkdir()
    (tmp_path / "handoff").symlink_to(tmp_path / "real")
    with pytest.raises(HandoffPathError, match="symlink"):
        LocalHandoffStore().write(handoff_relative_path("handoff", "a", "beta"), "x", cwd=str(tmp_path))
    assert list((tmp_path / "real").iterdir()) == []


def test_symlinked_session_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cwd = tmp_path / "ws"
    (cwd / "handoff").mkdir(parents=True)
    (cwd / "handoff" / "agent-1").symlink_to(outside)
    with pytest.raises(HandoffPathError, match="symlink"):
        LocalHandoffStore().write(handoff_relative_path("handoff", "agent-1", "beta"), "x", cwd=str(cwd))
    assert list(outside.iterdir()) == []


def test_symlinked_document_is_refused_and_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    cwd = tmp_path / "ws"
    (cwd / "handoff" / "agent-1").mkdir(parents=True)
    (cwd / "handoff" / "agent-1" / "beta.md").symlink_to(victim)
    with pytest.raises(HandoffPathError, match="symlink"):
        LocalHandoffStore().write(handoff_relative_path("handoff", "agent-1", "beta"), "x", cwd=str(cwd))
    assert victim.read_text() == "precious"


def test_parent_component_symlink_outside_is_refused(tmp_path: Path) -> None:
    """A folder above the handoff folder that links outside the cwd is refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    cwd = tmp_path / "ws"
    cwd.mkdir()
    (cwd / "docs").symlink_to(outside)
    with pytest.raises(HandoffPathError, match="is a symlink"):
        LocalHandoffStore().write(handoff_relative_path("docs/handoffs", "a", "beta"), "x", cwd=str(cwd))
    assert list(outside.iterdir()) == []


def test_parent_component_symlink_inside_is_refused_too(tmp_path: Path) -> None:
    """A folder above the handoff folder is never followed, even to a folder inside the cwd:
    following it meant resolving then opening, which a swapped link could redirect."""
    (tmp_path / "documentation").mkdir()
    (tmp_path / "docs").symlink_to(tmp_path / "documentation")
    rel = handoff_relative_path("docs/handoffs", "a", "beta")
    with pytest.raises(HandoffPathError, match="is a symlink"):
        LocalHandoffStore().write(rel, "x", cwd=str(tmp_path))
    assert list((tmp_path / "documentation").iterdir()) == []


def test_missing_or_relative_cwd_is_a_clear_error(tmp_path: Path) -> None:
    """S72e: without a session cwd the store's default root is used; with neither, a clear error."""
    rel = handoff_relative_path("handoff", "a", "beta")
    with pytest.raises(HandoffPathError, match="no cwd"):
        LocalHandoffStore().write(rel, "x", cwd=None)
    with pytest.raises(HandoffPathError, match="absolute"):
        LocalHandoffStore().write(rel, "x", cwd="relative/dir")
    with pytest.raises(HandoffPathError, match="does not exist"):
        LocalHandoffStore().write(rel, "x", cwd=str(tmp_path / "missing"))
    path = LocalHandoffStore(default_root=tmp_path).write(rel, "x", cwd=None)
    assert path == str(tmp_path / "handoff/a/beta.md")


def test_file_in_place_of_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "handoff").write_text("not a folder")
    with pytest.raises(HandoffPathError, match="not a folder"):
        LocalHandoffStore().write(handoff_relative_path("handoff", "a", "beta"), "x", cwd=str(tmp_path))


def test_failed_write_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails (disk full) propagates the OS error and leaves no partial file (S49)."""
    real_write = os.write

    def full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        LocalHandoffStore().write(handoff_relative_path("handoff", "a", "beta"), "x", cwd=str(tmp_path))
    monkeypatch.setattr(os, "write", real_write)
    assert _all_files(tmp_path) == set()


# ----------------------------------------------------------------------------- memory store


def test_memory_store_records_writes_and_policies_S72e_S72f() -> None:
    """S72e/f: default root without cwd; the policy given (or None) is recorded per write."""
    store = MemoryHandoffStore(default_root="/srv")
    rel = handoff_relative_path("handoff", "agent-1", "beta")
    assert store.write(rel, "a", cwd=None) == "/srv/handoff/agent-1/beta.md"
    assert store.write(rel, "b", cwd="/workspace", policy={"mode": "workspace-write"}) == (
        "/workspace/handoff/agent-1/beta.md"
    )
    assert [(w.path, w.text) for w in store.writes] == [
        ("/srv/handoff/agent-1/beta.md", "a"),
        ("/workspace/handoff/agent-1/beta.md", "b"),
    ]
    assert store.policies == [None, {"mode": "workspace-write"}]
    store.fail_with = OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        store.write(rel, "c", cwd="/workspace")
    assert len(store.writes) == 2



def test_non_blocking_store_is_written_without_a_thread_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store declaring ``blocking = False`` (the in-memory one) is called on the event loop;
    the handoff document is still written before the review (S52)."""
    import asyncio

    from .harness import Harness

    def no_threads(*_a: object, **_k: object) -> object:
        raise AssertionError("asyncio.to_thread used for a non-blocking store")

    monkeypatch.setattr(asyncio, "to_thread", no_threads)
    h = Harness()
    h.open_turn()
    assert h.review is not None
    h.review.approve()
    result = h.goto("beta", "# Handoff\n\nDone with alpha.")
    assert not result.is_error
    assert h.handoffs is not None
    assert [w.text for w in h.handoffs.writes] == ["# Handoff\n\nDone with alpha."]


def test_store_without_blocking_attribute_is_written_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store that does not declare ``blocking`` is assumed to do disk I/O: its write runs
    through ``asyncio.to_thread`` so an fsync never stalls the event loop."""
    import asyncio

    from .harness import Harness

    class PlainStore(MemoryHandoffStore):
        """The in-memory store with the ``blocking`` declaration removed below."""

    monkeypatch.delattr(MemoryHandoffStore, "blocking")
    calls: list[str] = []
    real = asyncio.to_thread

    async def counting(func: Callable[..., object], /, *args: object, **kwargs: object) -> object:
        calls.append(getattr(func, "__name__", "?"))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    h = Harness(handoffs=PlainStore())
    h.open_turn()
    assert h.review is not None
    h.review.approve()
    result = h.goto("beta", "# Handoff\n\nDone with alpha.")
    assert not result.is_error
    assert calls == ["write"]


def test_local_store_writes_a_small_handoff_inline_and_a_large_one_in_a_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``LocalHandoffStore`` writes a document up to ``INLINE_HANDOFF_CHARS`` on the event loop
    (no thread hop); a longer one goes through ``asyncio.to_thread``. Both land on disk (S52)."""
    import asyncio

    from fsm_stage.handoff import LocalHandoffStore
    from fsm_stage.stage_switch.goto import INLINE_HANDOFF_CHARS

    from .harness import Harness

    calls: list[str] = []
    real = asyncio.to_thread

    async def counting(func: Callable[..., object], /, *args: object, **kwargs: object) -> object:
        calls.append(getattr(func, "__name__", "?"))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    for size, expected_calls in ((INLINE_HANDOFF_CHARS, []), (INLINE_HANDOFF_CHARS + 1, ["write"])):
        calls.clear()
        cwd = tmp_path / str(size)
        cwd.mkdir()
        h = Harness(handoffs=LocalHandoffStore(), cwd=str(cwd))
        h.open_turn()
        assert h.review is not None
        h.review.approve()
        text = "# Handoff\n\n" + "x" * (size - len("# Handoff\n\n"))
        result = h.goto("beta", text)
        assert not result.is_error, result
        assert calls == expected_calls
        written = list(cwd.rglob("beta.md"))
        assert len(written) == 1 and written[0].read_text(encoding="utf-8") == text


def test_local_store_reads_through_folders_it_may_search_but_not_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LocalHandoffStore.read`` opens the cwd and each folder to search it only (``O_PATH``),
    as an open by path would: a folder of mode 0711 stays passable. A write opens them for
    reading, since the document's folder is fsynced after the rename."""
    if not hasattr(os, "O_PATH"):
        pytest.skip("this system has no O_PATH")
    store = LocalHandoffStore()
    relative = PurePosixPath("handoff/s1/beta.md")
    store.write(relative, "text", cwd=str(tmp_path))
    flags_of: dict[str, list[int]] = {}
    real_open = os.open

    def recording_open(name: str, flags: int, *args: object, **kwargs: object) -> int:
        flags_of.setdefault(os.path.basename(str(name)), []).append(flags)
        return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", recording_open)
    assert store.read(relative, cwd=str(tmp_path)) == "text"
    assert all(flags_of[name] == [flags_of[name][0]] and flags_of[name][0] & os.O_PATH
               for name in (tmp_path.name, "handoff", "s1"))
    assert not flags_of["beta.md"][0] & os.O_PATH
    flags_of.clear()
    store.write(relative, "new", cwd=str(tmp_path))
    assert not any(f & os.O_PATH for name in (tmp_path.name, "handoff", "s1") for f in flags_of[name])
    monkeypatch.undo()
    assert store.read(relative, cwd=str(tmp_path)) == "new"


def test_local_store_makes_every_folder_it_creates_durable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder the store creates is fsynced into its parent (else a crash could lose the new
    folder, and the fsynced document in it with it); then the document and its folder."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        info = os.fstat(fd)
        synced.append(next((str(p.relative_to(tmp_path)) for p in [tmp_path, *tmp_path.rglob("*")]
                            if p.stat().st_ino == info.st_ino), "?"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    LocalHandoffStore().write(PurePosixPath("handoff/s1/beta.md"), "text", cwd=str(tmp_path))
    assert synced[:2] == [".", "handoff"]  # each new folder's parent, as it was created
    assert synced[-1] == "handoff/s1" and len(synced) == 4  # the document (temporary name), its folder
    synced.clear()
    LocalHandoffStore().write(PurePosixPath("handoff/s1/beta.md"), "again", cwd=str(tmp_path))
    assert synced[-1] == "handoff/s1" and len(synced) == 2  # nothing created: the document and its folder
