"""One queue across the sessions of a PostgreSQL database (issue 26 item 7, issue 27): the
queue lists and filters every session's open reviews, ``fsm-stage inbox list`` / ``approve-all``
answer them one at a time, and the web inbox serves and answers a ``postgresql://`` location."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from fsm_stage.cli import main
from fsm_stage.errors import UserError
from fsm_stage.inbox.queue import open_reviews
from fsm_stage.log import open_log
from fsm_stage.log.events import SessionHeader
from fsm_stage.reviews import SuspendingReviewChannel

REPO = Path(__file__).resolve().parents[2]
for extra in (REPO / "tests" / "reviews", REPO / "tests" / "inbox"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
from rig import Rig  # noqa: E402


def _database(fresh_db: Callable[[], str]) -> str:
    """A new database with the fsm_stage schema and nothing else (the queue sees only ours)."""
    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    dsn = fresh_db()
    with connect(dsn) as conn:
        migrate(conn)
    return dsn


def _suspended(dsn: str, session: str, cwd: Path, kind: str) -> str:
    """Session ``session`` whose goto_stage / exit_plan_mode waits for its review; its id."""
    (cwd / session).mkdir(parents=True)
    with open_log(f"{dsn}&session={session}", create=SessionHeader(session, cwd=str(cwd / session))) as log:
        return Rig(log, SuspendingReviewChannel()).suspend(kind)


def _answers(dsn: str, session: str) -> list[dict[str, object]]:
    with open_log(f"{dsn}&session={session}") as log:
        return [dict(e.data) for e in log.events if e.type == "fsm/review/answer"]


def test_the_queue_and_approve_all_over_postgresql(fresh_db: Callable[[], str], tmp_path: Path) -> None:
    dsn = _database(fresh_db)
    rids = {"a": _suspended(dsn, "a", tmp_path, "stage"), "b": _suspended(dsn, "b", tmp_path, "stage"),
            "p": _suspended(dsn, "p", tmp_path, "plan")}
    assert {(i.session_id, i.record.id) for i in open_reviews(dsn)} == set(rids.items())
    assert [i.session_id for i in open_reviews(dsn, kinds=["plan"])] == ["p"]
    listed = CliRunner().invoke(main, ["inbox", "list", dsn, "--json", "--kind", "stage"])
    assert listed.exit_code == 0, listed.output
    assert {(r["session"], r["id"]) for r in json.loads(listed.output)["open"]} == \
        {("a", rids["a"]), ("b", rids["b"])}
    done = CliRunner().invoke(main, ["inbox", "approve-all", dsn, "--kind", "stage", "--yes"])
    assert done.exit_code == 0, done.output
    for sid in ("a", "b"):
        (answer,) = _answers(dsn, sid)
        assert (answer["id"], answer["outcome"], answer["by"]) == (rids[sid], "approve", "cli")
    assert _answers(dsn, "p") == []
    assert [i.session_id for i in open_reviews(dsn)] == ["p"]
    with pytest.raises(UserError, match="names one session"):
        open_reviews(f"{dsn}&session=a")


def test_the_web_inbox_serves_and_answers_a_postgresql_location(fresh_db: Callable[[], str],
                                                                 tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    pytest.importorskip("markdown_it")
    from inbox_fixtures import TOKENS, write_reviewers
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    dsn = _database(fresh_db)
    rid = _suspended(dsn, "w1", tmp_path, "stage")
    client = TestClient(create_app(dsn, reviewers_file=write_reviewers(tmp_path / "r.yaml"),
                                   secret_key="k" * 40))
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    queue = client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    assert rid in queue.text and "/review/w1/" in queue.text
    token = re.search(r'name="csrf" value="([^"]+)"', queue.text)
    assert token is not None
    review = client.get(f"/review/w1/{rid}")
    assert review.status_code == 200 and "what was done" in review.text  # the handoff document
    done = client.post(f"/review/w1/{rid}", data={"csrf": token.group(1), "action": "approve"})
    assert done.status_code == 200
    (answer,) = _answers(dsn, "w1")
    assert (answer["id"], answer["outcome"], answer["by"]) == (rid, "approve", "inbox:alice")
    assert rid not in client.get("/").text
    assert client.get("/session/w1").status_code == 200


def test_the_queue_reads_only_review_rows_and_agrees_with_whole_folds(fresh_db: Callable[[], str],
                                                                      tmp_path: Path) -> None:
    """The PostgreSQL queue folds only the review rows of the sessions that moved (``_pg_queue``):
    the same open reviews as folding each whole session, refreshed when a session moves, with a
    review whose call was closed without running (``tool/result`` error ``ABORTED``) gone, and
    rules that are not a mapping kept as "invalid" (everyone refused)."""
    from fsm_stage.constants import TOOL_RESULT
    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.reviews import answer_review

    dsn = _database(fresh_db)
    rids = {sid: _suspended(dsn, sid, tmp_path, kind) for sid, kind in
            (("a", "stage"), ("b", "stage"), ("c", "stage"), ("p", "plan"))}
    store = SessionStore(dsn)

    def listed() -> set[tuple[str, str]]:
        return {(i.session_id, i.record.id) for i in store.open_reviews()}

    def folded() -> set[tuple[str, str]]:
        return {(i.session_id, i.record.id) for v in SessionStore(dsn).sessions() for i in v.open()}

    assert listed() == folded() == set(rids.items())
    with open_log(f"{dsn}&session=a") as log:
        answer_review(log, rids["a"], "keep")
    with open_log(f"{dsn}&session=b") as log:  # the call is cancelled: its review is void
        call_id = next(e.data["callId"] for e in log.events if e.type == "tool/call")
        log.append(TOOL_RESULT, {"callId": call_id, "content": "cancelled", "isError": True,
                                 "error": {"code": "ABORTED", "message": "cancelled"}})
    with open_log(f"{dsn}&session=c") as log:  # rules the inbox cannot read
        rows = [e for e in log.events if e.type == "fsm/review/request"]
    from fsm_stage.log.postgres import connect

    with connect(dsn) as conn:
        line = conn.execute("SELECT line FROM fsm_events WHERE session = 'c' AND seq = %s",
                            (rows[0].seq,)).fetchone()[0]
        obj = json.loads(line)
        obj["data"]["rules"] = ["not", "a", "mapping"]
        conn.execute("UPDATE fsm_events SET line = %s WHERE session = 'c' AND seq = %s",
                     (json.dumps(obj), rows[0].seq))
        conn.execute("INSERT INTO fsm_events (session, seq, n, line) VALUES ('c', %s, 1, %s)",
                     (log.last_seq + 1, json.dumps({"type": "fsm/note", "seq": log.last_seq + 1, "time": 0,
                                                    "data": {}, "ignorable": True})))
    assert listed() == folded() == {("c", rids["c"]), ("p", rids["p"])}
    (c_item,) = [i for i in store.open_reviews() if i.session_id == "c"]
    assert c_item.rules == {"invalid": True}


def test_a_damaged_postgresql_session_is_named_with_why_not_hidden(fresh_db: Callable[[], str],
                                                                  tmp_path: Path) -> None:
    """A session whose rows no longer fold (an event line damaged in the database) is reported
    as the JSONL inbox reports a corrupt file: the session and review pages answer 422 with the
    reason and answering it says why; never a 404 or a 500."""
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    pytest.importorskip("markdown_it")
    from inbox_fixtures import TOKENS, write_reviewers
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app
    from fsm_stage.log.postgres import connect

    dsn = _database(fresh_db)
    rid = _suspended(dsn, "d1", tmp_path, "stage")
    _suspended(dsn, "ok", tmp_path, "stage")
    with connect(dsn) as conn:
        conn.execute("UPDATE fsm_events SET line = 'not json' WHERE session = 'd1' AND seq = 1")
        conn.commit()
    client = TestClient(create_app(dsn, reviewers_file=write_reviewers(tmp_path / "r.yaml"),
                                   secret_key="k" * 40), raise_server_exceptions=False)
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    for path in ("/session/d1", f"/review/d1/{rid}"):
        got = client.get(path)
        assert got.status_code == 422, (path, got.status_code, got.text[:200])
        assert got.text.startswith("422: the session log d1 cannot be read:") and "\n" not in got.text.strip()
    assert client.get("/session/ok").status_code == 200
    answered = CliRunner().invoke(main, ["inbox", "approve-all", dsn, "--yes"])
    assert answered.exit_code == 1, answered.output  # one review refused, the other approved
    assert "the session log d1 cannot be read:" in answered.output + answered.stderr
    assert "Traceback" not in answered.output
    assert [a["outcome"] for a in _answers(dsn, "ok")] == ["approve"]


def test_a_database_failure_while_reading_a_session_is_not_remembered(
        fresh_db: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The database failing while a session is read is the store's failure (503), not the
    session's: the next request reads it again instead of answering 404 until it moves."""
    import fsm_stage.log.postgres as pg
    from fsm_stage.errors import DatabaseError
    from fsm_stage.inbox._store import SessionStore

    dsn = _database(fresh_db)
    _suspended(dsn, "f1", tmp_path, "stage")
    real, calls = pg.read_postgres, []

    def flaky(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise DatabaseError("PostgreSQL: the server closed the connection")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pg, "read_postgres", flaky)
    store = SessionStore(dsn)
    with pytest.raises(DatabaseError):
        store.load("f1")
    assert store.why_unreadable("f1") is None
    view = store.load("f1")
    assert view is not None and view.state.open and len(calls) == 2


def test_a_damaged_review_row_names_the_session_instead_of_dropping_its_review(
        fresh_db: Callable[[], str], tmp_path: Path) -> None:
    """The PostgreSQL queue reads only review rows: one of them that no longer decodes names
    the session (the ``inbox list`` warning, the web queue's notice) instead of its open review
    vanishing."""
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    pytest.importorskip("markdown_it")
    from inbox_fixtures import TOKENS, write_reviewers
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app
    from fsm_stage.log.postgres import connect

    dsn = _database(fresh_db)
    _suspended(dsn, "dmg", tmp_path, "stage")
    kept = _suspended(dsn, "fine", tmp_path, "stage")
    with connect(dsn) as conn:
        conn.execute("UPDATE fsm_events SET line = left(line, 40) WHERE session = 'dmg' "
                     "AND line LIKE '%fsm/review/request%'")  # cut short: still a review row
        conn.commit()
    listed = CliRunner().invoke(main, ["inbox", "list", dsn])
    assert listed.exit_code == 0, listed.output
    assert kept in listed.stdout
    (warning,) = listed.stderr.splitlines()
    assert warning.startswith("fsm-stage: warning: session dmg: not read, its reviews are not listed:")
    client = TestClient(create_app(dsn, reviewers_file=write_reviewers(tmp_path / "r.yaml"),
                                   secret_key="k" * 40))
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert csrf is not None
    queue = client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    assert "could not be read" in queue.text and "dmg" in queue.text and kept in queue.text


def test_the_queue_finds_review_rows_whose_json_spells_the_type_with_escapes(
        fresh_db: Callable[[], str], tmp_path: Path) -> None:
    """``import`` stores lines verbatim, and JSON may spell ``fsm/review/…``, ``tool/result``
    or a closing code with ``\\/`` or ``\\uXXXX``: the queue still reads those rows, so its open
    reviews agree with folding each whole session (an escaped answer or cancelling result
    closes the review; an escaped request opens one)."""
    from fsm_stage.constants import TOOL_RESULT
    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.log.postgres import connect
    from fsm_stage.reviews import answer_review

    dsn = _database(fresh_db)
    rids = {sid: _suspended(dsn, sid, tmp_path, "stage") for sid in ("answered", "asked", "cancelled")}
    with open_log(f"{dsn}&session=answered") as log:
        answer_review(log, rids["answered"], "keep")
    with open_log(f"{dsn}&session=cancelled") as log:
        call_id = next(e.data["callId"] for e in log.events if e.type == "tool/call")
        log.append(TOOL_RESULT, {"callId": call_id, "content": "cancelled", "isError": True,
                                 "error": {"code": "ABORTED", "message": "cancelled"}})
    escapes = {"answered": ("fsm/review/answer", "fsm\\/review\\/answer"),
               "asked": ("fsm/review/request", "fsm/r\\u0065view/request"),
               "cancelled": ('"ABORTED"', '"ABORT\\u0045D"')}
    with connect(dsn) as conn:
        for sid, (plain, escaped) in escapes.items():
            done = conn.execute("UPDATE fsm_events SET line = replace(line, %s, %s) "
                                "WHERE session = %s AND strpos(line, %s) > 0",
                                (plain, escaped, sid, plain))
            assert done.rowcount == 1
        # the cancelling result's type escaped as well
        conn.execute("UPDATE fsm_events SET line = replace(line, 'tool/result', 'tool\\/result') "
                     "WHERE session = 'cancelled' AND strpos(line, 'ABORT') > 0")
        conn.commit()
    folded = {(i.session_id, i.record.id) for v in SessionStore(dsn).sessions() for i in v.open()}
    assert folded == {("asked", rids["asked"])}
    assert {(i.session_id, i.record.id) for i in SessionStore(dsn).open_reviews()} == folded


def test_an_imported_forks_inherited_reviews_are_not_in_the_queue(fresh_db: Callable[[], str],
                                                                  tmp_path: Path) -> None:
    """A DeepSeek Harness fork imported into PostgreSQL: the queue reads its header's
    ``seedLength`` and leaves out the reviews it inherited, as folding the whole session does."""
    from inbox_fixtures import dsh_fork, stage_session

    from fsm_stage.inbox._store import SessionStore
    from fsm_stage.log.pg_transfer import import_jsonl

    dsn = _database(fresh_db)
    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "parent")
    for name in ("parent", "child"):
        path = dsh_fork(logs, "parent", "child") if name == "child" else logs / "parent.jsonl"
        import_jsonl(path.read_bytes(), dsn, source=str(path))
    folded = {(i.session_id, i.record.id) for v in SessionStore(dsn).sessions() for i in v.open()}
    assert folded == {("parent", rid)}
    assert {(i.session_id, i.record.id) for i in SessionStore(dsn).open_reviews()} == folded
