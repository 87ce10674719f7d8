"""Checkpoints: a cold read seeks to the tail when the checkpoint matches, refolds otherwise (B103)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from log_helpers import DSH_DIR, PLAN_REVIEW, dsh_files, is_session_log

from fsm_stage.errors import LogFormatError
from fsm_stage.log.checkpoints import CheckpointStore, checkpoint_log, cold_fold
from fsm_stage.log.dsh import PackedRow, RecordDecoder, UnreadEvent, read_log
from fsm_stage.log.events import Event, SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import (
    PlanState,
    PlanView,
    ProjectionCursor,
    StageProjection,
    fold,
    routes,
    standard_projections,
)

HEADER = SessionHeader(id="s", created_at=7, cwd="/w")


def make_log(path: Path, n: int) -> None:
    with JsonlLog(path, header=HEADER, clock=lambda: 1) as log:
        for i in range(n):
            log.append("step/start", {"turn": 1, "step": i})
        log.append("plan/mode", {"active": True})


def full_states(path: Path) -> dict[str, Any]:
    events = read_log(path).events
    return {p.key: fold(p, events) for p in standard_projections()}


def test_second_cold_read_resumes_and_folds_only_new_events(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 50)
    first = cold_fold(path, standard_projections(), store=store)
    assert first.resumed_from is None and first.events_applied == 51 and first.last_seq == 50
    again = cold_fold(path, standard_projections(), store=store)
    assert again.resumed_from == 50 and again.events_applied == 0
    with JsonlLog(path) as log:
        log.append("plan/mode", {"active": False})
    third = cold_fold(path, standard_projections(), store=store)
    assert third.resumed_from == 50 and third.events_applied == 1
    assert dict(third.states) == full_states(path)


def test_packed_row_watermark_resumes_mid_log(tmp_path: Path) -> None:
    if not (DSH_DIR / PLAN_REVIEW).is_file():
        pytest.skip("corpus absent")
    path, store = tmp_path / "pr.jsonl", CheckpointStore(tmp_path / "ck")
    shutil.copy(DSH_DIR / PLAN_REVIEW, path)
    cold_fold(path, standard_projections(), store=store)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(
            json.dumps({"type": "command/run", "data": {"commandId": "c9", "name": "plan", "args": ""}})
            + "\n"
        )
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from == 342 and res.events_applied == 1 and res.last_seq == 343
    assert PlanView().view(res.states["plan"]) == {"active": False, "pending": True}
    assert dict(res.states) == full_states(path)


@pytest.mark.parametrize("damage", ["rewrite", "truncate", "recreate", "version"])
def test_mismatch_refolds_from_the_start(
    tmp_path: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B103: a checkpoint from another state version, identity or log content is discarded and
    the log is refolded from the start (docs/session-log.md)."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    if damage == "rewrite":  # the watermark line changed in place
        data = path.read_bytes().replace(b'"active":true', b'"active":false')
        path.write_bytes(data)
    elif damage == "truncate":
        path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-2]))
    elif damage == "recreate":
        path.unlink()
        with JsonlLog(path, header=SessionHeader(id="s", created_at=8, cwd="/w"), clock=lambda: 1) as log:
            for i in range(25):
                log.append("step/start", {"turn": 1, "step": i})
    else:  # B103: a row from another state version is discarded, never migrated
        monkeypatch.setattr(PlanView, "STATE_VERSION", 3)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and res.checkpoint_note
    assert res.events_applied == res.last_seq + 1
    assert dict(res.states) == full_states(path)


def test_corrupt_checkpoint_file_is_ignored(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 3)
    cold_fold(path, standard_projections(), store=store)
    store.path_for(path).write_text("{not json", encoding="utf-8")
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and res.events_applied == 4


def test_checkpoint_from_live_cursors(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    with JsonlLog(path, header=HEADER, clock=lambda: 1) as log:
        cursors = [ProjectionCursor(p, log) for p in (PlanView(), StageProjection())]
        log.append("command/run", {"commandId": "c", "name": "plan", "args": ""})
        assert checkpoint_log(store, log, cursors)
        log.append("plan/mode", {"active": True})
    res = cold_fold(path, [PlanView(), StageProjection()], store=store)
    assert res.resumed_from == 0 and res.events_applied == 1
    assert res.states["plan"] == PlanState(True, None, res.states["plan"].running)
    assert PlanView().view(res.states["plan"]) == {"active": True, "pending": False}


def test_unwritable_store_is_fail_soft(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    make_log(path, 2)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = cold_fold(path, standard_projections(), store=CheckpointStore(blocker / "sub"))
    assert res.last_seq == 2


# -- rewrites the watermark line does not show ------------------------------------------------


def _rewrite_in_place(path: Path, old: bytes, new: bytes, *, keep_mtime: bool = False) -> None:
    """Overwrite the first ``old`` with ``new`` (same length) in place: same inode, same size.
    The modification time is moved one second on (what a later write shows), or kept."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    at = data.index(old)
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(new)
    mtime = st.st_mtime_ns if keep_mtime else st.st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(st.st_atime_ns, mtime))


def test_same_size_rewrite_before_the_watermark_is_detected(tmp_path: Path) -> None:
    """A rewrite before the watermark line that keeps the size and the watermark line: the
    modification time of an unchanged-size file moved, so the log is refolded."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    _rewrite_in_place(path, b'"step":3}', b'"step":4}')
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and "rewritten in place" in (res.checkpoint_note or "")
    assert dict(res.states) == full_states(path)


def test_replaced_file_with_the_same_bytes_at_the_watermark_is_detected(tmp_path: Path) -> None:
    """A log replaced by another file (rename over it: a new inode) is refolded even when size,
    identity and the watermark line are the same."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    other = tmp_path / "other.jsonl"
    other.write_bytes(path.read_bytes().replace(b'"step":3}', b'"step":4}'))
    os.replace(other, path)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and "replaced" in (res.checkpoint_note or "")


def test_changed_header_line_is_detected(tmp_path: Path) -> None:
    """The header line is hashed: a header edited in place (same id, createdAt, cwd) refolds."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    header = SessionHeader(id="s", created_at=7, cwd="/w", origin="cli")
    with JsonlLog(path, header=header, clock=lambda: 1) as log:
        log.append("step/start", {"turn": 1, "step": 0})
    cold_fold(path, standard_projections(), store=store)
    _rewrite_in_place(path, b'"origin":"cli"', b'"origin":"web"', keep_mtime=True)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from is None and "header" in (res.checkpoint_note or "")


def test_known_limit_in_place_rewrite_keeping_size_and_mtime(tmp_path: Path) -> None:
    """What docs/log-decisions.md states is not detected: an in-place rewrite before the watermark line
    that keeps the file size, its inode and modification time (or that is followed by an
    append, which moves both anyway). Logs are append-only, so this needs deliberate tampering."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 20)
    cold_fold(path, standard_projections(), store=store)
    _rewrite_in_place(path, b'"step":3}', b'"step":4}', keep_mtime=True)
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from == 20


def test_live_checkpoint_survives_its_own_appends(tmp_path: Path) -> None:
    """The writer-side checkpoint records the inode and time of the file it wrote: later
    appends (size grows) still resume."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    with JsonlLog(path, header=HEADER, clock=lambda: 1) as log:
        cursors = [ProjectionCursor(p, log) for p in standard_projections()]
        log.append("step/start", {"turn": 1, "step": 0})
        assert checkpoint_log(store, log, cursors)
        res = cold_fold(path, standard_projections(), store=store, write=False)
        assert res.resumed_from == 0
        log.append("step/start", {"turn": 1, "step": 1})
    res = cold_fold(path, standard_projections(), store=store)
    assert res.resumed_from == 0 and res.events_applied == 1


def test_checkpoint_store_writes_with_umask_permissions_and_no_leftovers(tmp_path: Path) -> None:
    """Checkpoints are written with ``fileio.atomic_write``: umask permissions, no temp files."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 2)
    old = os.umask(0o022)
    try:
        cold_fold(path, standard_projections(), store=store)
    finally:
        os.umask(old)
    (saved,) = (tmp_path / "ck").iterdir()
    assert saved == store.path_for(path) and saved.stat().st_mode & 0o777 == 0o644


class ChunkCount:
    """A projection that reads ``assistant/chunk``: cold folds must build packed rows' events."""

    key = "chunks"
    STATE_VERSION = 1
    READS = frozenset({"assistant/chunk"})

    def init(self) -> tuple[int, str]:
        return (0, "")

    def apply(self, state: tuple[int, str], event: Event) -> tuple[int, str]:
        if event.type != "assistant/chunk":
            return state
        chunk = event.data["chunk"]
        return (state[0] + 1, state[1] + chunk.get("text", chunk.get("argumentsDelta", "")))

    def dump(self, state: tuple[int, str]) -> Any:
        return list(state)

    def load(self, raw: Any) -> tuple[int, str]:
        return (int(raw[0]), str(raw[1]))


def packed_logs() -> list[str]:
    return [n for n in dsh_files() if is_session_log(DSH_DIR / n) and "-chunks" in (DSH_DIR / n).read_text()]


@pytest.mark.parametrize("name", packed_logs() or ["corpus-absent"])
def test_cold_fold_skipping_packed_rows_matches_the_full_fold(tmp_path: Path, name: str) -> None:
    """Packed chunk rows skipped by their span (no projection reads ``assistant/chunk``) give the
    states, counts and watermark of folding every materialised event; a projection that reads
    chunks still sees every one of them."""
    if name == "corpus-absent":
        pytest.skip("DSH corpus absent")
    path = tmp_path / name
    shutil.copy(DSH_DIR / name, path)
    events = read_log(path).events
    res = cold_fold(path, standard_projections())
    assert dict(res.states) == full_states(path)
    assert res.events_applied == len(events) and res.last_seq == events[-1].seq
    chunks = [e for e in events if e.type == "assistant/chunk"]
    assert chunks, "the corpus file holds packed rows"
    with_chunks = cold_fold(path, [*standard_projections(), ChunkCount()])
    assert with_chunks.states["chunks"] == fold(ChunkCount(), events)
    assert with_chunks.states["chunks"][0] == len(chunks)
    assert {k: v for k, v in with_chunks.states.items() if k != "chunks"} == dict(res.states)


def test_checkpoint_after_a_trailing_packed_row_resumes_after_it(tmp_path: Path) -> None:
    path, store = tmp_path / "p.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 3)  # seqs 0..3
    row = {"type": "text-chunks", "seq0": 4, "time0": 5,
           "data": {"turn": 1, "step": 0, "index": 0, "texts": ["a", "b", "c"], "dt": [1, 1]}}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    first = cold_fold(path, standard_projections(), store=store)
    assert first.last_seq == 6 and first.events_applied == 7
    with JsonlLog(path) as log:
        assert log.append("plan/mode", {"active": False}).seq == 7
    again = cold_fold(path, standard_projections(), store=store)
    assert again.resumed_from == 6 and again.events_applied == 1 and again.last_seq == 7
    assert dict(again.states) == full_states(path)
    assert PlanView().view(again.states["plan"])["active"] is False


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 1, "step": 0, "index": 0, "texts": ["a", 2], "dt": [1]},
        {"turn": 1, "step": 0, "index": 0, "texts": ["a", "b"], "dt": []},
        {"turn": "1", "step": 0, "index": 0, "texts": ["a"], "dt": []},
    ],
)
def test_cold_fold_refuses_a_malformed_packed_row_it_does_not_build(tmp_path: Path, data: Any) -> None:
    path = tmp_path / "bad.jsonl"
    make_log(path, 1)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "text-chunks", "data": data}) + "\n")
    with pytest.raises(LogFormatError, match="malformed text-chunks row"):
        cold_fold(path, standard_projections())


def test_packed_row_builds_the_eager_decoders_events() -> None:
    rec = {"type": "tool-call-chunks", "seq0": 3, "time0": 10,
           "data": {"turn": 2, "step": 1, "index": 0, "id": "c1", "name": "goto_stage",
                    "args": ['{"a"', ': 1}'], "dt": [4]}}
    eager = RecordDecoder(source="x", next_seq=3).decode(rec, 1)
    lazy = RecordDecoder(source="x", next_seq=3, lazy_packed=True).decode(rec, 1)
    assert isinstance(lazy, PackedRow) and (lazy.seq0, lazy.size, len(lazy)) == (3, 2, 2)
    assert list(lazy) == list(eager) and lazy[-1] == eager[-1] and lazy[0:1] == list(eager)[0:1]
    assert [e.time for e in lazy] == [10, 14]


def test_unread_event_builds_the_eager_decoders_event() -> None:
    """A plain event of a type nobody reads is checked like any other and built only when read;
    every other shape (another type, an envelope with more keys, a seq out of order) is not lazy."""
    rec = {"type": "step/start", "seq": 4, "time": 9, "data": {"turn": 1, "step": 2}}
    eager = RecordDecoder(source="x", next_seq=4).decode(rec, 1)
    decoder = RecordDecoder(source="x", next_seq=4, unread=frozenset({"step/start"}))
    lazy = decoder.decode(rec, 1)
    assert isinstance(lazy, UnreadEvent) and (lazy.seq0, lazy.size, len(lazy)) == (4, 1, 1)
    assert decoder.next_seq == 5
    assert list(lazy) == list(eager) and lazy[-1] == eager[0] and lazy[0:1] == list(eager)
    other = decoder.decode({"type": "turn/end", "seq": 5, "time": 9, "data": {}}, 2)
    assert type(other) is list and other[0].type == "turn/end"
    flagged = decoder.decode({**rec, "seq": 6, "ignorable": True}, 3)
    assert type(flagged) is list and flagged[0].ignorable
    with pytest.raises(Exception, match="seq 9 where 7 was expected"):
        decoder.decode({**rec, "seq": 9}, 4)


def test_routes_name_the_types_no_projection_reads() -> None:
    route = routes(standard_projections())
    assert "step/start" in route.unread and "assistant/chunk" in route.unread
    assert not route.unread & {"user/message", "turn/start", "plan/mode"}
    with_chunks = routes([*standard_projections(), ChunkCount()]).unread
    assert "step/start" in with_chunks and "assistant/chunk" not in with_chunks


def test_checkpoint_on_an_unread_event_resumes_after_it(tmp_path: Path) -> None:
    path, store = tmp_path / "u.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 2)
    with JsonlLog(path) as log:
        last = log.append("step/start", {"turn": 1, "step": 0}).seq  # nobody reads it
    first = cold_fold(path, standard_projections(), store=store)
    assert first.last_seq == last and first.events_applied == last + 1
    with JsonlLog(path) as log:
        log.append("plan/mode", {"active": True})
    again = cold_fold(path, standard_projections(), store=store)
    assert again.resumed_from == last and again.events_applied == 1 and again.last_seq == last + 1
    assert dict(again.states) == full_states(path)


def test_a_strict_read_does_not_resume_from_a_lenient_checkpoint(tmp_path: Path) -> None:
    """A lenient read checkpoints past a line a strict read refuses; a strict read then refolds
    from the start and refuses the log instead of trusting the lenient read's watermark."""
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    with JsonlLog(path, header=HEADER, clock=lambda: 1, allow_unknown_types=True) as log:
        log.append("step/start", {"turn": 1, "step": 0})
        log.append("made/up", {})  # not ignorable: a strict reader refuses it
        log.append("plan/mode", {"active": True})
    lenient = cold_fold(path, standard_projections(), store=store)
    assert lenient.unknown_types == {"made/up": 1}
    with pytest.raises(LogFormatError, match="made/up"):
        cold_fold(path, standard_projections(), store=store, strict=True)
    # the lenient read's checkpoint is still used by lenient reads
    assert cold_fold(path, standard_projections(), store=store).resumed_from == 2


def test_a_strict_read_resumes_from_its_own_checkpoint(tmp_path: Path) -> None:
    path, store = tmp_path / "s.jsonl", CheckpointStore(tmp_path / "ck")
    make_log(path, 5)
    cold_fold(path, standard_projections(), store=store)  # lenient: not trusted by a strict read
    first = cold_fold(path, standard_projections(), store=store, strict=True)
    assert first.resumed_from is None
    assert first.checkpoint_note is not None and "lenient" in first.checkpoint_note
    again = cold_fold(path, standard_projections(), store=store, strict=True)
    assert again.resumed_from == 5 and again.events_applied == 0
    # a lenient read trusts a strict read's checkpoint
    assert cold_fold(path, standard_projections(), store=store).resumed_from == 5
