"""Hardening: handoff writes under a symlink race, colliding session ids, terminal review digits."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from fsm_stage.handoff import (
    HandoffPathError,
    LocalHandoffStore,
    MemoryHandoffStore,
    handoff_relative_path,
    session_segment,
)
from fsm_stage.reviews import Answer, Option, Question, ReviewDismissed, TerminalReviewChannel
from fsm_stage.text import visible


def test_symlink_swapped_during_writes_never_lands_outside_cwd(tmp_path: Path) -> None:
    """`.fsm` links to `a-real/b` inside the cwd while a racer flips `a-real` between a real folder
    and a link outside, during 2000 writes: resolving then opening by name let writes escape; none may."""
    cwd, outside = tmp_path / "ws", tmp_path / "outside"
    (outside / "b" / "handoff").mkdir(parents=True)
    (cwd / "a-real" / "b" / "handoff").mkdir(parents=True)
    (cwd / ".fsm").symlink_to("a-real/b")
    stop = threading.Event()

    def swap() -> None:
        real, stash = cwd / "a-real", cwd / "a-stash"
        while not stop.is_set():  # a-real: real folder, then briefly a link outside
            os.rename(real, stash)
            real.symlink_to(outside)
            real.unlink()
            os.rename(stash, real)

    racer = threading.Thread(target=swap)
    racer.start()
    try:
        store = LocalHandoffStore()
        refused = 0
        for i in range(2000):
            try:
                store.write(handoff_relative_path(".fsm/handoff", f"s{i}", "beta"), "x", cwd=str(cwd))
            except HandoffPathError:
                refused += 1
            except FileNotFoundError:  # the racer's folder was away for a moment
                pass
    finally:
        stop.set()
        racer.join()
    assert list((outside / "b" / "handoff").iterdir()) == []
    assert refused == 2000  # a symlinked component is refused every time, race or not


def test_symlinked_parent_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / ".fsm").symlink_to(tmp_path / "real")
    with pytest.raises(HandoffPathError, match="is a symlink") as err:
        LocalHandoffStore().write(handoff_relative_path(".fsm/handoff", "a", "beta"), "x", cwd=str(tmp_path))
    assert "\n" not in str(err.value)
    assert list((tmp_path / "real").iterdir()) == []


def test_confined_read_back(tmp_path: Path) -> None:
    rel = handoff_relative_path("handoff", "a", "beta")
    store = LocalHandoffStore()
    store.write(rel, "# Doc", cwd=str(tmp_path))
    assert store.read(rel, cwd=str(tmp_path)) == "# Doc"


def test_lone_surrogate_handoff_is_a_one_line_error(tmp_path: Path) -> None:
    """A model's JSON can carry a lone surrogate; the write is refused in one line, not a
    UnicodeEncodeError, by the local store and the in-memory double alike."""
    rel = handoff_relative_path("handoff", "a", "beta")
    with pytest.raises(HandoffPathError, match="lone surrogate"):
        LocalHandoffStore().write(rel, "x\ud800", cwd=str(tmp_path))
    assert not (tmp_path / "handoff" / "a" / "beta.md").exists()
    memory = MemoryHandoffStore()
    with pytest.raises(HandoffPathError, match=r"lone surrogate \(U\+D800\) at character 1"):
        memory.write(rel, "x\ud800", cwd=None)
    assert memory.writes == []


@pytest.mark.parametrize("ids", [("会话一", "会话二"), ("user 1", "user/1", "user:1", "user-1"),
                                 ("", ".", "..", "session")])
def test_ids_that_sanitise_alike_get_distinct_folders(ids: tuple[str, ...]) -> None:
    folders = {session_segment(i) for i in ids}
    assert len(folders) == len(ids)
    assert all("/" not in f and f not in ("", ".", "..") and len(f) <= 128 for f in folders)


@pytest.mark.parametrize("sid", ["abc-123", "agent-1", "a.b_c", "session-aaa"])
def test_safe_ids_keep_their_seed_folder(sid: str) -> None:
    assert session_segment(sid) == sid


Q = Question("r", "Review", "Go?", (Option("Approve", "go"), Option("Keep", "stay")))


def _ask(text_in: str) -> list[Answer] | BaseException:
    box: list[list[Answer] | BaseException] = []

    @click.command()
    def review() -> None:
        try:
            box.append(TerminalReviewChannel()._ask_sync((Q,)))
        except ReviewDismissed as exc:
            box.append(exc)

    result = CliRunner().invoke(review, input=text_in)
    assert result.exception is None, result.output
    return box[0]


@pytest.mark.parametrize("odd", ["¹", "①", "٣", "9" * 5000])
def test_non_ascii_digits_ask_again(odd: str) -> None:
    assert _ask(f"{odd}\n1\n") == [Answer("r", ("Approve",))]


def test_visible_escapes_control_characters() -> None:
    assert visible("a\x1b[2Jb\x07\x00") == "a\\x1b[2Jb\\x07\\x00"
    assert visible("plain é 中") == "plain é 中"
