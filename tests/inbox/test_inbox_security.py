"""The inbox's security rules over Starlette's TestClient: authentication, CSRF, CSP, inert
model-written text, refusals by the review's rules, loopback binding, answers in the log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

from inbox_fixtures import TOKENS, add_rules, plan_session, stage_session, write_reviewers
from starlette.testclient import TestClient

from fsm_stage.errors import UserError
from fsm_stage.inbox import create_app
from fsm_stage.inbox._security import is_loopback
from fsm_stage.log.dsh import read_log


def _csrf(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None
    return found.group(1)


def _client(tmp_path: Path) -> tuple[TestClient, Path]:
    logs = tmp_path / "logs"
    logs.mkdir()
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"), secret_key="k" * 40)
    return TestClient(app), logs


def _login(client: TestClient, name: str = "alice") -> str:
    page = client.get("/login")
    done = client.post("/login", data={"csrf": _csrf(page.text), "name": name, "token": TOKENS[name]})
    assert done.status_code == 200 and done.url.path == "/"
    return _csrf(done.text)


def test_pages_need_a_login_and_a_wrong_token_is_refused(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    stage_session(logs, "s1")
    first = client.get("/", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/login"
    assert client.get("/api/version", follow_redirects=False).status_code == 303
    page = client.get("/login")
    bad = client.post("/login", data={"csrf": _csrf(page.text), "name": "alice", "token": "nope"})
    assert bad.status_code == 401 and "wrong token" in bad.text
    unknown = client.post("/login", data={"csrf": _csrf(page.text), "name": "mallory", "token": "x"})
    assert unknown.status_code == 401
    _login(client)
    assert "s1" in client.get("/").text


def test_authentication_is_required_to_build_the_app(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="authentication required"):
        create_app(tmp_path)


def test_a_post_without_the_csrf_token_is_refused_and_nothing_is_logged(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1")
    _login(client)
    before = (logs / "s1.jsonl").read_bytes()
    for data in ({"action": "approve", "option": "Approve"}, {"csrf": "forged", "action": "approve"}):
        answer = client.post(f"/review/s1.jsonl/{rid}", data=data)
        assert answer.status_code == 403
        bulk = client.post("/bulk", data={**data, "selected": f"s1.jsonl/{rid}"})
        assert bulk.status_code == 403
    page = client.get("/login")
    assert client.post("/login", data={"name": "alice", "token": TOKENS["alice"]}).status_code == 403
    assert page.status_code == 200
    assert (logs / "s1.jsonl").read_bytes() == before


def test_every_response_carries_a_strict_csp(tmp_path: Path) -> None:
    client, _logs = _client(tmp_path)
    for path in ("/login", "/static/inbox.css"):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in client.get("/login").text  # scripts come from /static only


def test_a_plan_with_script_and_escape_sequences_renders_inert(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = plan_session(logs, "s1", "# Plan\n<script>alert(1)</script>\n"
                                   "\x1b[31mred\x1b[0m [x](javascript:alert(2))")
    _login(client)
    page = client.get(f"/review/s1.jsonl/{rid}").text
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\\x1b[31mred" in page
    assert 'href="javascript:' not in page


def test_character_references_to_bidi_and_format_characters_render_as_escapes(tmp_path: Path) -> None:
    """Markdown decodes ``&#x202E;`` into U+202E: the rendered page shows every control, bidi and
    format character as a visible escape, however the document spelled it."""
    import unicodedata

    client, logs = _client(tmp_path)
    doc = ("# Plan\n2. delete &#x202E;txet.sgol/ ,ylno&#x202C; scratch\n"
           "3. ok&#x2028;done &#x200B;x &#x61C; &#8238; &#x85; &#0; `&#x202E;` [a](b&#x202E;c)")
    rid = plan_session(logs, "s1", doc)
    _login(client)
    page = client.get(f"/review/s1.jsonl/{rid}").text
    hidden = {c for c in page if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c not in "\n\t\r"}
    assert hidden == set()
    assert "\\u202e" in page and "\\u200b" in page


def test_an_approval_is_an_event_by_the_inbox_reviewer(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1")
    csrf = _login(client)
    done = client.post(f"/review/s1.jsonl/{rid}",
                       data={"csrf": csrf, "action": "approve", "option": "Approve"})
    assert done.status_code == 200 and "approve: s1.jsonl" in done.text
    (answer,) = [e.data for e in read_log(logs / "s1.jsonl").events if e.type == "fsm/review/answer"]
    assert answer["id"] == rid and answer["outcome"] == "approve" and answer["by"] == "inbox:alice"
    assert rid not in client.get("/").text
    assert "inbox:alice" in client.get("/session/s1.jsonl").text


def test_keep_with_feedback_is_logged(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1")
    csrf = _login(client)
    client.post(f"/review/s1.jsonl/{rid}", data={"csrf": csrf, "action": "keep", "feedback": "add tests"})
    (answer,) = [e.data for e in read_log(logs / "s1.jsonl").events if e.type == "fsm/review/answer"]
    assert (answer["outcome"], answer["feedback"], answer["by"]) == ("keep", "add tests", "inbox:alice")


def test_a_reviewer_the_rules_do_not_allow_is_refused(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"approvers": ["@leads"]})
    csrf = _login(client, "bob")
    done = client.post(f"/review/s1.jsonl/{rid}",
                       data={"csrf": csrf, "action": "approve", "option": "Approve"})
    assert "refused" in done.text and "not among the approvers" in done.text
    assert not [e for e in read_log(logs / "s1.jsonl").events if e.type == "fsm/review/answer"]
    unreadable = stage_session(logs, "s2")
    add_rules(logs / "s2.jsonl", {"approvers": "bob"})  # not a list: nobody (fail closed)
    done = client.post(f"/review/s2.jsonl/{unreadable}", data={"csrf": csrf, "action": "approve"})
    assert "cannot be read" in done.text


def test_bulk_answers_each_review_on_its_own(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rids = {f"s{i}": stage_session(logs, f"s{i}") for i in range(3)}
    csrf = _login(client)
    done = client.post("/bulk", data={"csrf": csrf, "action": "approve",
                                      "selected": [*(f"{s}.jsonl/{r}" for s, r in rids.items()),
                                                   "x.jsonl/y"]})
    assert done.text.count("approve: s") == 3 and "not an open review" in done.text
    for sid, rid in rids.items():
        (answer,) = [e.data for e in read_log(logs / f"{sid}.jsonl").events if e.type == "fsm/review/answer"]
        assert answer["id"] == rid and answer["by"] == "inbox:alice"


def test_a_trusted_header_names_the_reviewer_and_its_absence_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    stage_session(logs, "s1")
    client = TestClient(create_app(logs, trusted_header="X-Forwarded-User", secret_key="k" * 40))
    assert client.get("/").status_code == 401
    page = client.get("/", headers={"X-Forwarded-User": "carol"})
    assert page.status_code == 200 and "carol" in page.text


def test_paths_outside_the_folder_are_not_served(tmp_path: Path) -> None:
    client, _logs = _client(tmp_path)
    (tmp_path / "secret.jsonl").write_text("{}\n")
    _login(client)
    for path in ("/session/..%2Fsecret.jsonl", "/session/.hidden.jsonl", "/session/nope.jsonl",
                 "/session/a%00.jsonl", "/review/a%00.jsonl/rv_1", "/review/a%00.jsonl/rv_1/edit",
                 "/graph/a%00.jsonl/rv_1.svg"):
        assert client.get(path).status_code == 404, path


def test_a_nul_in_a_bulk_selection_is_refused_in_one_line(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1")
    csrf = _login(client)
    done = client.post("/bulk", data={"csrf": csrf, "action": "approve", "selected": ["a\x00.jsonl/x",
                                                                                      f"s1.jsonl/{rid}"]})
    assert done.status_code == 200
    answers = [e.data["id"] for e in read_log(logs / "s1.jsonl").events if e.type == "fsm/review/answer"]
    assert answers == [rid]


def test_only_loopback_hosts_count_as_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")


def test_the_cli_refuses_a_public_host_without_authentication(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fsm_stage.cli import main

    result = CliRunner().invoke(main, ["inbox", "serve", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "not a loopback address" in result.output


def test_serve_prints_its_url_answers_and_exits_130_on_ctrl_c(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    command = [sys.executable, "-m", "fsm_stage", "inbox", "serve", str(tmp_path), "--port", "0"]
    proc = subprocess.Popen(command,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", first)
        assert url is not None, first + (proc.stderr.read() if proc.stderr else "")
        assert "one-time token" in proc.stdout.readline()
        with urllib.request.urlopen(url.group(1) + "login", timeout=10) as resp:
            assert resp.status == 200 and "default-src 'none'" in resp.headers["Content-Security-Policy"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_review_past_its_deadline_is_refused(tmp_path: Path) -> None:
    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1")
    add_rules(logs / "s1.jsonl", {"deadlineSeconds": 0.001})
    csrf = _login(client)
    assert "UTC" in client.get("/").text.split(rid, 1)[1].split("</tr>")[0]  # the deadline column
    done = client.post(f"/review/s1.jsonl/{rid}", data={"csrf": csrf, "action": "approve"})
    assert "refused" in done.text and "expired" in done.text
    # the refused answer closed it as its rules say (dismiss by default), by the deadline, not by alice
    (answer,) = [e.data for e in read_log(logs / "s1.jsonl").events if e.type == "fsm/review/answer"]
    assert (answer["outcome"], answer["by"]) == ("dismiss", "deadline")


def test_the_review_page_shows_the_document_stored_with_the_review(tmp_path: Path) -> None:
    """A reviewer whose inbox runs on another machine (the session's handoff file is not
    there) reads the exact document the review stored, the same bytes an approval accepts."""
    import shutil

    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1", handoff="# Handoff\nParser explored; next: the lexer.")
    shutil.rmtree(logs / "s1.cwd")  # the worker's file system is elsewhere
    _login(client)
    page = client.get(f"/review/s1.jsonl/{rid}").text
    assert "next: the lexer." in page and "cannot be read" not in page


@pytest.mark.parametrize("revoked", ["rotated", "removed"])
def test_a_revoked_token_ends_the_reviewers_logged_in_sessions(tmp_path: Path, revoked: str) -> None:
    """A login lasts only while the reviewers file keeps the token it was made with: after the
    token is rotated or removed (and the inbox restarted with the same secret key), the old
    cookie is logged out and approves nothing."""
    from fsm_stage.inbox._auth import token_sha256

    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "s1")
    reviewers = write_reviewers(tmp_path / "reviewers.yaml")
    first = TestClient(create_app(logs, reviewers_file=reviewers, secret_key="k" * 40))
    _login(first)
    cookie = first.cookies.get("fsm_inbox")
    assert cookie
    alice = f"{{token_sha256: {token_sha256('a-new-token-0123456789')}}}" if revoked == "rotated" else "{}"
    reviewers.write_text(f"reviewers:\n  alice: {alice}\n"
                         f"  bob: {{token_sha256: {token_sha256(TOKENS['bob'])}}}\n")
    second = TestClient(create_app(logs, reviewers_file=reviewers, secret_key="k" * 40))
    second.cookies.set("fsm_inbox", cookie)
    queue = second.get("/", follow_redirects=False)
    assert queue.status_code == 303 and queue.headers["location"] == "/login"
    page = second.get("/login")
    done = second.post(f"/review/s1.jsonl/{rid}", data={"csrf": _csrf(page.text), "action": "approve"},
                       follow_redirects=False)
    assert done.status_code in (303, 403)
    assert [e for e in read_log(logs / "s1.jsonl").events if e.type == "fsm/review/answer"] == []
    # bob, whose token did not change, stays logged in across the same restart
    third = TestClient(create_app(logs, reviewers_file=write_reviewers(tmp_path / "again.yaml"),
                                  secret_key="k" * 40))
    _login(third, "bob")
    bob = third.cookies.get("fsm_inbox")
    fourth = TestClient(create_app(logs, reviewers_file=reviewers, secret_key="k" * 40))
    fourth.cookies.set("fsm_inbox", bob)
    assert fourth.get("/", follow_redirects=False).status_code == 200


def test_a_handoff_changed_since_the_request_is_said_before_approve_is_clicked(tmp_path: Path) -> None:
    """The page shows the document as asked (the stored copy) and, when the file here changed
    since, says an approval would be refused and disables Approve (the reviewer used to learn it
    only from the refusal after clicking); the API's refusal field says the same."""
    from fsm_stage.constants import REVIEW_REQUEST

    client, logs = _client(tmp_path)
    rid = stage_session(logs, "s1", handoff="# Handoff\nParser explored; next: the lexer.")
    _login(client)
    assert "changed since the review was asked" not in client.get(f"/review/s1.jsonl/{rid}").text
    (request,) = [e.data for e in read_log(logs / "s1.jsonl").events if e.type == REVIEW_REQUEST]
    Path(request["handoffPath"]).write_text("# Handoff\nSomething else entirely.")
    page = client.get(f"/review/s1.jsonl/{rid}").text
    assert "the handoff document changed since the review was asked" in page
    assert "next: the lexer." in page  # what was asked is still what is shown
    assert re.search(r'class="approve" disabled', page)
    api = TestClient(client.app)
    bearer = {"Authorization": f"Bearer alice:{TOKENS['alice']}"}
    rows = api.get("/api/reviews", headers=bearer).json()["open"]
    assert rows[0]["id"] == rid and "changed since the review was asked" in rows[0]["refusal"]
