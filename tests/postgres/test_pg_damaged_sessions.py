"""A PostgreSQL session with a damaged row: ``fsm-stage sessions`` lists it as ``damaged`` (with a
line on stderr), never at the state it had before the damage, and ``export`` refuses it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from fsm_stage.cli import main
from fsm_stage.errors import LogFormatError
from fsm_stage.fleet.inputs import record_input
from fsm_stage.fleet.listing import DAMAGED, list_sessions
from fsm_stage.log import SessionHeader, open_log
from fsm_stage.log.pg_schema import migrate
from fsm_stage.log.pg_transfer import export_jsonl
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


@pytest.mark.parametrize("damage", ["garbage", "delete"])
def test_exporting_a_session_with_a_damaged_old_row_fails_in_one_line(fresh_db: Callable[[], str],
                                                                      damage: str, tmp_path: Path) -> None:
    """The session opens from its newest checkpoint (the old rows are not decoded), so the
    export used to write the damaged bytes and exit 0; it now refuses, writing nothing."""
    dsn = fresh_db()
    with connect(dsn) as conn:
        migrate(conn)
    url = f"{dsn}&session=old-rows"
    with open_log(url, create=SessionHeader("old-rows", cwd="/w")) as log:
        for i in range(600):  # appends one by one: a checkpoint is stored every 256 events
            log.append("fsm/note", {"i": i})
    with connect(dsn) as conn:
        if damage == "garbage":
            conn.execute("UPDATE fsm_events SET line = '{garbage' || chr(10) "
                         "WHERE session = 'old-rows' AND seq = 10")
        else:
            conn.execute("DELETE FROM fsm_events WHERE session = 'old-rows' AND seq = 10")
    with pytest.raises(LogFormatError):
        export_jsonl(url)
    target = tmp_path / "out.jsonl"
    out = CliRunner().invoke(main, ["export", url, "-o", str(target)])
    assert out.exit_code == 1 and out.output.count("\n") == 1 and not target.exists()
