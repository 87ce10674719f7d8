"""The terminal review in a real terminal: tmux runs ``terminal_review_script.py``, the test
sends keys and reads the pane (issue 16). Skipped without tmux outside CI; fails under ``CI``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("terminal_review_script.py")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        if os.environ.get("CI"):
            pytest.fail("CI: tmux must be installed (.ci/run installs it)")
        pytest.skip("tmux is not installed (apt-get install tmux); runs in CI")
    t = Tmux()
    try:
        yield t
    finally:
        t.kill()


class Tmux:
    """One detached tmux server/session (its own socket) running one command."""

    def __init__(self) -> None:
        self.socket = f"fsm-test-{uuid.uuid4().hex[:8]}"

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=10, check=False)
        return done.stdout

    def start(self, *args: str, env: dict[str, str] | None = None, lines: int = 40) -> None:
        exports = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **(env or {})}
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in exports.items())
        command = (f"{prefix} {shlex.quote(sys.executable)} {shlex.quote(str(SCRIPT))} "
                   f"{' '.join(map(shlex.quote, args))}; echo EXIT=$?; "
                   "echo STTY=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e echo -e -echo); sleep 60")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", str(lines), command)
        self.wait_for("Choose an option", timeout=20) if "long" not in args else None

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def pane(self, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-S", "-200")

    def wait_for(self, text: str, timeout: float = 10.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pane = self.pane()
            if text in pane:
                return pane
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not on the pane after {timeout}s:\n{self.pane()}")

    def kill(self) -> None:
        self.tmux("kill-server")


def test_plan_renders_as_markdown_and_an_option_number_approves(tmux: Tmux) -> None:
    tmux.start("plan")
    pane = tmux.pane()
    assert "Add a --greeting flag" in pane and "# Add" not in pane
    assert "▌ Keep the default greeting unchanged." in pane  # a quote
    assert "parse the flag  cli.py" in pane and "|---|" not in pane  # a table
    assert "(https://click.palletsprojects.com)" in pane and "**" not in pane  # a link: its URL
    tmux.keys("1", "Enter")
    pane = tmux.wait_for("EXIT=")
    assert "ANSWER [Answer(id='plan-review', selected=('Approve',), custom=None)] THREADS 1" in pane
    assert "EXIT=0" in pane


def test_one_ctrl_c_ends_the_review_with_exit_130(tmux: Tmux) -> None:
    tmux.start("plan")
    tmux.keys("some half-typed feedback")
    tmux.wait_for("half-typed")
    tmux.keys("C-c")
    pane = tmux.wait_for("EXIT=", timeout=5)  # one Ctrl-C is enough: no second press
    assert "INTERRUPTED (dismissed)" in pane and "EXIT=130" in pane
    assert "Traceback" not in pane and "KeyboardInterrupt" not in pane


def test_ctrl_c_can_be_a_keyboard_interrupt(tmux: Tmux) -> None:
    """ctrl_c="interrupt": KeyboardInterrupt passes every `except Exception` up to the program."""
    tmux.start("plan", "--ctrl-c-interrupts")
    tmux.keys("C-c")
    pane = tmux.wait_for("EXIT=", timeout=5)
    assert "INTERRUPTED\n" in pane and "(dismissed)" not in pane and "EXIT=130" in pane
    assert "Traceback" not in pane


def test_consent_typed_as_text_asks_for_confirmation(tmux: Tmux) -> None:
    tmux.start("plan")
    tmux.keys("lgtm", "Enter")
    tmux.wait_for("Select “Approve”? (y/N)")
    tmux.keys("y", "Enter")
    pane = tmux.wait_for("EXIT=")
    assert "selected=('Approve',), custom=None" in pane and "EXIT=0" in pane


def test_the_stage_review_shows_from_to_and_the_handoff_path(tmux: Tmux) -> None:
    tmux.start("stage")
    assert "explore → implement   (handoff: handoff/implement.md)" in tmux.pane()
    tmux.keys("2", "Enter")
    tmux.wait_for("Feedback")
    tmux.keys("not yet", "Enter")
    pane = tmux.wait_for("EXIT=")
    assert "selected=('Keep current stage',), custom='not yet'" in pane


def test_the_abort_signal_ends_the_prompt(tmux: Tmux) -> None:
    tmux.start("plan", "--abort-after", "1.5")
    pane = tmux.wait_for("EXIT=", timeout=10)
    assert "DISMISSED review aborted: turn cancelled THREADS 1" in pane and "EXIT=3" in pane


def test_a_long_plan_opens_the_pager_first(tmux: Tmux) -> None:
    if shutil.which("less") is None:
        pytest.skip("less is not installed")
    tmux.start("long", lines=30, env={"PAGER": "less"})
    tmux.wait_for("step number 1 of")
    assert "Choose an option" not in tmux.pane()  # the question waits behind the pager
    tmux.keys("q")
    pane = tmux.wait_for("Choose an option")
    assert "1. Approve — go" in pane
    tmux.keys("1", "Enter")
    assert "EXIT=0" in tmux.wait_for("EXIT=")


def test_no_color_gives_no_colour_codes(tmux: Tmux) -> None:
    tmux.start("plan", env={"NO_COLOR": "1"})
    assert "\x1b[" not in tmux.pane(escapes=True).split("Choose an option")[0]
    tmux.kill()
    tmux.socket += "c"
    tmux.start("plan")
    assert "\x1b[" in tmux.pane(escapes=True).split("Choose an option")[0]  # bold headings etc.


def test_ctrl_c_in_the_pager_restores_the_terminal_and_ends_the_review(tmux: Tmux) -> None:
    if shutil.which("less") is None:
        pytest.skip("less is not installed")
    tmux.start("long", lines=30, env={"PAGER": "less"})
    tmux.wait_for("step number 1 of")
    tmux.keys("C-c")
    pane = tmux.wait_for("STTY=", timeout=5)
    assert "INTERRUPTED (dismissed)" in pane and "EXIT=130" in pane, pane
    assert "Traceback" not in pane and "KeyboardInterrupt" not in pane
    assert "STTY=echo" in pane  # echo is back: the pager was not killed mid-screen


def test_rendered_markdown_is_written_once_without_a_second_wrap(tmux: Tmux) -> None:
    tmux.start("wide")
    pane = tmux.pane()
    for i in range(3):  # each table row, styled, on one line with its neighbours' cells
        (row,) = [line for line in pane.splitlines() if f"step-{i}" in line]
        assert f"path/to/file_{i}.py" in row and f"end-{i}" in row, pane
    assert "x" * 74 in pane  # the code line is not cut in two
    tmux.keys("1", "Enter")
    assert "EXIT=0" in tmux.wait_for("EXIT=")


def test_escape_sequences_in_a_plan_are_shown_not_obeyed(tmux: Tmux) -> None:
    tmux.start("hostile")
    pane = tmux.pane()
    assert "2 rm -rf ~" in pane and "\\x1b[2K" in pane and "concealed" in pane, pane
    assert "owned" in pane  # the title sequence is printed as text, not sent to the terminal


def test_an_escape_sequence_typed_at_the_prompt_is_refused_not_a_crash(tmux: Tmux) -> None:
    """An escape sequence typed (not pasted) reaches the prompt as key presses; prompt_toolkit
    reads ``ESC [ 3 1 m`` as a mouse report. It is kept as typed text, so the line is refused
    and asked again like any other control character: no traceback, nothing half-submitted."""
    tmux.start("plan")
    tmux.keys("-l", "x \x1b[31mred")
    tmux.keys("Enter")
    pane = tmux.wait_for("Control characters or escape sequences are not accepted", timeout=5)
    assert "Traceback" not in pane and "Unhandled exception" not in pane
    tmux.keys("plain feedback", "Enter")
    pane = tmux.wait_for("EXIT=")
    assert "selected=(), custom='plain feedback'" in pane and "EXIT=0" in pane
    assert "custom='x" not in pane
