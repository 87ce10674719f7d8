"""The command-line queue beyond a listing: ``--target`` and ``--reviewer`` filters on
``inbox list`` / ``approve-all``, ``inbox list --follow`` (reviews asked and closed as they come,
Ctrl-C exits 130) and ``inbox answer`` (each selected review through the terminal review on a
TTY, answered through the same checks as a single answer; refused without a terminal)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from inbox_fixtures import TOKENS, add_rules, plan_session, set_requester, stage_session, write_reviewers

from fsm_stage.cli import main
from fsm_stage.log.dsh import read_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import test_terminal_review_tmux as tmux_tests
from test_terminal_review_tmux import Tmux

ROOT = Path(__file__).resolve().parents[2]
terminal = tmux_tests.tmux  # the tmux fixture (skips without tmux outside CI)


def _answers(path: Path) -> list[dict[str, Any]]:
    return [e.data for e in read_log(path).events if e.type == "fsm/review/answer"]


def _folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    logs = tmp_path / "logs"
    logs.mkdir()
    rids = {"s1": stage_session(logs, "s1"), "s2": stage_session(logs, "s2", target="verify"),
            "p1": plan_session(logs, "p1", "# Plan\n1. do it")}
    add_rules(logs / "s1.jsonl", {"approvers": ["@leads"]})
    add_rules(logs / "s2.jsonl", {"approvers": ["bob"]})
    return logs, rids


def _ids(out: str) -> set[str]:
    return {row["id"] for row in json.loads(out)["open"]}


def test_list_filters_by_target_and_by_the_reviewer_the_rules_allow(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    reviewers = str(write_reviewers(tmp_path / "reviewers.yaml"))

    def listed(*args: str) -> set[str]:
        out = CliRunner().invoke(main, ["inbox", "list", str(logs), "--json", *args])
        assert out.exit_code == 0, out.output
        return _ids(out.stdout)

    assert listed("--target", "verify") == {rids["s2"]}
    assert listed("--target", "verify", "--target", "implement") == {rids["s1"], rids["s2"]}
    # alice is in @leads (the reviewers file says so); the plan review names nobody
    assert listed("--reviewer", "alice", "--reviewers", reviewers) == {rids["s1"], rids["p1"]}
    assert listed("--reviewer", "alice") == {rids["p1"]}  # without the file no group resolves ...
    hint = CliRunner().invoke(main, ["inbox", "list", str(logs), "--reviewer", "alice"])
    assert hint.exit_code == 0 and hint.stderr == (  # ... and the listing says what it left out
        "fsm-stage: warning: 1 open review(s) name @groups among their approvers and were left out: "
        "--reviewer alice matches names only without --reviewers FILE\n")
    resolved = CliRunner().invoke(main, ["inbox", "list", str(logs), "--reviewer", "alice",
                                         "--reviewers", reviewers])
    assert resolved.exit_code == 0 and resolved.stderr == ""
    assert listed("--reviewer", "bob", "--reviewers", reviewers) == {rids["s2"], rids["p1"]}
    add_rules(logs / "p1.jsonl", "not rules")  # type: ignore[arg-type]
    assert listed("--reviewer", "bob", "--reviewers", reviewers) == {rids["s2"]}  # unreadable: nobody
    bad = CliRunner().invoke(main, ["inbox", "list", str(logs), "--reviewers", reviewers])
    assert bad.exit_code == 2 and "--reviewer NAME" in bad.output


def test_approve_all_with_target_and_reviewer_filters_approves_only_those(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs, rids = _folder(tmp_path)
    reviewers = str(write_reviewers(tmp_path / "reviewers.yaml"))
    monkeypatch.setenv("FSM_STAGE_REVIEWER_TOKEN", TOKENS["bob"])
    out = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--json", "--as", "bob",
                                    "--reviewers", reviewers, "--reviewer", "bob", "--target", "verify"])
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.stdout)["results"]
    assert (result["session"], result["result"]) == ("s2", "answered")
    (answer,) = _answers(logs / "s2.jsonl")
    assert (answer["id"], answer["by"], answer["reviewers"]) == (rids["s2"], "cli:bob", ["bob"])
    assert _answers(logs / "s1.jsonl") == [] and _answers(logs / "p1.jsonl") == []
    # the filter alone (no --as): the reviewers file resolves the groups; nothing is approved without --yes
    dry = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--reviewer", "alice",
                                    "--reviewers", reviewers])
    assert dry.exit_code == 0 and "2 open review(s) match" in dry.stdout
    # --as selects the reviews its reviewer may answer (bob's s2 is neither tried nor refused) ...
    monkeypatch.setenv("FSM_STAGE_REVIEWER_TOKEN", TOKENS["alice"])
    mine = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--json", "--as", "alice",
                                     "--reviewers", reviewers, "--kind", "stage"])
    assert mine.exit_code == 0, mine.output
    assert [r["session"] for r in json.loads(mine.stdout)["results"]] == ["s1"]
    # ... and another --reviewer beside it is a usage error, nothing written
    other = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--as", "alice",
                                      "--reviewers", reviewers, "--reviewer", "bob"])
    assert other.exit_code == 2 and "leave --reviewer out" in other.output
    assert _answers(logs / "p1.jsonl") == []


def test_answer_refuses_without_a_terminal_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    logs, _ = _folder(tmp_path)
    before = {p.name: p.read_bytes() for p in logs.glob("*.jsonl")}
    out = CliRunner().invoke(main, ["inbox", "answer", str(logs)], input="1\n")
    assert out.exit_code == 1 and "must be a terminal" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in logs.glob("*.jsonl")} == before


@contextlib.contextmanager
def following(logs: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """``fsm-stage inbox list LOGS --follow --interval 0.1 ARGS`` running, with its stdout lines;
    killed on the way out if still running (its stderr must hold no traceback)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "fsm_stage", "inbox", "list", str(logs), "--follow",
                             "--interval", "0.1", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    try:
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def _until(lines: queue.Queue[str], text: str) -> str:
    while True:
        line = lines.get(timeout=30)  # a missing line fails the test after 30 s
        if text in line:
            return line


def test_list_follow_prints_reviews_as_they_are_asked_and_closed_until_ctrl_c(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    with following(logs, "--kind", "stage") as (proc, lines):
        _until(lines, "following")
        assert rids["s1"] in _until(lines, rids["s1"]) and "+ " in _until(lines, rids["s2"])
        new = stage_session(logs, "s3", target="verify")
        line = _until(lines, new)
        assert line.startswith("+ s3\t") and "explore → verify" in line
        plan_session(logs, "p2", "# Plan")  # filtered out: --kind stage
        done = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes", "--target", "verify",
                                         "--stage", "explore", "--kind", "stage"])
        assert "s3" in done.output
        closed = _until(lines, f"- s3\t{new}")
        assert closed.endswith("approve by cli")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130


def test_list_follow_json_is_one_object_per_line(tmp_path: Path) -> None:
    logs, rids = _folder(tmp_path)
    with following(logs, "--json", "--kind", "plan") as (proc, lines):
        first = json.loads(_until(lines, rids["p1"]))
        assert (first["format_version"], first["event"], first["review"]["session"]) == (1, "open", "p1")
        kept = CliRunner().invoke(main, ["review", str(logs / "p1.jsonl"), "--keep", rids["p1"]])
        assert kept.exit_code == 0, kept.output
        closed = json.loads(_until(lines, '"closed"'))
        assert closed["review"]["id"] == rids["p1"] and closed["closed"]["outcome"] == "keep"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130


def test_answer_on_a_terminal_walks_each_review_as_the_reviewer(terminal: Tmux, tmp_path: Path) -> None:
    """``--as alice`` walks the reviews alice may answer (s1 for @leads, s2 naming her), not the
    one only bob may answer; an answer the rules still refuse (not_requester) is one line."""
    logs, rids = _folder(tmp_path)
    bobs = stage_session(logs, "s3", target="verify")
    add_rules(logs / "s3.jsonl", {"approvers": ["bob"]})
    add_rules(logs / "s2.jsonl", {"approvers": ["alice"], "notRequester": True})
    set_requester(logs / "s2.jsonl", "alice")
    reviewers = write_reviewers(tmp_path / "reviewers.yaml")
    args = ["inbox", "answer", str(logs), "--kind", "stage", "--as", "alice", "--reviewers", str(reviewers)]
    command = (f"PYTHONPATH={shlex.quote(str(ROOT))} FSM_STAGE_REVIEWER_TOKEN={TOKENS['alice']} "
               f"TERM=xterm-256color {shlex.quote(sys.executable)} -m fsm_stage "
               f"{' '.join(map(shlex.quote, args))}; echo EXIT=$?; sleep 60")
    terminal.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "50", command)
    pane = terminal.wait_for("Choose an option", timeout=20)
    assert "session s1 — review 1 of 2" in pane and "what was done" in pane
    assert "rules: approvers @leads" in pane  # who may answer, before the question
    terminal.keys("1", "Enter")  # approve s1 (alice is in @leads)
    pane = terminal.wait_for("session s2 — review 2 of 2", timeout=20)
    assert f"approve: s1.jsonl {rids['s1']}" in pane
    terminal.wait_for("rules: approvers alice; not the requester", timeout=20)
    terminal.wait_for("Choose an option", timeout=20)
    terminal.keys("1", "Enter")  # approve s2: alice asked for it herself
    pane = terminal.wait_for("EXIT=", timeout=20)
    assert "not_requester" in pane and "EXIT=1" in pane and bobs not in pane
    (answer,) = _answers(logs / "s1.jsonl")
    assert (answer["outcome"], answer["by"], answer["reviewers"]) == ("approve", "cli:alice", ["alice"])
    assert _answers(logs / "s2.jsonl") == [] and _answers(logs / "p1.jsonl") == []
    assert _answers(logs / "s3.jsonl") == []
