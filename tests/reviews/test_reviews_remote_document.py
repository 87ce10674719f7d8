"""The reviewed document travels with the review: a reviewer in another process and cwd, where the
session's handoff file does not exist, reads the document stored in the request and approves it;
the worker applies it while its own file still hashes to the approved digest and refuses (fail
closed, ``payload-changed``) when the file changed. A document above the stored bound is refused
in one line where it cannot be read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from team_rig import TOKENS, cli, events, resume, suspended, write_reviewers

from fsm_stage.reviews._fold import MAX_REVIEW_DOCUMENT_BYTES

ROOT = Path(__file__).resolve().parents[2]


def _elsewhere(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``fsm-stage`` in another process and cwd, as reviewer alice (token in the environment)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FSM_STAGE_REVIEWER_TOKEN": TOKENS["alice"]}
    return subprocess.run([sys.executable, "-m", "fsm_stage", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_a_reviewer_elsewhere_reads_and_approves_the_stored_document_and_the_worker_checks_its_file(
        tmp_path: Path) -> None:
    for tampered in (False, True):
        base = tmp_path / ("tampered" if tampered else "same")
        worker, away, elsewhere = base / "worker", base / "worker.away", base / "elsewhere"
        worker.mkdir(parents=True)
        elsewhere.mkdir()
        reviewers = write_reviewers(elsewhere)
        path, rid = suspended(base, "verify", cwd=worker, handoff="# Handoff\nShip the parser.")
        (request,) = events(path, "fsm/review/request")
        assert request["document"] == "# Handoff\nShip the parser."
        handoff = Path(request["handoffPath"])
        assert handoff.is_relative_to(worker) and handoff.exists()
        worker.rename(away)  # the reviewer's machine has no such directory

        listing = _elsewhere("review", str(path), "--list", cwd=elsewhere)
        assert listing.returncode == 0, listing.stderr
        assert "  > # Handoff\n  > Ship the parser." in listing.stdout and "unreadable" not in listing.stdout
        as_json = json.loads(_elsewhere("review", str(path), "--json", cwd=elsewhere).stdout)
        assert as_json["open"][0]["payload"] == "# Handoff\nShip the parser."
        answer = _elsewhere("review", str(path), "--approve", rid, "--as", "alice",
                            "--reviewers", str(reviewers), cwd=elsewhere)
        assert answer.returncode == 0, answer.stderr
        assert f"review {rid}: approve (Approve) by alice" in answer.stdout

        away.rename(worker)
        if tampered:
            handoff.write_text("# Handoff\nShip something else.", encoding="utf-8")
        assert resume(path, worker) == ("explore" if tampered else "verify")
        (redeemed,) = events(path, "fsm/review/redeemed")
        assert redeemed == {"id": rid, "applied": not tampered,
                            "reason": "payload-changed" if tampered else None}


def test_a_document_above_the_stored_bound_is_refused_in_one_line_where_it_is_unreadable(
        tmp_path: Path) -> None:
    worker = tmp_path / "worker"
    worker.mkdir()
    big = "# Handoff\n" + "x" * MAX_REVIEW_DOCUMENT_BYTES
    path, rid = suspended(tmp_path, "verify", cwd=worker, handoff=big)
    (request,) = events(path, "fsm/review/request")
    assert request["documentOmitted"] is True and "document" not in request
    shutil.move(worker, tmp_path / "away")
    listing = cli(path, "--list")
    assert f"not stored with the review: larger than {MAX_REVIEW_DOCUMENT_BYTES} bytes" in listing.output
    before = path.read_bytes()
    out = cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)),
              token=TOKENS["alice"])
    assert out.exit_code == 1 and out.output.count("\n") == 1
    why = ("is not readable here and was not stored with the review "
           f"(larger than {MAX_REVIEW_DOCUMENT_BYTES} bytes); approve it where the document is")
    assert why in out.output
    assert path.read_bytes() == before
    shutil.move(tmp_path / "away", worker)
    assert cli(path, "--approve", rid, "--as", "alice", "--reviewers", str(write_reviewers(tmp_path)),
               token=TOKENS["alice"]).exit_code == 0
