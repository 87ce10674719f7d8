"""``fsm-stage inbox`` usage and exit statuses: options that only mean something with
``--follow`` are refused without it (exit 2), and the exit status of each inbox command
(docs/inbox.md, "Exit status")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from inbox_fixtures import add_rules, stage_session

from fsm_stage.cli import main
from fsm_stage.constants import REVIEW_REQUEST


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


def test_inbox_kind_refuses_a_kind_no_review_has(tmp_path: Path) -> None:
    """``--kind`` names one of the kinds reviews have; a typo is a usage error (exit 2), not a
    filter that silently matches nothing. The choices are the kinds the reviews know."""
    from fsm_stage.cli.inbox_cmds import REVIEW_KINDS
    from fsm_stage.reviews._answer import PAYLOAD_NAMES

    assert set(REVIEW_KINDS) == set(PAYLOAD_NAMES)
    logs = tmp_path / "logs"
    logs.mkdir()
    for command in (["list"], ["approve-all"], ["answer"]):
        out = CliRunner().invoke(main, ["inbox", *command, str(logs), "--kind", "stages"])
        assert out.exit_code == 2, out.output
        assert "Invalid value for '--kind'" in out.stderr and "'stages' is not one of" in out.stderr
        assert "Traceback" not in out.output


def test_inbox_answer_exits_1_when_an_answer_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    import fsm_stage.cli.review_cmds as review_cmds

    logs = tmp_path / "logs"
    logs.mkdir()
    stage_session(logs, "s1")
    stage_session(logs, "s2", target="verify")
    add_rules(logs / "s2.jsonl", {"approvers": ["alice"]})  # nobody named: refused

    def approve_each(rows: Any, language: str, answer: Any) -> None:
        for row in rows:
            answer(row, "approve", None, None)

    monkeypatch.setattr(review_cmds, "on_terminal", lambda: True)
    monkeypatch.setattr(review_cmds, "ask_rows", approve_each)
    out = CliRunner().invoke(main, ["inbox", "answer", str(logs)])
    assert out.exit_code == 1
    assert "refused: s2.jsonl" in out.stderr and "approve: s1.jsonl" in out.stdout
    # every answer recorded: exit 0
    stage_session(logs, "s3")
    fine = CliRunner().invoke(main, ["inbox", "answer", str(logs), "--stage", "implement"])
    assert fine.exit_code == 0 and "approve: s3.jsonl" in fine.stdout


def test_inbox_list_shows_age_and_deadline_as_coarse_durations(tmp_path: Path) -> None:
    """The table reads like the web queue: ``42s``/``5m30s``/``1h59m``/``2d``, the deadline as
    ``in 10m`` or ``overdue 1h50m`` (``--json`` keeps the exact numbers)."""
    from fsm_stage.text import coarse_duration

    cases = {0: "0s", 59: "59s", 60: "1m", 90: "1m30s", 3599: "59m59s", 7140: "1h59m", 7260: "2h1m",
             86400 * 2 + 5: "2d", 86400 * 2 + 3 * 3600 + 61: "2d3h", -5: "0s"}
    assert {s: coarse_duration(s) for s in cases} == cases
    logs = tmp_path / "logs"
    logs.mkdir()
    stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"deadlineSeconds": 600})
    stage_session(logs, "s2")
    add_rules(logs / "s2.jsonl", {"deadlineSeconds": 600})
    lines = []
    for line in (logs / "s2.jsonl").read_text().splitlines():  # asked two hours ago
        obj = json.loads(line)
        if obj.get("type") == REVIEW_REQUEST:
            obj["time"] -= 2 * 3600 * 1000
        lines.append(json.dumps(obj, separators=(",", ":")))
    (logs / "s2.jsonl").write_text("\n".join(lines) + "\n")
    out = CliRunner().invoke(main, ["inbox", "list", str(logs)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0].split("\t")[4:] == ["age", "deadline"]
    rows = {line.split("\t")[0]: line.split("\t") for line in out.output.splitlines()[1:]}
    assert rows["s1"][4] in ("0s", "1s") and rows["s1"][5] in ("in 10m", "in 9m59s", "in 9m58s")
    assert rows["s2"][4] == "2h" and rows["s2"][5] in ("overdue 1h50m", "overdue 1h49m")
