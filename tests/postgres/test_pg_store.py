"""``PostgresLog`` against a real server: create/open rules, schema versions, a stale writer
catching up (writer checks re-run on the real state), conditional appends, followers."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from fsm_stage.errors import AppendConflictError, LogFormatError
from fsm_stage.log import open_log
from fsm_stage.log.events import NewEvent, Replace, SessionHeader
from fsm_stage.log.pg_schema import SCHEMA_VERSION, migrate
from fsm_stage.log.postgres import PostgresLog, connect, split_location
from fsm_stage.log.surface import LogWriteError

MSG = {"content": [{"type": "text", "text": "x"}]}


def sid(url: str) -> str:
    session = split_location(url)[1]
    assert session is not None
    return session


def test_create_open_and_id_rules(pg_url: Callable[..., str]) -> None:
    url = pg_url()
    with pytest.raises(LogFormatError, match="no such session log"):
        open_log(url)
    with pytest.raises(LogFormatError, match="does not match"):
        open_log(url, create=SessionHeader("another"))
    header = SessionHeader(sid(url), created_at=5, cwd="/w", origin="user", extra={"future": [1]})
    with open_log(url, create=header) as log:
        log.append("turn/start", {"turn": 1})
    with open_log(url, create=header) as again:  # an existing session opens as it is
        assert again.header == header and len(again) == 1
    no_session = url.rsplit("&session=", 1)[0]
    with open_log(no_session, create=SessionHeader("from-header")) as log:  # session from the header
        assert log.header.id == "from-header"


def test_schema_missing_older_and_newer_are_refused(fresh_db: Callable[[], str]) -> None:
    dsn = fresh_db()
    url = dsn + "&session=s"
    with pytest.raises(LogFormatError, match=r"no fsm_stage schema.*fsm-stage db init"):
        open_log(url, create=SessionHeader("s"))
    with connect(dsn) as conn:
        assert migrate(conn) == (None, SCHEMA_VERSION)
        assert migrate(conn) == (SCHEMA_VERSION, SCHEMA_VERSION)
        conn.execute("UPDATE fsm_schema SET version = %s", (SCHEMA_VERSION + 1,))
        with pytest.raises(LogFormatError, match="newer than this fsm_stage understands"):
            migrate(conn)
    with pytest.raises(LogFormatError, match="upgrade fsm_stage") as err:
        open_log(url, create=SessionHeader("s"))
    assert "\n" not in str(err.value)
    with connect(dsn) as conn:
        conn.execute("UPDATE fsm_schema SET version = 0")
    with pytest.raises(LogFormatError, match="older"):
        open_log(url, create=SessionHeader("s"))


def test_a_stale_plain_append_catches_up_and_rechecks(pg_url: Callable[..., str]) -> None:
    url = pg_url()
    a = open_log(url, create=SessionHeader(sid(url)))
    b = open_log(url)
    a.append("user/message", MSG, surface_op="append")
    b.refresh()
    replace_0 = NewEvent("user/message", MSG, Replace(0, 0), (0,))
    a.append_many([replace_0])  # node 0 is gone now; b has not seen it
    with pytest.raises(LogWriteError):  # valid for b's old view, refused after catching up
        b.append_many([replace_0])
    assert len(b) == 2 and b.events[1].surface_op == Replace(0, 0)
    ev = b.append("fsm/note", {"by": "b"})
    a_ev = a.append("fsm/note", {"by": "a"})  # a is stale now: lands after b's event
    assert (ev.seq, a_ev.seq) == (2, 3)
    assert [e.data for e in open_log(url).events][2:] == [{"by": "b"}, {"by": "a"}]
    assert len(a.surface) == len(b.surface) == 1


def test_conditional_append_conflict_writes_nothing(pg_url: Callable[..., str]) -> None:
    url = pg_url()
    a = open_log(url, create=SessionHeader(sid(url)))
    b = open_log(url)
    a.append("fsm/x", {})
    with pytest.raises(AppendConflictError) as err:  # b has not seen seq 0
        b.append_many([NewEvent("fsm/y", {}), NewEvent("fsm/z", {})], expect_last_seq=-1)
    assert (err.value.expected, err.value.actual) == (-1, 0)
    assert [e.type for e in b.events] == ["fsm/x"]  # refreshed: b sees the winner
    assert b.append("fsm/y", {}, expect_last_seq=0).seq == 1
    with pytest.raises(AppendConflictError):
        a.append("fsm/w", {}, expect_last_seq=0)
    assert [e.type for e in open_log(url).events] == ["fsm/x", "fsm/y"]


def test_followers_refresh_and_wake_on_notify(pg_url: Callable[..., str]) -> None:
    url = pg_url()
    writer = open_log(url, create=SessionHeader(sid(url)))
    follower = open_log(url)
    other_url = pg_url()
    other = open_log(other_url, create=SessionHeader(sid(other_url)))  # its appends must not count
    assert isinstance(follower, PostgresLog)
    assert follower.refresh() == 0
    assert follower.wait_for_events(0.2) == 0  # nothing: times out
    writer.append_many([NewEvent("fsm/a", {}), NewEvent("fsm/b", {})])
    assert follower.refresh() == 2 and follower.refresh() == 0
    started = threading.Event()

    def append_later() -> None:
        started.wait()
        other.append("fsm/elsewhere", {})
        writer.append("fsm/c", {})

    t = threading.Thread(target=append_later)
    t.start()
    started.set()
    got = 0
    for _ in range(50):  # each wait returns at the first notify for this session (or the timeout)
        got += follower.wait_for_events(10)
        if got:
            break
    t.join()
    assert got == 1 and follower.events[-1].type == "fsm/c"
