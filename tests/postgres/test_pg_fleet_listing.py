"""``fsm-stage sessions`` on a PostgreSQL store lists a session whose row is damaged as
``damaged`` (with a line on stderr), never at the state it had before the damage."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import CliRunner

from fsm_stage.cli import main
from fsm_stage.fleet.inputs import record_input
from fsm_stage.fleet.listing import DAMAGED, list_sessions
from fsm_stage.log import SessionHeader, open_log
from fsm_stage.log.pg_schema import migrate
from fsm_stage.log.postgres import connect


def test_a_damaged_row_is_listed_as_damaged_not_as_before(fresh_db: Callable[[], str]) -> None:
    dsn = fresh_db()
    with connect(dsn) as conn:
        migrate(conn)
    ok, hurt = "ok-1", "hurt-1"
    with open_log(f"{dsn}&session={ok}", create=SessionHeader(ok, cwd="/w")) as log:
        record_input(log, "message", "hello", input_id="in-1")
    with open_log(f"{dsn}&session={hurt}", create=SessionHeader(hurt, cwd="/w")) as log:
        record_input(log, "message", "hello", input_id="in-1")
        assert {i.id: i.state for i in list_sessions(dsn)} == {ok: "queued", hurt: "queued"}
        with connect(dsn) as conn:
            conn.execute("UPDATE fsm_events SET line = '{garbage' || chr(10) WHERE session = %s AND seq = 0",
                         (hurt,))
        log.append("fsm/note", {"x": 1})  # the writer goes on after the damage
    assert {i.id: i.state for i in list_sessions(dsn)} == {ok: "queued", hurt: DAMAGED}
    out = CliRunner().invoke(main, ["sessions", dsn, "--state", "damaged"])
    assert out.exit_code == 0 and hurt in out.stdout and ok not in out.stdout
    assert f"session {hurt}: its log cannot be read" in out.stderr
