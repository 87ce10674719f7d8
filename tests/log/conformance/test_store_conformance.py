"""One behaviour for every ``EventLog`` store: ``MemoryLog``, ``JsonlLog`` and ``PostgresLog``.

Each test runs once per store (the ``store`` fixture): append/read, all-or-nothing batches,
surface ops, failed writes, projections, restart, conditional appends. The PostgreSQL runs
use a throwaway server (``pg_fixture``; skipped with a reason outside CI when none can start).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Store

from fsm_stage.errors import AppendConflictError, LogWriteError
from fsm_stage.log.events import Event, NewEvent, Replace
from fsm_stage.log.projections import fold, standard_projections
from fsm_stage.log.surface import fold_surface


def msg(text: str, **kw: Any) -> NewEvent:
    return NewEvent("user/message", {"content": [{"type": "text", "text": text}]}, **kw)


CONVERSATION = [
    NewEvent("turn/start", {"turn": 1}),
    msg("hello", surface_op="append"),
    NewEvent("assistant/message", {"content": [{"type": "text", "text": "hi"}]}, surface_op="append"),
    msg("again", surface_op="append"),
    NewEvent("fsm/note", {"n": "é ✓ \u2028 \"quoted\""}),
    msg("summary", surface_op=Replace(1, 3), source_event_seqs=(1, 2, 3)),
    NewEvent("turn/end", {"turn": 1, "reason": "completed"}),
]


def fields(evs: Any) -> list[tuple[Any, ...]]:
    return [(e.type, e.seq, e.time, e.data, e.surface_op, e.source_event_seqs, e.ignorable) for e in evs]


def test_append_and_read_back(store: Store) -> None:
    log = store.open(clock=lambda: 42)
    assert len(log) == 0 and log.header == store.header
    one = log.append("turn/start", {"turn": 1})
    assert one == Event("turn/start", 0, 42, {"turn": 1})
    rest = log.append_many(CONVERSATION[1:])
    assert [e.seq for e in rest] == list(range(1, len(CONVERSATION)))
    assert rest[3].ignorable is True  # fsm/… is written ignorable
    again = store.reopen(log)
    assert again.header == store.header
    assert fields(again.events) == fields(log.events)
    assert list(again.events) == list(log.events)


def test_a_refused_event_in_a_batch_writes_nothing(store: Store) -> None:
    log = store.open()
    log.append_many(CONVERSATION[:2])
    with pytest.raises(LogWriteError, match="unknown event type"):
        log.append_many([msg("ok", surface_op="append"), NewEvent("made/up", {})])
    with pytest.raises(LogWriteError):
        bad = msg("bad", surface_op=Replace(0, 9), source_event_seqs=(0,))
        log.append_many([msg("ok", surface_op="append"), bad])
    with pytest.raises(LogWriteError, match="not JSON"):
        log.append_many([NewEvent("fsm/a", {}), NewEvent("fsm/b", {"x": float("nan")})])
    assert len(log) == 2 and len(log.surface) == 1
    again = store.reopen(log)
    assert fields(again.events) == fields(log.events)
    assert again.append("fsm/after", {}).seq == 2  # usable after refusals


def test_surface_ops_append_and_replace(store: Store) -> None:
    log = store.open()
    log.append_many(CONVERSATION)
    assert fold_surface(log.events, protect_system_head=True) == [0 + 5]
    assert len(log.surface) == 1
    again = store.reopen(log)
    assert len(again.surface) == 1 and again.surface.node_type(5) == "user/message"
    again.append("assistant/message", {"content": []}, surface_op="append")
    assert fold_surface(again.events) == [5, 7]


def test_a_failed_write_leaves_the_log_unchanged(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    log = store.open()
    log.append_many(CONVERSATION[:3])
    before = fields(log.events)
    with store.failing_write(log, monkeypatch), pytest.raises(LogWriteError):
        log.append_many([msg("lost", surface_op="append"), NewEvent("fsm/lost", {})])
    assert fields(log.events) == before and len(log.surface) == 2
    if store.kind == "jsonl" and log.closed:  # a write error that left it unusable: reopen
        log = store.reopen(log)
    after = log.append("fsm/next", {})
    assert after.seq == 3
    again = store.reopen(log)
    assert [e.type for e in again.events] == [e[0] for e in before] + ["fsm/next"]


def test_projections_fold_the_same_on_every_store(store: Store) -> None:
    log = store.open(clock=lambda: 7)
    log.append_many(CONVERSATION)
    log.append_many(EXTRA)
    again = store.reopen(log)
    expected = [fold(p, EXPECTED_EVENTS) for p in standard_projections()]
    assert [fold(p, again.events) for p in standard_projections()] == expected


EXTRA = [NewEvent("plan/mode", {"active": True}), NewEvent("turn/start", {"turn": 2})]
EXPECTED_EVENTS = [
    Event(s.type, i, 7, s.data, s.surface_op,
          None if s.source_event_seqs is None else tuple(s.source_event_seqs), s.type.startswith("fsm/"))
    for i, s in enumerate([*CONVERSATION, *EXTRA])
]


def test_restart_reads_back_and_continues(store: Store) -> None:
    log = store.open()
    log.append_many(CONVERSATION[:4])
    for _ in range(3):
        log = store.reopen(log)
        log.append("fsm/restarted", {"at": len(log)})
    assert [e.seq for e in log.events] == list(range(7))
    assert [e.data["at"] for e in log.events[4:]] == [4, 5, 6]


def test_a_conditional_append_from_a_stale_position_conflicts(store: Store) -> None:
    if not store.conditional:
        pytest.skip(f"{store.kind}: append_many has no expect_last_seq on this branch yet")
    log = store.open()
    assert log.append("fsm/a", {}, expect_last_seq=-1).seq == 0
    log.append_many([NewEvent("fsm/b", {})], expect_last_seq=0)
    with pytest.raises(AppendConflictError) as err:
        log.append_many([NewEvent("fsm/c", {}), NewEvent("fsm/d", {})], expect_last_seq=0)
    assert (err.value.expected, err.value.actual) == (0, 1)
    assert len(store.reopen(log)) == 2


def test_conditional_appends_from_threads_sharing_one_handle_land_once_per_position(store: Store) -> None:
    """Threads of one process sharing a log handle may race for the same end: each position
    is won by exactly one conditional append (the check and the write are one step), the
    others conflict, and the seqs stay contiguous."""
    import sys
    import threading

    log = store.open()
    won: list[int] = []
    guard = threading.Lock()

    def writer(k: int) -> None:
        for i in range(150):
            expect = len(log.events) - 1
            try:
                log.append("fsm/race", {"writer": k, "i": i}, expect_last_seq=expect)
            except AppendConflictError:
                continue
            with guard:
                won.append(expect)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert sorted(won) == list(range(-1, len(won) - 1))  # one winner per position
    assert [e.seq for e in log.events] == list(range(len(log.events))) and len(log.events) == len(won)


def test_hostile_strings_and_nesting_are_kept_or_refused_in_one_line(store: Store) -> None:
    """A lone surrogate (a file name that is not UTF-8, decoded with ``surrogateescape``) is
    kept and reads back as the same string; data nested past the encoder's recursion limit is a
    ``LogWriteError`` (it was a raw ``UnicodeEncodeError`` / ``RecursionError``), writing nothing."""
    log = store.open()
    name = "report-\udcff.txt"
    log.append("fsm/listing", {"files": [name], "\udc80key": 1})
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(LogWriteError, match="not JSON"):
        log.append("fsm/deep", {"x": deep})
    again = store.reopen(log)
    assert len(again) == 1 and again.events[0].data == {"files": [name], "\udc80key": 1}
