"""``simulate --log``: the one-writer lock, refusing to overwrite inputs and non-logs, ``--force``,
and no leftover temporary files whatever happens (the lock file stays)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sim_helpers import GRAPHS, SCENARIOS, graph_ref, invoke

from fsm_stage.driver import ModelReply
from fsm_stage.errors import LogLockedError, UserError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog, lock_path
from fsm_stage.runtime.assembly import Request
from fsm_stage.scenario import load_scenario
from fsm_stage.simulate import SimulationError, simulate

SUBAGENT = SCENARIOS / "subagent.yaml"


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _one_line_error(code: int, err: str) -> str:
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_a_live_writer_keeps_its_log(tmp_path: Path) -> None:
    """A JsonlLog writer holds the log; simulate --log (even with --force) gets the
    one-line LogLockedError, exits 1 and leaves the writer's file and appends intact."""
    target = tmp_path / "held.jsonl"
    with JsonlLog(target, header=SessionHeader(id="held", cwd=str(tmp_path))) as writer:
        writer.append("user/message", {"role": "user", "content": [{"type": "text", "text": "one"}],
                                       "source": {"kind": "user"}})
        before = target.read_bytes()
        for extra in ((), ("--force",)):
            code, _, err = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd",
                                   str(tmp_path / "w"), *extra)
            assert "is locked by another writer" in _one_line_error(code, err)
            assert target.read_bytes() == before
        writer.append("user/message", {"role": "user", "content": [{"type": "text", "text": "two"}],
                                       "source": {"kind": "user"}})
    texts = [e.data["content"][0]["text"] for e in read_log(target, strict=True).events]
    assert texts == ["one", "two"]
    assert ".held.jsonl" not in " ".join(_listing(tmp_path))


def test_a_live_writer_of_a_new_log_blocks_the_python_api_too(tmp_path: Path) -> None:
    target = tmp_path / "new.jsonl"
    with JsonlLog(target, header=SessionHeader(id="x", cwd=str(tmp_path))), pytest.raises(LogLockedError):
        simulate(load_scenario(SUBAGENT), log_path=target, replace_log=True, cwd=tmp_path / "w")


def _scenario_with_own_graph(tmp_path: Path) -> tuple[Path, Path]:
    graph = tmp_path / "g2.yaml"
    shutil.copyfile(GRAPHS / "feature-work.yaml", graph)
    scenario = tmp_path / "self.yaml"
    scenario.write_text("graph: g2.yaml\nsteps:\n  - user: hi\n  - model: hello\n", encoding="utf-8")
    return scenario, graph


@pytest.mark.parametrize("which", ["scenario", "graph"])
def test_log_never_overwrites_the_scenario_or_its_graph(tmp_path: Path, which: str) -> None:
    """`--log self.yaml` / `--log g2.yaml` are refused (even with --force)."""
    scenario, graph = _scenario_with_own_graph(tmp_path)
    target = scenario if which == "scenario" else graph
    before = target.read_bytes()
    for extra in ((), ("--force",)):
        code, out, err = invoke("simulate", str(scenario), "--log", str(target), *extra)
        assert f"refusing to overwrite the {which} file" in _one_line_error(code, err)
        assert out == ""
        assert target.read_bytes() == before
    assert _listing(tmp_path) == ["g2.yaml", "self.yaml"]


def test_log_refuses_an_existing_file_that_is_not_a_session_log(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n", encoding="utf-8")
    for extra in ((), ("--force",)):
        code, _, err = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd",
                               str(tmp_path / "w"), *extra)
        assert "is not a session log; refusing to overwrite it" in _one_line_error(code, err)
        assert target.read_text(encoding="utf-8") == "my notes\n"


def test_an_existing_session_log_is_replaced_only_with_force(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    code, _, _ = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"))
    assert code == 0
    first = target.read_bytes()
    code, _, err = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"))
    assert "already exists; pass --force to replace it" in _one_line_error(code, err)
    assert target.read_bytes() == first
    code, _, _ = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"),
                         "--force")
    assert code == 0
    assert target.read_bytes() != first  # new timestamps and message ids
    assert read_log(target, strict=True).header.id == "child-1"
    assert _listing(tmp_path) == ["out.jsonl", "out.jsonl.lock", "w"]


def test_log_creates_missing_parent_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.jsonl"
    code, _, _ = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"))
    assert code == 0
    assert _listing(target.parent) == ["out.jsonl", "out.jsonl.lock"]
    result = simulate(load_scenario(SUBAGENT), log_path=target, replace_log=True, cwd=tmp_path / "w")
    assert isinstance(result.log, JsonlLog) and result.log.path == target
    assert len(read_log(target).events) == len(result.log.events)


def test_unwritable_log_targets_are_one_line_errors(tmp_path: Path) -> None:
    """A log under a regular file, or a directory, is a one-line error (no traceback)."""
    blocker = tmp_path / "afile"
    blocker.write_text("x", encoding="utf-8")
    code, _, err = invoke("simulate", str(SUBAGENT), "--log", str(blocker / "x.jsonl"))
    assert "cannot write session log" in _one_line_error(code, err)
    (tmp_path / "adir").mkdir()
    with pytest.raises(UserError, match="it is a directory"):
        simulate(load_scenario(SUBAGENT), log_path=tmp_path / "adir", cwd=tmp_path / "w")
    assert _listing(tmp_path) == ["adir", "afile"]


def _failing_scenario(tmp_path: Path) -> Path:
    scenario = tmp_path / "fails.yaml"
    scenario.write_text(f"""graph: {graph_ref('feature-work.yaml')}
steps:
  - user: go
  - model:
      calls: [{{tool: goto_stage, args: {{stage: implement}}}}]
  - model: never reached
""", encoding="utf-8")
    return scenario


def test_the_lock_file_is_kept_while_held_and_after_release(tmp_path: Path) -> None:
    """The run never unlinks the writer lock file it holds (filelock's design: the
    file stays so waiters share one inode); after the run another writer locks it normally."""
    from fsm_stage.simulate import LogTarget

    target = tmp_path / "k.jsonl"
    held = LogTarget.open(target, inputs={}, replace=False)
    lock_file = lock_path(target)
    inode = lock_file.stat().st_ino
    held.close()
    assert lock_file.exists() and lock_file.stat().st_ino == inode
    assert invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"))[0] == 0
    assert lock_file.stat().st_ino == inode
    with JsonlLog(target) as log:
        assert log.header.id
    assert _listing(tmp_path) == ["k.jsonl", "k.jsonl.lock", "w"]


def test_a_failed_run_leaves_the_old_log_and_no_temporary_files(tmp_path: Path) -> None:
    """A run that stops with an error (a review without an answer) keeps the
    existing log byte for byte and leaves no `.partial` files; the lock file stays (filelock keeps
    it on release so every writer locks the same inode)."""
    out = tmp_path / "out"
    out.mkdir()
    target = out / "s.jsonl"
    assert invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"))[0] == 0
    before = target.read_bytes()
    code, _, err = invoke("simulate", str(_failing_scenario(tmp_path)), "--log", str(target), "--force",
                           "--cwd", str(tmp_path / "w"))
    assert "has no `review:` outcome" in _one_line_error(code, err)
    assert target.read_bytes() == before
    assert _listing(out) == ["s.jsonl", "s.jsonl.lock"]


def test_an_interrupted_run_leaves_no_temporary_files(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (KeyboardInterrupt) in the middle of a run cleans up too."""
    from fsm_stage.simulate import engine as sim_module

    calls = {"n": 0}
    real_answer = sim_module._Engine.answer

    def interrupt_on_third(self: sim_module._Engine, request: Request) -> ModelReply:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_answer(self, request)

    monkeypatch.setattr(sim_module._Engine, "answer", interrupt_on_third)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        simulate(load_scenario(SCENARIOS / "feature-work.yaml"), log_path=out / "s.jsonl", cwd=tmp_path / "w")
    assert calls["n"] == 3
    assert _listing(out) == ["s.jsonl.lock"]


def test_a_run_error_through_the_api_cleans_up(tmp_path: Path) -> None:
    with pytest.raises(SimulationError):
        simulate(load_scenario(_failing_scenario(tmp_path)), log_path=tmp_path / "o" / "s.jsonl",
                 cwd=tmp_path / "w")
    assert _listing(tmp_path / "o") == ["s.jsonl.lock"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_folder_refusing_new_files_is_not_reported_as_a_lock(tmp_path: Path) -> None:
    """`--log /proc/x.jsonl` is a cannot-create error, not "locked by another writer"."""
    code, _, err = invoke("simulate", str(SUBAGENT), "--log", "/proc/x.jsonl", "--cwd", str(tmp_path))
    message = _one_line_error(code, err)
    assert "/proc/x.jsonl: cannot write session log: cannot create files in /proc" in message


def test_two_simulations_on_one_log_do_not_race(tmp_path: Path) -> None:
    """A second simulate on a --log another simulate is writing gets LogLockedError (no crash
    renaming a shared `.partial` file)."""
    from fsm_stage.simulate import LogTarget

    target = tmp_path / "rr.jsonl"
    held = LogTarget.open(target, inputs={}, replace=False)
    try:
        code, _, err = invoke("simulate", str(SUBAGENT), "--log", str(target), "--cwd", str(tmp_path / "w"))
        assert "rr.jsonl is locked by another writer" in _one_line_error(code, err)
        assert not target.exists()
    finally:
        held.close()
    assert _listing(tmp_path) == ["rr.jsonl.lock"]  # refused before the run: no cwd, no log


def test_leftovers_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    """A run killed outright (no finally) leaves its hidden temporary folder; the next run on the
    same --log, holding the lock, removes it (and nothing else)."""
    stale = tmp_path / ".s.jsonl.k1ll3d.partial"
    stale.mkdir()
    (stale / "s.jsonl").write_text("half", encoding="utf-8")
    other = tmp_path / ".other.jsonl.x.partial"
    other.mkdir()
    code, _, _ = invoke("simulate", str(SUBAGENT), "--log", str(tmp_path / "s.jsonl"), "--cwd",
                         str(tmp_path / "w"))
    assert code == 0
    assert _listing(tmp_path) == [".other.jsonl.x.partial", "s.jsonl", "s.jsonl.lock", "w"]
