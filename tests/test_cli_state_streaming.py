"""``fsm-stage state`` folds while it reads (issue 17): same report as folding ``read_log``'s list."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm_stage.cli.log_cmds import state_report, streamed_report
from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.log.dsh import read_log
from tests.shared_data import DSH_SESSIONS as CORPUS

LOGS = sorted(CORPUS.glob("*session.jsonl"))[:40] if CORPUS.is_dir() else []


@pytest.mark.skipif(not LOGS, reason="DSH corpus absent")
def test_streamed_report_matches_the_materialised_fold() -> None:
    compared = 0
    for path in LOGS:
        try:
            res = read_log(path)
        except LogFormatError:
            continue
        assert streamed_report(path, source="x") == state_report(res, source="x"), path
        if res.events:
            mid = len(res.events) // 2
            assert streamed_report(path, at=mid, source="x") == state_report(res, at=mid, source="x")
        compared += 1
    assert compared > 5


def test_at_past_the_end_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text('{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w"}\n'
                    '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n', encoding="utf-8")
    with pytest.raises(UserError, match="--at 5 is past the end of the log \\(the last seq is 0\\)"):
        streamed_report(path, at=5)
    torn = tmp_path / "t.jsonl"
    torn.write_bytes(path.read_bytes() + b'{"type":"turn/end"')
    assert streamed_report(torn)["torn_tail_offset"] == state_report(read_log(torn))["torn_tail_offset"]


@pytest.mark.skipif(not LOGS, reason="DSH corpus absent")
def test_projections_ignore_every_type_they_do_not_declare() -> None:
    """``READS`` is what lets ``state`` skip events: an undeclared type without a surface op
    must leave every projection's state object untouched (corpus logs + the bench's mix)."""
    from fsm_stage.cli.log_cmds import _projections

    checked = 0
    for path in LOGS:
        try:
            events = read_log(path).events
        except LogFormatError:
            continue
        for p in _projections():
            reads = p.READS  # type: ignore[attr-defined]
            state = p.init()
            for ev in events:
                new = p.apply(state, ev)
                if ev.type not in reads and ev.surface_op is None and ev.source_event_seqs is None:
                    assert new is state, (path, p.key, ev)
                    checked += 1
                state = new
    assert checked > 1000
