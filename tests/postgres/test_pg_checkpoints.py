"""Checkpointed opens of a PostgreSQL session (``fsm_stage.log.pg_checkpoints``): a session opened
from a checkpoint holds only the tail and folds to exactly the state of a full read, for real
DSH sessions (imported, with a checkpoint mid-session) and for concurrent writers; a checkpoint
that does not validate is ignored (the session is read from the start)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pg_testing import TempCluster
from shared_data import DSH_SESSIONS

from fsm_stage.log import read_log, read_log_data
from fsm_stage.log.events import Event, NewEvent, Replace, SessionHeader
from fsm_stage.log.pg_checkpoints import checkpointed
from fsm_stage.log.pg_transfer import import_jsonl
from fsm_stage.log.postgres import PostgresLog, connect, split_location
from fsm_stage.log.projections import OpenTurn, fold
from fsm_stage.log.surface import Surface
from fsm_stage.runtime.session import TURN_FOLD, Session

CORPUS = sorted(DSH_SESSIONS.glob("*.jsonl")) if DSH_SESSIONS.is_dir() else []


def _open(url: str) -> PostgresLog:
    conninfo, session = split_location(url)
    assert session is not None
    return PostgresLog(conninfo, session)


def _assert_same_state(log: PostgresLog, events: list[Event]) -> None:
    """``log`` (however opened) folds to the state of a full fold of ``events``."""
    assert len(log) == len(events)
    full = Surface(protect_system_head=log.surface.protect_system_head)
    full.extend(events)
    assert log.surface.dump() == full.dump()
    session = Session(log)
    for p in checkpointed():
        assert session.read(p) == fold(p, events), p.key
    assert session.read(TURN_FOLD) == fold(OpenTurn(), events)


def _reference(log: PostgresLog) -> list[Event]:
    """The session's events read independently of the store (its exported JSONL bytes)."""
    return read_log_data(log.export_bytes()).events


def _turns(n: int) -> Iterator[list[NewEvent]]:
    """Batches of a plausible session: turns with messages, replaces and stage events."""
    for t in range(n):
        yield [NewEvent("turn/start", {"turn": t + 1}),
               NewEvent("user/message", {"role": "user", "content": f"q{t}"}, "append"),
               NewEvent("request/header", {"reason": "turn"}),
               NewEvent("assistant/message", {"message": {"role": "assistant", "content": f"a{t}"}},
                        "append"),
               NewEvent("fsm/plan-mode", {"active": t % 3 == 0}),
               NewEvent("turn/end", {"turn": t + 1})]


def _write_session(url: str, turns: int, every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PostgresLog, "checkpoint_every", every)
    conninfo, session = split_location(url)
    assert session is not None
    with PostgresLog(conninfo, session, create=SessionHeader(session, cwd="/w"),
                     allow_unknown_types=True) as log:
        for batch in _turns(turns):
            log.append_many(batch)
            if len(log.surface) > 6:  # fold the first two messages into one (a replace)
                a, b = log.surface.nodes[0], log.surface.nodes[1]
                log.append("user/message", {"role": "user", "content": "summary"}, surface_op=Replace(a, b),
                           source_event_seqs=[a, b])


def test_open_from_a_checkpoint_holds_the_tail_and_equals_a_full_fold(
        pg_url: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    url = pg_url("cp")
    _write_session(url, 120, 50, monkeypatch)
    with _open(url) as log:
        assert log.checkpoint_note.startswith("opened from the checkpoint at seq ")
        assert log.events.held < 120 < len(log)
        events = _reference(log)
        _assert_same_state(log, events)
        assert log.events[3] == events[3] and log.events[-1] == events[-1]
        assert list(log.events) == events and log.events[2:9] == events[2:9]
        assert log.projection_seed(TURN_FOLD) is not None  # TurnFold folds exactly as OpenTurn

        class Other(OpenTurn):
            def apply(self, state: Any, event: Event) -> Any:
                return state

        assert log.projection_seed(Other()) is None  # another fold: never seeded
        log.append("user/message", {"role": "user", "content": "more"}, surface_op="append")
        _assert_same_state(log, _reference(log))


def _set_body(url: str, change: Callable[[str], str]) -> None:
    conninfo, session = split_location(url)
    with connect(conninfo) as conn:
        body = conn.execute("SELECT body FROM fsm_checkpoints WHERE session = %s", (session,)).fetchone()[0]
        conn.execute("UPDATE fsm_checkpoints SET body = %s WHERE session = %s", (change(body), session))


@pytest.mark.parametrize(("change", "note"), [
    (lambda b: b[:-5], "not JSON"),
    (lambda b: b.replace('"format":1', '"format":99'), "another format"),
    (lambda b: b.replace('"header":"', '"header":"0'), "header changed"),
    (lambda b: b.replace('"row":[', '"row":[1'), "watermark row changed"),
    (lambda b: b.replace('"generation":', '"generation":-'), "surface does not load"),
    (lambda b: b.replace('"ver":2', '"ver":7', 1), "of another version"),
    (lambda b: b.replace('"lastTurn":', '"lastTurnX":'), "does not load"),
])
def test_a_checkpoint_that_does_not_validate_is_ignored(
        pg_url: Callable[..., str], monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str],
        note: str) -> None:
    url = pg_url("bad")
    _write_session(url, 40, 30, monkeypatch)
    _set_body(url, change)
    with _open(url) as log:
        assert note in log.checkpoint_note
        assert log.events.held == len(log) and log.events.base == 0
        assert log.projection_seed(TURN_FOLD) is None
        _assert_same_state(log, _reference(log))


def test_a_changed_watermark_row_makes_the_checkpoint_unusable(
        pg_url: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    url = pg_url("row")
    _write_session(url, 40, 30, monkeypatch)
    conninfo, session = split_location(url)
    with connect(conninfo) as conn:
        conn.execute("UPDATE fsm_events SET line = line || ' ' WHERE session = %s AND seq = "
                     "(SELECT seq FROM fsm_checkpoints WHERE session = %s)", (session, session))
    with _open(url) as log:
        assert "watermark row changed" in log.checkpoint_note
        _assert_same_state(log, _reference(log))


def test_concurrent_writers_checkpoint_without_serving_a_wrong_state(
        pg_url: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PostgresLog, "checkpoint_every", 7)
    url = pg_url("race")
    conninfo, session = split_location(url)
    assert session is not None
    PostgresLog(conninfo, session, create=SessionHeader(session)).close()
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            with _open(url) as log:
                for i in range(60):
                    log.append("user/message", {"role": "user", "content": f"{w}-{i}"}, surface_op="append")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with _open(url) as log:
        assert len(log) == 240 and log.checkpoint_note.startswith("opened from")
        _assert_same_state(log, _reference(log))


def _real_logs() -> list[tuple[Any, bytes]]:
    out = []
    for path in CORPUS:
        try:
            res = read_log(path)
        except Exception:
            continue
        if not res.compressed and len(res.events) >= 4:
            out.append((res, path.read_bytes()))
    return out


def test_real_dsh_sessions_open_from_a_checkpoint_mid_session(pg_cluster: TempCluster) -> None:
    logs = _real_logs()
    if not logs:
        pytest.skip(f"DSH corpus not found at {DSH_SESSIONS}")
    done = 0
    for k, (res, data) in enumerate(logs):
        full_id, part_id = f"dsh-full-{k}", f"dsh-part-{k}"
        raw = data.replace(f'"id":"{res.header.id}"'.encode(), f'"id":"{full_id}"'.encode(), 1)
        if raw == data:
            continue  # header with other spacing
        import_jsonl(raw, pg_cluster.dsn + f"&session={full_id}", replace=True)
        with _open(pg_cluster.url(full_id)) as log:  # the import checkpointed its end
            assert log.checkpoint_note.startswith("opened from") and log.events.held == 0
            _assert_same_state(log, res.events)
        cut = read_log_data(raw).line_offsets[len(res.events) // 2]
        if cut <= read_log_data(raw).line_offsets[0]:
            continue
        prefix = raw[:cut].replace(f'"id":"{full_id}"'.encode(), f'"id":"{part_id}"'.encode(), 1)
        head = import_jsonl(prefix, pg_cluster.dsn + f"&session={part_id}", replace=True)
        with connect(pg_cluster.dsn) as conn:  # the rest of the file's rows, after the checkpoint
            conn.execute("INSERT INTO fsm_events (session, seq, n, line) SELECT %s, seq, n, line "
                         "FROM fsm_events WHERE session = %s AND seq >= %s", (part_id, full_id, head.events))
        with _open(pg_cluster.url(part_id)) as log:
            assert log.checkpoint_note == f"opened from the checkpoint at seq {head.events - 1}"
            assert log.events.held == len(res.events) - head.events
            _assert_same_state(log, res.events)
            assert list(log.events) == res.events
        done += 1
    assert done >= 20


def test_db_init_migrates_a_version_1_schema(fresh_db: Callable[[], str]) -> None:
    from fsm_stage.log.pg_schema import MIGRATIONS, SCHEMA_VERSION, migrate

    dsn = fresh_db()
    with connect(dsn) as conn:
        conn.execute("CREATE TABLE fsm_schema (id integer PRIMARY KEY, version integer NOT NULL)")
        for sql in MIGRATIONS[1]:
            conn.execute(sql)
        conn.execute("INSERT INTO fsm_schema VALUES (1, 1)")
        assert migrate(conn) == (1, SCHEMA_VERSION)
    with PostgresLog(dsn, "after", create=SessionHeader("after")) as log:
        log.append("user/message", {"role": "user", "content": "x"}, surface_op="append")
        assert log.checkpoint()
