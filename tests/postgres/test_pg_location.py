"""PostgreSQL locations without a server: URL parsing, redaction, the missing-psycopg message,
and that importing fsm_stage never imports psycopg."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from fsm_stage.errors import UserError
from fsm_stage.log import open_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.postgres import redact, split_location


def test_session_is_taken_out_of_the_libpq_url() -> None:
    info, session = split_location("postgresql://me@db.example:6543/logs?session=s-1&sslmode=require")
    assert (info, session) == ("postgresql://me@db.example:6543/logs?sslmode=require", "s-1")
    info, session = split_location("postgres://postgres@/postgres?host=/tmp/sock%20dir&session=a%2Fb&port=5433")
    assert session == "a/b"
    assert info == "postgres://postgres@/postgres?host=/tmp/sock%20dir&port=5433"
    assert split_location("postgresql:///db") == ("postgresql:///db", None)
    # libpq's multi-host form is passed through whole (its ports are libpq's to read)
    hosts = "postgresql://u@h1:5432,h2:5433/db"
    assert split_location(hosts + "?session=s") == (hosts, "s")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://h/db?session=", "empty `session`"),
        ("postgresql://h/db?session=a&session=b", "`session` given 2 times"),
        ("mysql://h/db?session=a", "not a PostgreSQL URL"),
        # typos urllib cannot parse: one line (they were tracebacks), never a transient retry
        ("postgresql://u@[::1/db?session=x", r"not a valid PostgreSQL URL \(Invalid IPv6 URL\)"),
        ("postgresql://u@127.0.0.1:abc/db?session=x", "not a valid PostgreSQL URL .Port could not be cast"),
        ("postgresql://u@127.0.0.1:99999/db?session=x", "not a valid PostgreSQL URL .Port out of range"),
    ],
)
def test_bad_session_parameters_are_one_line_errors(url: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as err:
        split_location(url)
    assert "\n" not in str(err.value)


def test_passwords_never_reach_messages() -> None:
    assert redact("postgresql://me:s3cret@h/db?session=a") == "postgresql://me:***@h/db?session=a"
    pytest.importorskip("psycopg", reason="psycopg not installed: no connection attempt to check")
    with pytest.raises(UserError) as err:
        open_log("postgresql://me:s3cret@127.0.0.1:1/db?session=a&connect_timeout=2")
    assert "s3cret" not in str(err.value) and "cannot connect to PostgreSQL" in str(err.value)


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    with pytest.raises(UserError, match=r"pip install 'fsm_stage\[postgres\]'") as err:
        open_log("postgresql://h/db?session=a", create=SessionHeader("a"))
    assert "\n" not in str(err.value)


def test_importing_fsm_stage_does_not_import_psycopg() -> None:
    code = (
        "import sys, fsm_stage, fsm_stage.log, fsm_stage.log.locations, fsm_stage.log.postgres;"
        "from fsm_stage.log import open_log; assert 'psycopg' not in sys.modules, 'psycopg imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_postgres_log_is_exported_lazily_from_fsm_stage_log() -> None:
    code = (
        "import sys, fsm_stage.log\n"
        "assert 'fsm_stage.log.postgres' not in sys.modules, 'postgres module imported eagerly'\n"
        "from fsm_stage.log import PostgresLog\n"
        "import fsm_stage.log.postgres as pg\n"
        "assert PostgresLog is pg.PostgresLog and 'PostgresLog' in fsm_stage.log.__all__\n"
        "assert 'psycopg' not in sys.modules, 'psycopg imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_server_skips_outside_ci_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from pg_fixture import require_server

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("FSM_STAGE_REQUIRE_POSTGRES", raising=False)
    require_server(None)  # a server can start: nothing happens
    with pytest.raises(pytest.skip.Exception, match="no initdb"):
        require_server("no initdb")
    for var, value in (("CI", "true"), ("FSM_STAGE_REQUIRE_POSTGRES", "1")):
        with monkeypatch.context() as m:
            m.setenv(var, value)
            with pytest.raises(pytest.fail.Exception, match=r"CI needs the PostgreSQL.*no initdb"):
                require_server("no initdb")


def test_the_cluster_helper_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import pg_testing

    monkeypatch.setattr(pg_testing, "server_bin_dir", lambda: None)
    assert "apt-get install postgresql" in (pg_testing.unavailable_reason() or "")


@pytest.mark.parametrize(("url", "why"), [
    ("postgresql://u@127.0.0.1/db?port=abc", "port 'abc' is not a number from 1 to 65535"),
    ("postgresql://u@h1:5432,h2:5x3/db", "port '5x3' is not a number from 1 to 65535"),
    ("postgresql://u@127.0.0.1/db?sslmode=bogus", "sslmode 'bogus' is not one of"),
    ("postgresql://u@127.0.0.1/db?bogus=1", 'invalid URI query parameter: "bogus"'),
])
def test_a_connection_string_that_can_never_work_is_not_transient(url: str, why: str) -> None:
    """These typos were exit 75 ("transient; retry later"), so a retrying script looped for ever;
    a server that cannot be reached stays transient."""
    import socket

    from fsm_stage.errors import DatabaseError
    from fsm_stage.log.pg_connect import connect

    pytest.importorskip("psycopg")
    with pytest.raises(DatabaseError) as err:
        connect(url)
    assert not err.value.transient and why in str(err.value) and "\n" not in str(err.value)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(DatabaseError) as down:
        connect(f"postgresql://u@127.0.0.1:{port}/db?connect_timeout=5")
    assert down.value.transient


def test_connection_strings_libpq_reads_are_not_refused() -> None:
    """The check before connecting refuses what can never work, nothing libpq reads: ports with
    spaces, a ``+`` or a leading zero, port lists, keyword form, unix sockets, IPv6; a password
    libpq quotes in its parse error is not shown."""
    pytest.importorskip("psycopg")
    from fsm_stage.log.pg_connect import _conninfo_problem

    for fine in ("host=h port=' 5432'", "host=h port='5432 '", "host=h port=+5432", "host=h port=05432",
                 "host=h1,h2 port='1, 5432'", "postgresql://h/db?port=5432%20",
                 "postgres://postgres@/postgres?host=/tmp/sock%20dir&port=5433",
                 "postgresql://u@[::1]:5432/db", "postgresql://u@h1:5432,h2:5433/db?sslmode=verify-full"):
        assert _conninfo_problem(fine) is None, fine
    leaked = _conninfo_problem("postgresql://postgres:s3cr%ZZet@127.0.0.1/db")
    assert leaked is not None and "s3cr" not in leaked and "percent-encoded" in leaked


def test_a_database_that_does_not_exist_is_final_and_the_pool_checks_too(pg_cluster: Any) -> None:
    """A missing database (like a wrong password) can never connect: exit 1, not 75; a pool is
    refused a connection string that can never work before it starts retrying."""
    from fsm_stage.errors import DatabaseError
    from fsm_stage.log.pg_connect import connect, connection_pool

    with pytest.raises(DatabaseError) as err:
        connect(pg_cluster.dsn.replace("/postgres?", "/no_such_db_here?"))
    assert not err.value.transient and "does not exist" in str(err.value)
    pytest.importorskip("psycopg_pool")
    with pytest.raises(DatabaseError) as pooled:
        connection_pool(pg_cluster.dsn + "&sslmode=bogus", timeout=2)
    assert not pooled.value.transient
