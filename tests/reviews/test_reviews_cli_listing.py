"""`fsm-stage review LOG` (listing) says when the log is damaged — a damaged line hides the
reviews after it — and reads a log from standard input (`-`, listing only)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from rig import Rig

from fsm_stage.cli import main
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import SuspendingReviewChannel


def _suspended(path: Path) -> str:
    log = JsonlLog(path, header=SessionHeader(id="s", cwd=str(path.parent)))
    try:
        return Rig(log, SuspendingReviewChannel()).suspend()
    finally:
        log.close()


def test_a_damaged_line_is_reported_with_the_listing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _suspended(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = "{X" + lines[3][1:]
    path.write_text("".join(lines))
    out = CliRunner().invoke(main, ["review", str(path), "--list"])
    assert out.exit_code == 0 and "no open reviews" in out.stdout
    assert "warning" in out.stderr and "line 4" in out.stderr
    listed = json.loads(CliRunner().invoke(main, ["review", str(path), "--json"]).stdout)
    assert listed["open"] == [] and "line 4" in listed["warnings"][0]


def test_standard_input_is_listed_and_never_answered(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rid = _suspended(path)
    data = path.read_bytes()
    listed = CliRunner().invoke(main, ["review", "-", "--json"], input=data)
    assert listed.exit_code == 0, listed.output
    body = json.loads(listed.stdout)
    assert [r["id"] for r in body["open"]] == [rid] and body["path"] == "<stdin>" and body["warnings"] == []
    refused = CliRunner().invoke(main, ["review", "-", "--approve", rid], input=data)
    assert refused.exit_code == 2 and "not answered" in refused.output


def test_fork_reads_standard_input_and_never_writes_to_standard_output(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _suspended(path)
    out = tmp_path / "f.jsonl"
    done = CliRunner().invoke(main, ["fork", "-", "--at", "1", "-o", str(out)], input=path.read_bytes())
    assert done.exit_code == 0 and "forked <stdin>" in done.output and out.exists()
    refused = CliRunner().invoke(main, ["fork", str(path), "--at", "1", "-o", "-"])
    assert refused.exit_code == 2 and not Path("-").exists()


def test_a_location_with_a_scheme_is_never_made_into_folders(tmp_path: Path) -> None:
    """``fork -o https://…`` and ``send postgress://…`` (a typo) wrote ``./https:/logs…/`` and
    ``./postgress:/…/`` folder trees and exited 0: a location with a scheme is refused where a
    file or folder path is needed (helper-82)."""
    import pytest

    path = tmp_path / "s.jsonl"
    _suspended(path)
    mp = pytest.MonkeyPatch()
    mp.chdir(tmp_path)
    try:
        for dest, why in (("https://logs.example/f.jsonl", "unknown log location scheme 'https'"),
                          ("memory:", "is a log location, not a file or folder path")):
            out = CliRunner().invoke(main, ["fork", str(path), "--at", "1", "-o", dest])
            assert out.exit_code == 1 and why in out.output, out.output
        from fsm_stage.errors import UserError
        from fsm_stage.fleet import Store

        with pytest.raises(UserError, match="unknown log location scheme 'postgress'"):
            Store("postgress://u@db.example/app")
    finally:
        mp.undo()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(":")]  # no "https:" / "postgress:" tree


def test_an_answer_says_when_opening_the_log_cut_its_torn_tail(tmp_path: Path) -> None:
    """Answering opens the log for writing, which cuts a torn last line (saved beside it): the
    command says so, whether the answer then succeeds or is refused."""
    path = tmp_path / "s.jsonl"
    rid = _suspended(path)
    with path.open("a") as handle:
        handle.write('{"type":"user/message","seq":')  # a write the crash cut short
    out = CliRunner().invoke(main, ["review", str(path), "--approve", rid])
    assert out.exit_code == 0, out.stderr
    assert "warning" in out.stderr and "truncated torn tail" in out.stderr
    (saved,) = tmp_path.glob("s.jsonl.torn-*")
    assert saved.read_text() == '{"type":"user/message","seq":'
    with path.open("a") as handle:
        handle.write('{"type":')
    refused = CliRunner().invoke(main, ["review", str(path), "--approve", "rv_nope"])
    assert refused.exit_code == 1 and "no review" in refused.stderr
    assert "truncated torn tail" in refused.stderr
