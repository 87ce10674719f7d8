"""Crash repair matches DSH's own output (dsh-log-format §8 item 8): the recorded
`…tool-outcome-unknown__session.expected.jsonl` shows the closers DSH wrote for a turn that
died after `tool/call`; `closers()` over the events before them writes the same rows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shared_data import DSH_SESSIONS

from fsm_stage.driver._repair import closers
from fsm_stage.log.events import Event

FIXTURE = DSH_SESSIONS / ("examples__headless-agent__tests__semantic-checkpoint-snapshots"
                          "__tool-outcome-unknown__session.expected.jsonl")


def _event(i: int, row: dict[str, Any]) -> Event:
    seqs = row.get("sourceEventSeqs")
    return Event(row["type"], i, 0, row["data"], row.get("surfaceOp"),
                 None if seqs is None else tuple(seqs))


def test_closers_reproduce_the_recorded_dsh_crash_repair() -> None:
    """Same types, data (ids, error names and codes, DSH's text), surface op and source seqs."""
    if not FIXTURE.is_file():
        pytest.skip(f"shared DSH corpus not found at {FIXTURE}")
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()[1:]]
    end = next(i for i, r in enumerate(rows) if r["type"] == "turn/end")
    first = next(i for i, r in enumerate(rows) if r["type"] == "tool/result")
    events = [_event(i, r) for i, r in enumerate(rows[:first])]
    written = closers(events)
    expected = rows[first:end + 1]
    assert [c.type for c in written] == [r["type"] for r in expected]
    for got, want in zip(written, expected, strict=True):
        assert got.data == want["data"]
        assert got.surface_op == want.get("surfaceOp")
        want_seqs = want.get("sourceEventSeqs")
        assert (None if got.source_event_seqs is None else list(got.source_event_seqs)) == want_seqs
