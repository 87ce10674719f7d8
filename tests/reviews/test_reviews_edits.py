"""Approve with edits: the answer records the reviewer's edited document and its digest, the
transition uses it (the handoff file rewritten atomically before the flush; the plan tool result
carries the edited plan) and the model is told in one line; a review re-asked after a keep shows
the diff against the version the reviewer kept (``fsm-stage review``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rig import Rig, run
from team_rig import TOKENS, cli, events, host, resume, suspended, write_reviewers

from fsm_stage.errors import RecordShapeError, ReviewPending, ReviewRefusedError
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import SuspendingReviewChannel, answer_review, vote_review
from fsm_stage.reviews._fold import stage_payload_sha256
from fsm_stage.runtime.tools import ToolCall

EDITED = "# Handoff\nGo, but write the tests first."
EDITED_LINE = "The reviewer edited the handoff document before approving it"


def _goto(tmp_path: Path, handoff: str = "# Handoff\nGo.") -> tuple[Rig, ToolCall, str]:
    rig = Rig(JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(id="e", cwd=str(tmp_path))),
              SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    call = rig.goto_call("implement", handoff)
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(call))
    return rig, call, pending.value.review_id


def _texts(rig: Rig) -> str:
    return json.dumps([e.data for e in rig.session.events if e.type == "user/message"], ensure_ascii=False)


def test_an_approval_with_edits_applies_the_edited_handoff_and_tells_the_model(tmp_path: Path) -> None:
    rig, call, rid = _goto(tmp_path)
    (record,) = rig.reviews().records.values()
    answer = answer_review(rig.session, rid, "approve", edited=EDITED)
    assert answer.edited == EDITED and answer.edited_sha256 == stage_payload_sha256("implement", EDITED)
    logged = [e.data for e in rig.session.events if e.type == "fsm/review/answer"][-1]
    assert logged["edited"] == EDITED and logged["editedSha256"] == answer.edited_sha256
    assert Path(record.handoff_path or "").read_text(encoding="utf-8") == "# Handoff\nGo."  # not yet
    assert not run(rig.resume(call)).is_error
    rig.step(2)
    assert rig.stage.current(rig.session) == "implement"
    assert Path(record.handoff_path or "").read_text(encoding="utf-8") == EDITED
    assert _texts(rig).count(EDITED_LINE) == 1
    (red,) = rig.reviews().redeemed.values()
    assert red.applied is True
    rig.close()


def test_a_worker_that_crashed_after_writing_the_edit_still_applies_it_and_a_third_version_is_refused(
        tmp_path: Path) -> None:
    for third in (False, True):
        rig, call, rid = _goto(tmp_path / str(third))
        (record,) = rig.reviews().records.values()
        answer_review(rig.session, rid, "approve", edited=EDITED)
        run(rig.resume(call))
        # the file already holds the edited version (a worker rewrote it, then died before its batch)
        Path(record.handoff_path or "").write_text("# Handoff\nsomething else" if third else EDITED,
                                                   encoding="utf-8")
        rig.step(2)
        (red,) = rig.reviews().redeemed.values()
        assert (red.applied, red.reason) == ((False, "payload-changed") if third else (True, None))
        assert rig.stage.current(rig.session) == ("explore" if third else "implement")
        rig.close()


def test_edits_that_cannot_apply_are_refused_in_one_line(tmp_path: Path) -> None:
    rig, _call, rid = _goto(tmp_path)
    seen = len(rig.session.events)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"outcome": "keep"}, "goes with an approval only"),
        ({"outcome": "approve", "option": "Approve and keep the conversation"}, "needs the full switch"),
        ({"outcome": "approve", "edited": " \n"}, "the edited document is empty"),
        ({"outcome": "approve", "edited": "x" * (1 << 20) + "y"}, "at most 1048576 are accepted"),
        # the API, the CLI and MCP refuse what the web editor refuses: an edit written to the
        # handoff file and told to the model carries no terminal escapes
        ({"outcome": "approve", "edited": "# Handoff\n\x1b]0;pwned\x07Go."}, "control characters"),
        ({"outcome": "approve", "edited": "# Handoff\n\u202eGo."}, "escape sequences"),
    ]
    for kwargs, message in cases:
        outcome = kwargs.pop("outcome")
        kwargs.setdefault("edited", EDITED)
        with pytest.raises(RecordShapeError, match=message) as err:
            answer_review(rig.session, rid, outcome, **kwargs)
        assert "\n" not in str(err.value)
    assert len(rig.session.events) == seen
    same = answer_review(rig.session, rid, "approve", edited="# Handoff\nGo.")  # unchanged: no edits
    assert same.edited is None
    rig.close()


def test_edits_need_a_single_approver(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path)  # quorum 2
    refused = pytest.raises(ReviewRefusedError, match="an edited document needs a single approver")
    with JsonlLog(path) as log, refused:
        vote_review(log, rid, "approve", reviewer="alice", edited=EDITED)
    assert events(path, "fsm/review/vote") == []


def test_an_edited_plan_is_what_the_model_is_told_to_carry_out(tmp_path: Path) -> None:
    rig = Rig(JsonlLog(tmp_path / "p.jsonl", header=SessionHeader(id="p", cwd=str(tmp_path))),
              SuspendingReviewChannel())
    rig.enter_plan()
    rig.open_turn()
    rig.step()
    call = rig.exit_call("# Plan\n1. do it")
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(call))
    edited = "# Plan\n1. write a test\n2. do it"
    answer_review(rig.session, pending.value.review_id, "approve", edited=edited)
    result = run(rig.resume(call))
    first, _, rest = result.text.partition("\n\n")
    assert "The reviewer edited your plan" in first and rest == edited
    rig.step(2)
    assert rig.plan.logged(rig.session) is False  # plan mode ended
    rig.close()


def test_the_cli_approves_an_edited_document_and_a_reasked_review_shows_the_diff(tmp_path: Path) -> None:
    from fsm_stage.driver import ModelReply

    path, rid = suspended(tmp_path, "verify")
    reviewers = str(write_reviewers(tmp_path))
    kept = cli(path, "--keep", rid, "--feedback", "say what to test", "--as", "alice",
               "--reviewers", reviewers, token=TOKENS["alice"])
    assert kept.exit_code == 0, kept.output
    revised = "# Handoff\nGo.\nTest the parser."
    reasked = ModelReply.call("goto_stage", {"stage": "verify", "handoff": revised})
    loop, opened = host(path, tmp_path, [reasked])
    (outcome,) = [asyncio.run(loop.resume())]
    assert outcome.reason == "suspended"
    opened.session.log.close()
    again = outcome.review_id
    listing = cli(path, "--list")
    assert f"  changes since the version kept in review {rid}:" in listing.output
    assert "  | +Test the parser." in listing.output and f"  | --- kept ({rid})" in listing.output
    row = json.loads(cli(path, "--json").output)["open"][0]
    assert row["kept_diff"]["review"] == rid and "+Test the parser." in row["kept_diff"]["diff"]

    edited = tmp_path / "edited.md"
    edited.write_text(revised + "\nAnd the printer.", encoding="utf-8")
    assert cli(path, "--keep", again, "--edited", str(edited)).exit_code == 2  # edits go with --approve
    out = cli(path, "--approve", again, "--edited", str(edited), "--as", "alice", "--reviewers", reviewers,
              token=TOKENS["alice"])
    assert out.exit_code == 0, out.output
    assert f"review {again}: approve (Approve) with edits by alice" in out.output
    assert resume(path, tmp_path) == "verify"
    (request,) = [r for r in events(path, "fsm/review/request") if r["id"] == again]
    assert Path(request["handoffPath"]).read_text(encoding="utf-8") == revised + "\nAnd the printer."


def test_an_edited_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path, rid = suspended(tmp_path, "verify")
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"# Handoff\n\xff")
    before = path.read_bytes()
    out = cli(path, "--approve", rid, "--edited", str(bad), "--as", "alice",
              "--reviewers", str(write_reviewers(tmp_path)), token=TOKENS["alice"])
    assert out.exit_code == 1 and "not UTF-8 text" in out.output and out.output.count("\n") == 1
    assert path.read_bytes() == before


def test_versions_too_long_to_diff_are_said_so_in_one_line() -> None:
    """``difflib`` is quadratic in the lines: two 12,000-line plans took 9 s on every review page
    and ``fsm-stage review``. Past ``MAX_DIFF_INPUT_LINES`` the diff is one line saying why (the
    document itself is still shown whole); up to it the diff is as before."""
    from fsm_stage.reviews._edits import MAX_DIFF_INPUT_LINES, revision_diff

    def plan(n: int, mark: str) -> str:
        return "# Plan\n" + "\n".join(f"{i}{mark if i % 2 == 0 else ''}" for i in range(n))

    long_old, long_new = plan(MAX_DIFF_INPUT_LINES, ""), plan(MAX_DIFF_INPUT_LINES, "x")
    (line,) = revision_diff(long_old, long_new, old_name="kept", new_name="now").splitlines()
    n = MAX_DIFF_INPUT_LINES
    assert line == (f"… not compared: kept has {n + 1:,} lines and now {n + 1:,}; "
                    f"versions of up to {n:,} lines are diffed")
    assert revision_diff(long_old, long_old, old_name="kept", new_name="now") == ""  # equal: no diff
    fits_old, fits_new = plan(MAX_DIFF_INPUT_LINES - 1, ""), plan(MAX_DIFF_INPUT_LINES - 1, "x")
    diff = revision_diff(fits_old, fits_new, old_name="kept", new_name="now").splitlines()
    assert diff[0] == "--- kept" and diff[1] == "+++ now" and "+0x" in diff
