"""Where the system has no ``dir_fd`` and no ``O_NONBLOCK`` (Windows), the handoff store, a
review's re-read of its document and the log reader work by path, with the same refusals.

``no_dir_fd`` makes this Linux process answer as Windows does: ``os.supports_dir_fd`` is empty,
any ``dir_fd`` raises ``NotImplementedError``, opening a folder raises ``PermissionError``, and
the package's ``O_NONBLOCK`` / ``O_NOFOLLOW`` flags are 0."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm_stage.errors import HandoffPathError
from fsm_stage.handoff import LocalHandoffStore, handoff_relative_path
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.memory import MemoryLog
from fsm_stage.runtime.session import Session

REL = handoff_relative_path("handoff", "agent-1", "beta")


def _no_dir_fd(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def call(*args: Any, **kwargs: Any) -> Any:
        if any(kwargs.get(k) is not None for k in ("dir_fd", "src_dir_fd", "dst_dir_fd")):
            raise NotImplementedError("dir_fd unavailable on this platform")
        return real(*args, **kwargs)
    return call


@pytest.fixture
def no_dir_fd(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsm_stage.fileio as fileio
    import fsm_stage.handoff as handoff
    import fsm_stage.log.dsh.opening as opening
    import fsm_stage.reviews._document as document

    real_open = os.open

    def windows_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd is not None:
            raise NotImplementedError("dir_fd unavailable on this platform")
        if os.path.isdir(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "supports_dir_fd", set())
    monkeypatch.setattr(os, "open", windows_open)
    for name in ("lstat", "stat", "mkdir", "unlink", "replace", "rename", "chmod", "rmdir"):
        monkeypatch.setattr(os, name, _no_dir_fd(getattr(os, name)))
    for module in (fileio, handoff, document):
        monkeypatch.setattr(module, "_NOFOLLOW", 0)
    for module in (document, opening):  # os keeps O_NONBLOCK: filelock's POSIX lock runs here
        monkeypatch.setattr(module, "_NONBLOCK", 0)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if not p.is_dir()}


def test_the_store_writes_replaces_and_reads_by_path(tmp_path: Path, no_dir_fd: None) -> None:
    store = LocalHandoffStore()
    path = store.write(REL, "# First ✓\n", cwd=str(tmp_path))
    assert path == str(tmp_path / "handoff/agent-1/beta.md")
    assert store.write(REL, "# Second\r\n", cwd=str(tmp_path)) == path
    assert Path(path).read_bytes() == b"# Second\r\n"  # byte-exact: no newline translation
    assert store.read(REL, cwd=str(tmp_path)) == "# Second\r\n"
    assert _files(tmp_path) == {Path(path)}  # no temporary file left
    with pytest.raises(FileNotFoundError):
        store.read(handoff_relative_path("handoff", "agent-1", "gamma"), cwd=str(tmp_path))


@pytest.mark.parametrize("link", ["handoff", "handoff/agent-1"])
def test_a_linked_folder_is_refused_by_path(tmp_path: Path, link: str, no_dir_fd: None) -> None:
    cwd, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    (cwd / link).parent.mkdir(parents=True, exist_ok=True)
    (cwd / link).symlink_to(outside)
    with pytest.raises(HandoffPathError, match="is a symlink"):
        LocalHandoffStore().write(REL, "x", cwd=str(cwd))
    with pytest.raises(HandoffPathError, match="is a symlink"):
        LocalHandoffStore().read(REL, cwd=str(cwd))
    assert list(outside.iterdir()) == []


def test_a_linked_document_is_refused_and_its_target_untouched(tmp_path: Path, no_dir_fd: None) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "ws/handoff/agent-1").mkdir(parents=True)
    (tmp_path / "ws/handoff/agent-1/beta.md").symlink_to(victim)
    with pytest.raises(HandoffPathError, match="symlink; refusing to write it"):
        LocalHandoffStore().write(REL, "x", cwd=str(tmp_path / "ws"))
    with pytest.raises(HandoffPathError, match="symlink; refusing to read it"):
        LocalHandoffStore().read(REL, cwd=str(tmp_path / "ws"))
    assert victim.read_text() == "precious"


def test_the_cwd_and_folders_are_checked_by_path(tmp_path: Path, no_dir_fd: None) -> None:
    with pytest.raises(HandoffPathError, match="does not exist"):
        LocalHandoffStore().write(REL, "x", cwd=str(tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    with pytest.raises(HandoffPathError, match="is not a folder"):
        LocalHandoffStore().write(REL, "x", cwd=str(tmp_path / "file"))
    (tmp_path / "handoff").write_text("a file")
    with pytest.raises(HandoffPathError, match="exists and is not a folder"):
        LocalHandoffStore().write(REL, "x", cwd=str(tmp_path))
    (tmp_path / "handoff").unlink()
    (tmp_path / "handoff/agent-1/beta.md").mkdir(parents=True)
    with pytest.raises(HandoffPathError, match="is not a regular file"):
        LocalHandoffStore().write(REL, "x", cwd=str(tmp_path))


def test_a_review_re_reads_its_document_by_path(tmp_path: Path, no_dir_fd: None) -> None:
    from fsm_stage.reviews._document import read_handoff_document

    (tmp_path / "ws/handoff").mkdir(parents=True)
    doc = tmp_path / "ws/handoff/beta.md"
    doc.write_bytes(b"# H\r\n")
    (tmp_path / "secret.md").write_text("outside")
    (tmp_path / "ws/handoff/link.md").symlink_to(doc)
    session = Session(JsonlLog(tmp_path / "s.jsonl", header=SessionHeader("s", cwd=str(tmp_path / "ws"))))
    try:
        assert read_handoff_document(session, str(doc)) == "# H\r\n"
        with pytest.raises(PermissionError):
            read_handoff_document(session, str(tmp_path / "secret.md"))
        with pytest.raises(OSError, match="is a link"):
            read_handoff_document(session, str(tmp_path / "ws/handoff/link.md"))
    finally:
        session.log.close()  # type: ignore[attr-defined]
    no_cwd = Session(MemoryLog(SessionHeader("s")))
    assert read_handoff_document(no_cwd, str(doc)) == "# H\r\n"
    with pytest.raises(OSError, match="is a link"):
        read_handoff_document(no_cwd, str(tmp_path / "ws/handoff/link.md"))


def test_a_full_reviewed_transition_runs_and_reads_back_by_path(tmp_path: Path, no_dir_fd: None) -> None:
    """The whole flow on a durable log: the document written, re-read at redemption (a document
    that could not be read would close the approval unapplied), the log read back."""
    import asyncio

    from fsm_stage.log.projections import fold_stage
    from fsm_stage.reviews import ScriptedReviewChannel
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.tools import ToolCall
    from fsm_stage.stage_switch import StageController
    from tests.stage_switch.harness import make_config

    runtime = Runtime(review=ScriptedReviewChannel().approve())
    runtime.attach(StageController(make_config(), handoffs=LocalHandoffStore()))
    path = tmp_path / "session.jsonl"
    with JsonlLog(path, header=SessionHeader(id="agent-1", cwd=str(tmp_path))) as log:
        agent = InboxAgent(Session(log))
        agent.session.append("turn/start", {"turn": 1})
        call = ToolCall.of("goto_stage", {"stage": "beta", "handoff": "# Done\n- alpha\n"})
        result = asyncio.run(runtime.call_tool(agent, call))
        assert not result.is_error, result.text
        runtime.pre_step(agent, [])
    back = read_log(path, strict=True)
    assert fold_stage(back.events) == "beta"
    redeemed = [e.data for e in back.events if e.type == "fsm/review/redeemed"]
    assert [(r["applied"], r["reason"]) for r in redeemed] == [(True, None)]
    assert (tmp_path / "handoff/agent-1/beta.md").read_text() == "# Done\n- alpha\n"
