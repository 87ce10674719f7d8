"""Session logs the inbox cannot read (a corrupt, empty or dangling ``*.jsonl`` file in the
folder it scans) are never skipped silently: ``inbox list``, ``approve-all`` and ``answer``
print one warning line per file naming it and why, the web queue shows a notice, and the
``/session/…`` and ``/review/…`` pages of such a log answer 422 with the reason."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from inbox_fixtures import TOKENS, stage_session, write_reviewers

from fsm_stage.cli import main


def _folder(tmp_path: Path) -> tuple[Path, str]:
    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "s1")
    (logs / "bad.jsonl").write_text("this is not json\n")
    (logs / "empty.jsonl").write_bytes(b"")
    (logs / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    return logs, rid


def _warnings(stderr: str) -> dict[str, str]:
    out = {}
    for line in stderr.splitlines():
        found = re.match(r"fsm-stage: warning: .*/(\w+\.jsonl): not read, its reviews are not listed: (.+)$",
                         line)
        assert found is not None, line
        out[found.group(1)] = found.group(2)
    return out


def _check(stderr: str) -> None:
    why = _warnings(stderr)
    assert set(why) == {"bad.jsonl", "empty.jsonl", "gone.jsonl"}
    assert "first line is not JSON" in why["bad.jsonl"] and "empty" in why["empty.jsonl"]
    assert "No such file" in why["gone.jsonl"]


def test_inbox_list_warns_about_each_unreadable_log_and_lists_the_rest(tmp_path: Path) -> None:
    logs, rid = _folder(tmp_path)
    out = CliRunner().invoke(main, ["inbox", "list", str(logs)])
    assert out.exit_code == 0, out.output
    assert rid in out.stdout and "bad.jsonl" not in out.stdout
    _check(out.stderr)
    as_json = CliRunner().invoke(main, ["inbox", "list", str(logs), "--json"])
    assert as_json.exit_code == 0
    assert [r["id"] for r in json.loads(as_json.stdout)["open"]] == [rid]  # stdout stays one JSON object
    _check(as_json.stderr)
    # a log mended since is read again and no longer reported
    (logs / "bad.jsonl").unlink()
    (logs / "empty.jsonl").unlink()
    (logs / "gone.jsonl").unlink()
    clean = CliRunner().invoke(main, ["inbox", "list", str(logs)])
    assert clean.exit_code == 0 and clean.stderr == ""


def test_approve_all_warns_about_each_unreadable_log(tmp_path: Path) -> None:
    logs, rid = _folder(tmp_path)
    out = CliRunner().invoke(main, ["inbox", "approve-all", str(logs), "--yes"])
    assert out.exit_code == 0, out.output
    assert f"approve: s1.jsonl {rid}" in out.stdout
    _check("\n".join(line for line in out.stderr.splitlines() if "warning:" in line))


def test_inbox_answer_warns_about_each_unreadable_log(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import fsm_stage.cli.review_cmds as review_cmds

    logs, rid = _folder(tmp_path)
    asked: list[str] = []

    def ask_rows(rows: Any, language: str, answer: Any) -> None:
        for row in rows:
            asked.append(row["id"])
            answer(row, "keep", None, None)

    monkeypatch.setattr(review_cmds, "on_terminal", lambda: True)
    monkeypatch.setattr(review_cmds, "ask_rows", ask_rows)
    out = CliRunner().invoke(main, ["inbox", "answer", str(logs)])
    assert out.exit_code == 0, out.output
    assert asked == [rid]
    _check(out.stderr)


def test_the_web_inbox_shows_unreadable_logs_and_their_pages_answer_422(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    logs, rid = _folder(tmp_path)
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "r.yaml"), secret_key="k" * 40)
    client = TestClient(app)
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    queue = client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    assert queue.status_code == 200 and rid in queue.text
    notice = re.search(r'<div class="flash error unreadable" role="alert">(.*?)</div>', queue.text, re.S)
    assert notice is not None
    assert "3 session log(s) could not be read" in notice.group(1)
    for name in ("bad.jsonl", "empty.jsonl", "gone.jsonl"):
        assert f"<code>{name}</code>" in notice.group(1)
    bad = client.get("/session/bad.jsonl")
    assert bad.status_code == 422
    assert bad.text.startswith("422: the session log bad.jsonl cannot be read: not a session log")
    assert "Traceback" not in bad.text
    review = client.get("/review/empty.jsonl/rv_1")
    assert review.status_code == 422 and "cannot be read" in review.text
    assert client.get("/session/missing.jsonl").status_code == 404
    assert client.get("/session/s1.jsonl").status_code == 200


def _damaged(logs: Path) -> str:
    """``s1.jsonl`` with a damaged line before its review request (the reader keeps the lines
    before it: a torn tail), and ``s2.jsonl`` read whole though with a reader warning (an
    envelope key outside DSH's seven); returns s2's review id."""
    stage_session(logs, "s1")
    lines = (logs / "s1.jsonl").read_text().splitlines()
    lines.insert(3, '{"type": "broken')
    (logs / "s1.jsonl").write_text("\n".join(lines) + "\n")
    rid = stage_session(logs, "s2")
    last = json.loads((logs / "s2.jsonl").read_text().splitlines()[-1])  # read whole, with a warning
    extra = {**last, "seq": last["seq"] + 1, "type": "x/custom", "data": {}, "extraKey": 1}
    with (logs / "s2.jsonl").open("a") as fh:
        fh.write(json.dumps(extra) + "\n")
    return rid


def test_a_log_read_only_in_part_is_named_not_skipped(tmp_path: Path) -> None:
    """A damaged line drops the lines after it (the reader's torn-tail rule), and with them a
    review: ``inbox list`` warns naming the file and why, the web queue shows a notice and the
    session page says what was dropped, instead of the review silently missing."""
    logs = tmp_path / "logs"
    logs.mkdir()
    rid = _damaged(logs)
    out = CliRunner().invoke(main, ["inbox", "list", str(logs)])
    assert out.exit_code == 0, out.output
    assert rid in out.stdout
    from fsm_stage.log.dsh import read_log

    assert read_log(logs / "s2.jsonl").warnings  # a warning, yet nothing was dropped
    (line,) = out.stderr.splitlines()
    assert re.match(r"fsm-stage: warning: .*/s1\.jsonl: read in part, reviews after the damage are not "
                    r"listed: .*line 4 is not valid JSON", line), line

    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    pytest.importorskip("markdown_it")
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    client = TestClient(create_app(logs, reviewers_file=write_reviewers(tmp_path / "r.yaml"),
                                   secret_key="k" * 40))
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert token is not None
    login = {"csrf": token.group(1), "name": "alice", "token": TOKENS["alice"]}
    queue = client.post("/login", data=login).text
    assert "read only in part" in queue and "s1.jsonl" in queue and "line 4 is not valid JSON" in queue
    session = client.get("/session/s1.jsonl")
    assert session.status_code == 200 and "line 4 is not valid JSON" in session.text
    assert "line 4 is not valid JSON" not in client.get("/session/s2.jsonl").text
    review = client.get(f"/review/s2.jsonl/{rid}")
    assert review.status_code == 200 and "read only in part" not in review.text
