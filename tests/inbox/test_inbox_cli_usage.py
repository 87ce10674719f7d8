"""``fsm-stage inbox`` usage and exit statuses: options that only mean something with
``--follow`` are refused without it (exit 2), and the exit status of each inbox command
(docs/inbox.md, "Exit status")."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from inbox_fixtures import stage_session

from fsm_stage.cli import main


def test_interval_without_follow_is_a_usage_error_not_ignored(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    stage_session(logs, "s1")
    out = CliRunner().invoke(main, ["inbox", "list", str(logs), "--interval", "5"])
    assert out.exit_code == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: --interval goes with --follow (without it, inbox list looks once)"]
    assert "Traceback" not in out.output
    # the same value given as the default is still refused: it was typed, so it was meant
    same = CliRunner().invoke(main, ["inbox", "list", str(logs), "--interval=1"])
    assert same.exit_code == 2 and "--interval goes with --follow" in same.stderr
    # the filters are not follow-only: they narrow a one-time listing as well
    fine = CliRunner().invoke(main, ["inbox", "list", str(logs), "--kind", "stage", "--stage", "explore"])
    assert fine.exit_code == 0 and "s1" in fine.output
