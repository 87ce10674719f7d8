"""PostgreSQL client hardening: a server restart heals (reads retried, appends looked up or
rewritten, listeners reconnected), every database failure is one typed line (exit 75 when it is
transient), session ids are validated, passwords never printed, a half-made schema is completed
or refused in one line, and a connection pool serves many session logs."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner
from pg_fixture import migrated_cluster
from pg_testing import TempCluster

from fsm_stage.cli import EX_TEMPFAIL, main
from fsm_stage.errors import DatabaseError, LogFormatError, UserError
from fsm_stage.log import open_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.pg_connect import MAX_SESSION_ID, connect, connection_pool, redact, split_location
from fsm_stage.log.pg_schema import migrate
from fsm_stage.log.postgres import PostgresLog


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[TempCluster]:
    """A cluster of this module's own: its tests stop and restart the server."""
    with migrated_cluster() as cluster:
        yield cluster


def _header(sid: str) -> SessionHeader:
    return SessionHeader(sid)


def test_a_server_restart_heals_reads_appends_and_a_waiting_listener(own_cluster: TempCluster) -> None:
    url = own_cluster.url("heal")
    writer = open_log(url, create=_header("heal"))
    reader = open_log(url)
    writer.append("fsm/note", {"text": "before"})
    assert reader.wait_for_events(5) == 1  # the listener is connected now
    own_cluster.restart()
    assert reader.refresh() == 0  # a dropped connection: reconnected and read again, no error
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(reader.wait_for_events(20)))
    waiter.start()
    event = writer.append("fsm/note", {"text": "after"})
    waiter.join(30)
    assert not waiter.is_alive() and got and got[0] >= 1
    assert [e.seq for e in reader.events] == [0, 1] and reader.events[1].data == event.data
    assert writer.export_bytes() == reader.export_bytes()
    writer.close()
    reader.close()


def test_a_stopped_server_is_a_transient_one_line_error_and_the_log_heals_after(
        own_cluster: TempCluster) -> None:
    url = own_cluster.url("down")
    log = open_log(url, create=_header("down"))
    own_cluster.stop_server()
    try:
        with pytest.raises(DatabaseError, match="cannot connect") as err:
            log.refresh()
        assert "\n" not in str(err.value) and err.value.transient
        with pytest.raises(DatabaseError) as err:
            log.append("fsm/note", {"text": "x"})
        assert err.value.transient
        with pytest.raises(DatabaseError) as err:
            log.wait_for_events(0.3)  # the listener cannot reconnect before the time runs out
        code, _, stderr = cli("state", url)
        assert code == EX_TEMPFAIL and stderr.count("\n") == 1 and "Traceback" not in stderr
    finally:
        own_cluster.start_server()
    log.append("fsm/note", {"text": "back"})
    assert len(log) == 1 and open_log(url).events[0].data["text"] == "back"
    log.close()


def test_a_connection_pool_serves_many_session_logs(own_cluster: TempCluster) -> None:
    pool = connection_pool(own_cluster.dsn, max_size=2)
    try:
        logs = [PostgresLog(own_cluster.dsn, f"pool-{i}", create=_header(f"pool-{i}"), pool=pool)
                for i in range(12)]
        for i, log in enumerate(logs):
            log.append("fsm/note", {"text": f"m{i}"})
        assert pool.get_stats()["pool_size"] <= 2
        own_cluster.restart()
        for log in logs:  # the pool replaces its broken connections
            log.append("fsm/note", {"text": "again"})
        again = open_log(own_cluster.url("pool-5"))
        assert [e.data["text"] for e in again.events] == ["m5", "again"]
        again.close()
        for log in logs:
            log.close()
    finally:
        pool.close()


BAD_IDS = [
    ("nul", "a%00b", "control character U+0000"),
    ("newline", "a%0Ab", "control character U+000A"),
    ("long", "x" * 3000, "3000 characters long"),
    ("not utf-8", "%ff", "not UTF-8"),
    ("also not utf-8", "%fe", "not UTF-8"),  # both used to decode to U+FFFD: one session
]


@pytest.mark.parametrize(("what", "raw", "message"), BAD_IDS, ids=[b[0] for b in BAD_IDS])
def test_hostile_session_ids_are_one_line_refusals(own_cluster: TempCluster, what: str, raw: str,
                                                   message: str) -> None:
    url = own_cluster.dsn + "&session=" + raw
    with pytest.raises(UserError, match=re.escape(message)):
        split_location(url)
    code, _, stderr = cli("state", url)
    assert code == 1 and message in stderr and stderr.count("\n") == 1 and "Traceback" not in stderr


def test_the_longest_allowed_id_can_be_created_and_appended_to(own_cluster: TempCluster) -> None:
    sid = "é" * MAX_SESSION_ID
    log = PostgresLog(own_cluster.dsn, sid, create=_header(sid))
    log.append("fsm/note", {"text": "x"})
    assert len(PostgresLog(own_cluster.dsn, sid)) == 1
    with pytest.raises(UserError, match="at most"):
        PostgresLog(own_cluster.dsn, sid + "é")
    with pytest.raises(UserError, match="U\\+0000"):
        PostgresLog(own_cluster.dsn, "a\x00b")
    log.close()


@pytest.mark.parametrize("location", [
    "postgresql://u:s3cret@127.0.0.1:1/db?connect_timeout=1&session=a",
    "postgresql://u@127.0.0.1:1/db?password=s3cret&connect_timeout=1&session=a",
])
def test_passwords_never_reach_a_message(location: str) -> None:
    assert "s3cret" not in redact(location)
    code, _, stderr = cli("state", location)
    assert code == EX_TEMPFAIL and "s3cret" not in stderr and "***" in stderr and stderr.count("\n") == 1


def test_redact_hides_the_keyword_form_too() -> None:
    assert redact("host=/tmp password='a b\\'c' dbname=x") == "host=/tmp password=*** dbname=x"
    assert redact("host=/tmp password=abc") == "host=/tmp password=***"


def test_db_init_completes_a_half_made_schema(fresh_db: Callable[[], str]) -> None:
    dsn = fresh_db()
    with connect(dsn) as conn:  # an interrupted manual set-up: one table, no version row
        conn.execute("CREATE TABLE fsm_sessions (session text PRIMARY KEY, header text NOT NULL, "
                     "created timestamptz NOT NULL DEFAULT now())")
    code, out, err = cli("db", "init", dsn)
    assert code == 0 and "created the fsm_stage schema" in out, err
    log = open_log(dsn + "&session=s", create=_header("s"))
    log.append("fsm/note", {"text": "x"})
    log.close()


def test_db_init_refuses_a_foreign_table_in_one_line_and_changes_nothing(fresh_db: Callable[[], str]) -> None:
    dsn = fresh_db()
    with connect(dsn) as conn:
        conn.execute("CREATE TABLE fsm_events (id serial PRIMARY KEY, body jsonb)")
    code, _, err = cli("db", "init", dsn)
    assert code == 1 and "table fsm_events exists but is not fsm_stage's" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    with connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass('fsm_sessions'), to_regclass('fsm_schema')").fetchone()
        assert row == (None, None)
    with connect(dsn) as conn, pytest.raises(LogFormatError):
        migrate(conn)


def test_repair_decides_on_the_stores_end_not_a_stale_view(pg_url: Callable[..., str]) -> None:
    from fsm_stage.driver import StagedSession
    from fsm_stage.runtime.agent import InboxAgent
    from fsm_stage.runtime.runtime import Runtime
    from fsm_stage.runtime.session import Session

    url = pg_url("repair")
    sid = split_location(url)[1]
    assert sid is not None
    mine = open_log(url, create=_header(sid))
    driver = StagedSession(Runtime(), InboxAgent(Session(mine)))
    crashed = open_log(url)  # another worker opens a turn, then dies
    crashed.append("turn/start", {"turn": 1})
    crashed.close()
    assert not driver.session.is_turn_open  # this worker's view is stale
    closed = driver.repair()
    assert [e.type for e in closed] == ["turn/end"] and closed[0].data["reason"] == {"kind": "interrupted"}
    mine.close()


def test_a_write_whose_connection_broke_but_committed_later_lands_once(own_cluster: TempCluster) -> None:
    """The client gives up on an INSERT its server process is still running (waiting on a lock):
    the heal finds nothing yet and writes again; then the first one commits. The retry finds
    its seq taken, and instead of appending the batch again after it (a conditional append
    retried at the new end, as the fleet's ``FencedLog`` does) it recognises its own rows."""
    import os
    import socket
    import time

    from fsm_stage.errors import AppendConflictError

    log = PostgresLog(own_cluster.dsn, "late", create=_header("late"))
    log.append("fsm/note", {"n": 0})
    admin, blocker = connect(own_cluster.dsn), connect(own_cluster.dsn, autocommit=False)

    def waiting() -> int:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                            "AND query LIKE '%INSERT INTO fsm_events%'").fetchone()
        return int(row[0])

    def until(n: int) -> None:
        deadline = time.monotonic() + 20
        while waiting() < n:
            assert time.monotonic() < deadline, "the INSERT never queued on the lock"
            time.sleep(0.02)

    out: dict[str, object] = {}

    def writer() -> None:  # a conditional append retried at the new end, like FencedLog's
        for _ in range(5):
            try:
                out["event"] = log.append("fsm/note", {"n": 1}, expect_last_seq=log.last_seq)
                return
            except AppendConflictError:
                log.refresh()

    try:
        blocker.execute("LOCK TABLE fsm_events IN SHARE ROW EXCLUSIVE MODE")  # INSERTs wait, reads do not
        thread = threading.Thread(target=writer)
        thread.start()
        until(1)
        cut = socket.socket(fileno=os.dup(log._conn.fileno()))  # the client sees its connection drop
        cut.shutdown(socket.SHUT_RDWR)
        cut.close()
        until(2)  # the heal found nothing yet and wrote again: both INSERTs wait
        blocker.commit()
        thread.join(30)
        assert not thread.is_alive()
        rows = admin.execute("SELECT seq, line FROM fsm_events WHERE session = 'late' "
                             "ORDER BY seq").fetchall()
        assert [seq for seq, _ in rows] == [0, 1] and '"n":1' in rows[1][1]
        assert getattr(out.get("event"), "seq", None) == 1
        log.refresh()
        assert [e.data for e in log.events] == [{"n": 0}, {"n": 1}]
    finally:
        blocker.close()
        admin.close()
        log.close()


def test_a_conditional_append_stays_conditional_across_a_reconnect(own_cluster: TempCluster) -> None:
    """A handle whose connection died reconnects on its next call and reads what was written
    meanwhile; a conditional append made on the old end must then conflict, not land after it."""
    from fsm_stage.errors import AppendConflictError

    log = PostgresLog(own_cluster.dsn, "recond", create=_header("recond"))
    other = PostgresLog(own_cluster.dsn, "recond")
    log.append("fsm/note", {"n": 0})
    other.refresh()
    expect = log.last_seq
    log._conn.close()  # dropped: the next call reconnects
    other.append("fsm/note", {"n": "other"})
    with pytest.raises(AppendConflictError):
        log.append("fsm/note", {"n": 1}, expect_last_seq=expect)
    log.refresh()
    assert [e.data["n"] for e in log.events] == [0, "other"]
    log.append("fsm/note", {"n": 1}, expect_last_seq=log.last_seq)  # decided again on the new end
    assert [e.data["n"] for e in PostgresLog(own_cluster.dsn, "recond").events] == [0, "other", 1]
    log.close()
    other.close()
