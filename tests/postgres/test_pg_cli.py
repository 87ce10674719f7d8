"""The PostgreSQL store through the CLI: ``db init``, ``simulate --log postgresql://…`` then
``state`` (done-when), ``export``/``import`` byte for byte (fsm_stage's logs and the DSH corpus)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pg_testing import TempCluster
from shared_data import DSH_SESSIONS

from fsm_stage.cli import main
from fsm_stage.log import read_log
from fsm_stage.log.events import NewEvent, Replace, SessionHeader
from fsm_stage.log.jsonl import JsonlLog

REPO = Path(__file__).resolve().parents[2]
FEATURE_WORK = REPO / "stage_graphs" / "scenarios" / "feature-work.yaml"


def cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_db_init_creates_then_reports_up_to_date(fresh_db: Callable[[], str]) -> None:
    dsn = fresh_db()
    assert cli("db", "init", dsn)[:2] == (0, f"{dsn}: created the fsm_stage schema (version 2)\n")
    code, out, _ = cli("db", "init", dsn + "&session=ignored")
    assert code == 0 and out.endswith("fsm_stage schema version 2 is up to date\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("db", "init", "/tmp/not-a-url"), "not a PostgreSQL URL"),
        (("export", "memory:", "-o", "x.jsonl"), "not a PostgreSQL URL"),
    ],
)
def test_bad_locations_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    code, _, err = cli(*args)
    assert code == 1 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_simulate_into_postgres_then_state_reports_verify(
    fresh_db: Callable[[], str], tmp_path: Path
) -> None:
    dsn = fresh_db()
    assert cli("db", "init", dsn)[0] == 0
    url = dsn + "&session=demo"
    code, _, err = cli("simulate", str(FEATURE_WORK), "--log", url, "--cwd", str(tmp_path))
    assert code == 0, err
    code, out, err = cli("state", "--json", url)
    assert code == 0, err
    report = json.loads(out)
    assert report["header"]["id"] == "demo"
    assert report["stage"]["current"] == "verify"
    code, _, err = cli("simulate", str(FEATURE_WORK), "--log", url, "--cwd", str(tmp_path))
    assert code == 1 and "already has" in err and "--force" in err
    assert cli("simulate", str(FEATURE_WORK), "--log", url, "--force", "--cwd", str(tmp_path))[0] == 0
    code, out, _ = cli("state", url)
    assert code == 0 and "verify" in out


def write_fsm_log(path: Path) -> bytes:
    with JsonlLog(path, header=SessionHeader("own", created_at=3, cwd="/w", extra={"x": "ü"})) as log:
        log.append("turn/start", {"turn": 1})
        log.append("user/message", {"content": [{"type": "text", "text": "a\u2028b ✓"}]}, surface_op="append")
        log.append_many([
            NewEvent("user/message", {"content": []}, Replace(1, 1), (1,)),
            NewEvent("fsm/review/request", {"id": "rv_1"}),
        ])
    return path.read_bytes()


def test_an_fsm_stage_log_round_trips_byte_for_byte(pg_cluster: TempCluster, tmp_path: Path) -> None:
    data = write_fsm_log(tmp_path / "own.jsonl")
    url = pg_cluster.url("own")
    code, out, err = cli("import", str(tmp_path / "own.jsonl"), pg_cluster.dsn)  # session from the header
    assert code == 0, err
    assert "imported session 'own': 4 event(s) in 4 row(s)" in out
    assert cli("import", str(tmp_path / "own.jsonl"), url)[2].count("already exists") == 1
    out_file = tmp_path / "back.jsonl"
    assert cli("export", url, "-o", str(out_file))[0] == 0
    assert out_file.read_bytes() == data
    assert read_log(out_file).events == read_log(tmp_path / "own.jsonl").events
    assert "already exists" in cli("export", url, "-o", str(out_file))[2]
    with JsonlLog(out_file) as log:  # appending after the round trip matches PostgreSQL's next seq
        assert log.append("fsm/after", {}).seq == 4


CORPUS = sorted(p for p in DSH_SESSIONS.glob("*.jsonl")) if DSH_SESSIONS.is_dir() else []


def test_real_dsh_logs_round_trip_byte_for_byte(pg_cluster: TempCluster, tmp_path: Path) -> None:
    if not CORPUS:
        pytest.skip(f"DSH corpus not found at {DSH_SESSIONS}")
    from fsm_stage.errors import LogFormatError
    from fsm_stage.log.pg_transfer import export_jsonl, import_jsonl

    done = 0
    for path in CORPUS:
        data = path.read_bytes()
        try:
            expected = read_log(path)
        except LogFormatError:
            continue  # not a session log (the corpus holds other files too)
        if expected.compressed:
            continue
        session = f"dsh-{done}"
        raw = data.replace(f'"id":"{expected.header.id}"'.encode(), f'"id":"{session}"'.encode(), 1)
        if raw == data:  # header written with other spacing: keep its id (ids are unique per file)
            session = expected.header.id
        res = import_jsonl(raw, pg_cluster.dsn + f"&session={session}", source=str(path), replace=True)
        back = export_jsonl(pg_cluster.url(session))
        assert back == raw[: read_log_good_end(raw)], path.name
        assert res.events == len(expected.events)
        done += 1
    assert done >= 20


def read_log_good_end(data: bytes) -> int:
    from fsm_stage.log import read_log_data

    return read_log_data(data).good_end


def test_blank_lines_are_kept_and_a_torn_tail_is_dropped(pg_cluster: TempCluster, tmp_path: Path) -> None:
    good = write_fsm_log(tmp_path / "own.jsonl").replace(b'"id":"own"', b'"id":"torn"')
    lines = good.split(b"\n")
    with_blank = b"\n".join([lines[0], b"", *lines[1:3], b"  ", *lines[3:]])
    path = tmp_path / "torn.jsonl"
    path.write_bytes(with_blank + b'{"type":"turn/end","seq":4')
    code, _, err = cli("import", str(path), pg_cluster.url("torn"))
    assert code == 0 and "torn tail" in err
    out_file = tmp_path / "back.jsonl"
    assert cli("export", pg_cluster.url("torn"), "-o", str(out_file))[0] == 0
    assert out_file.read_bytes() == with_blank
    assert read_log(out_file).events == read_log(path).events


def test_scenario_replays_a_session_stored_in_postgres(fresh_db: Callable[[], str], tmp_path: Path) -> None:
    dsn = fresh_db()
    assert cli("db", "init", dsn)[0] == 0
    url = dsn + "&session=replayed"
    assert cli("simulate", str(FEATURE_WORK), "--log", url, "--cwd", str(tmp_path))[0] == 0
    from_db = cli("scenario", url)
    file_log = tmp_path / "replayed.jsonl"
    assert cli("export", url, "-o", str(file_log))[0] == 0
    from_file = cli("scenario", str(file_log))
    assert from_db[0] == from_file[0] == 0, from_db[2]
    assert "id: replayed" in from_db[1]
    assert from_db[1].replace("Replay of session replayed", "Replay of replayed.jsonl") == from_file[1]


def test_draw_log_reads_a_postgresql_location_like_state(
    fresh_db: Callable[[], str], tmp_path: Path
) -> None:
    dsn = fresh_db()
    assert cli("db", "init", dsn)[0] == 0
    url = dsn + "&session=drawn"
    code, _, err = cli("simulate", str(FEATURE_WORK), "--log", url, "--cwd", str(tmp_path))
    assert code == 0, err
    code, out, err = cli("draw", str(REPO / "stage_graphs" / "feature-work.yaml"), "--log", url)
    assert code == 0, err
    assert "class s_verify current" in out


def test_a_missing_session_gets_cli_wording_not_python_api_advice(fresh_db: Callable[[], str]) -> None:
    dsn = fresh_db()
    assert cli("db", "init", dsn)[0] == 0
    for args in (("state", dsn + "&session=nobody"), ("export", dsn + "&session=nobody", "-o", "x.jsonl")):
        code, _, err = cli(*args)
        assert code == 1 and "no such session log" in err, err
        assert "create=" not in err and "check ?session=" in err and err.count("\n") == 1


def test_a_refused_connection_keeps_libpq_first_line_and_exits_75() -> None:
    code, _, err = cli("state", "postgresql://postgres@127.0.0.1:1/x?session=a&connect_timeout=2")
    assert code == 75 and err.count("\n") == 1
    assert "cannot connect to PostgreSQL: connection failed:" in err and 'port 1 failed' in err
    assert "\t" not in err and "Is the server running" not in err
