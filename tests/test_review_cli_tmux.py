"""``fsm-stage review LOG`` on a terminal asks each open review and records the answer; piped
or with ``--list`` it only lists. tmux is the terminal (skipped without it outside CI)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import test_terminal_review_tmux as tmux_tests
from test_review_cli_display import HOSTILE, _log
from test_terminal_review_tmux import Tmux

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
terminal = tmux_tests.tmux  # the tmux fixture (skips without tmux outside CI)


def _open_ids(path: Path) -> list[str]:
    run = subprocess.run([sys.executable, "-m", "fsm_stage", "review", str(path), "--json"],
                         capture_output=True, text=True, env=ENV, timeout=60, check=False)
    return [r["id"] for r in json.loads(run.stdout)["open"]]


def _start(t: Tmux, *args: str) -> None:
    command = (f"PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm-256color {shlex.quote(sys.executable)} "
               f"-m fsm_stage review {' '.join(map(shlex.quote, args))}; echo EXIT=$?; sleep 60")
    t.tmux("-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "40", command)


def test_review_on_a_terminal_asks_and_records_the_answer(terminal: Tmux, tmp_path: Path) -> None:
    arguments = '{"path": "notes.md"}' + HOSTILE  # not JSON: the raw text a model sent, escapes and all
    path = _log(tmp_path, "tool", arguments, "write_file")
    _start(terminal, str(path))
    pane = terminal.wait_for("Choose an option", timeout=20)
    assert "Open review r1 (tool)" in pane and '"path": "notes.md"' in pane and "1. Approve" in pane
    assert "\\x1b[8mhidden" in pane and "\\x07" in pane  # the escape sequences are shown, not obeyed
    terminal.keys("1", "Enter")
    pane = terminal.wait_for("EXIT=")
    assert "review r1: approve (Approve), logged at seq" in pane and "EXIT=0" in pane
    assert _open_ids(path) == []


def test_typed_feedback_keeps_and_ctrl_c_writes_nothing(terminal: Tmux, tmp_path: Path) -> None:
    path = _log(tmp_path, "tool", "{}", "write_file")
    _start(terminal, str(path))
    terminal.wait_for("Choose an option", timeout=20)
    terminal.keys("C-c")
    pane = terminal.wait_for("EXIT=")
    assert "EXIT=130" in pane and "Traceback" not in pane
    assert _open_ids(path) == ["r1"]
    terminal.kill()
    terminal.socket += "b"
    _start(terminal, str(path))
    terminal.wait_for("Choose an option", timeout=20)
    terminal.keys("not this file", "Enter")
    pane = terminal.wait_for("EXIT=")
    assert "review r1: keep (Deny)" in pane and "EXIT=0" in pane
    assert _open_ids(path) == []


def test_list_and_piped_output_never_ask(tmp_path: Path) -> None:
    path = _log(tmp_path, "tool", "{}", "write_file")
    run = subprocess.run([sys.executable, "-m", "fsm_stage", "review", str(path)], capture_output=True,
                         text=True, env=ENV, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert run.returncode == 0 and "r1  tool: explore -> write_file" in run.stdout
    assert _open_ids(path) == ["r1"]
