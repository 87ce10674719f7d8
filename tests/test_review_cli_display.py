"""``fsm-stage review LOG`` shows logged, model-written text only through ``text.visible``
(no escape sequence reaches the reviewer's terminal), shows a tool review's arguments, and
refuses command-line text that is not UTF-8 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fsm_stage.constants import REVIEW_REQUEST, TOOL_CALL
from fsm_stage.log.events import NewEvent, SessionHeader
from fsm_stage.log.jsonl import JsonlLog

ROOT = Path(__file__).resolve().parents[1]
#: cursor up + erase line, concealed text, an OSC window title and an OSC 8 link, a bell
HOSTILE = "\x1b[1A\x1b[2K\x1b[8mhidden\x1b[0m \x1b]0;title\x07 \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"


def _log(tmp_path: Path, kind: str, arguments: str, target: str) -> Path:
    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=SessionHeader(id="s-1", cwd=str(tmp_path)))
    try:
        log.append_many([
            NewEvent(TOOL_CALL, {"callId": "c1", "name": "write_file", "arguments": arguments}),
            NewEvent(REVIEW_REQUEST, {"id": "r1", "callId": "c1", "kind": kind, "from": "explore",
                                      "target": target, "options": ["Approve", "Deny"], "shape": None,
                                      "handoffPath": None, "payloadSha256": "0" * 64, "turn": 1, "step": 1},
                     ignorable=True),
        ])
    finally:
        log.close()
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "fsm_stage", *args], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)


def test_a_tool_review_shows_its_arguments_and_no_escape_sequence(tmp_path: Path) -> None:
    arguments = json.dumps({"path": "notes.md", "content": "line one\n" + HOSTILE}, ensure_ascii=False)
    run = _cli("review", str(_log(tmp_path, "tool", arguments, "write_file" + HOSTILE)))
    assert run.returncode == 0, run.stderr
    out = run.stdout.decode()
    assert "\x1b" not in out and "\x07" not in out
    assert "arguments:" in out and '"path": "notes.md"' in out
    assert "\\x1b[8mhidden" in out  # shown, escaped: the reviewer sees that it was there


def test_a_plan_with_raw_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    plan = "# Plan\n1. safe step\n" + HOSTILE + "\r2. rm -rf /\x1b[1A\x1b[2K"
    arguments = json.dumps({"plan": plan}, ensure_ascii=False)
    run = _cli("review", str(_log(tmp_path, "plan", arguments, "default")))
    out = run.stdout.decode()
    assert run.returncode == 0 and "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "2. rm -rf /" in out and "1. safe step" in out


def test_json_listing_keeps_the_exact_arguments(tmp_path: Path) -> None:
    arguments = json.dumps({"path": "a\u001b"})
    run = _cli("review", str(_log(tmp_path, "tool", arguments, "write_file")), "--json")
    (row,) = json.loads(run.stdout)["open"]
    assert row["kind"] == "tool" and row["payload"] == arguments


def test_feedback_that_is_not_utf8_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = _log(tmp_path, "tool", "{}", "write_file")
    before = path.read_bytes()
    run = subprocess.run([sys.executable, "-m", "fsm_stage", "review", str(path), "--keep", "r1",
                          "--feedback", os.fsdecode(b"no \xff")], capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    err = run.stderr.decode()
    assert run.returncode == 1 and "Traceback" not in err, err
    assert err.count("\n") == 1 and "--feedback is not UTF-8 text" in err
    assert path.read_bytes() == before


def test_state_shows_logged_strings_through_the_same_filter(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    log = JsonlLog(path, header=SessionHeader(id="s\x1b[2K-1", cwd=str(tmp_path) + "\x1b]0;t\x07"))
    log.close()
    run = _cli("state", str(path))
    out = run.stdout.decode()
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in out and "\x07" not in out and "s\\x1b[2K-1" in out
