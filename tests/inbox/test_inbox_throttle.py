"""Failed logins and wrong bearer tokens are limited (``inbox._throttle``): past the limit a
client's attempts are answered 429 with ``Retry-After`` before the token is checked, even a
right token; other clients and other names are not held back by that client's failures
beyond the per-client limit; the window moves on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("limits")

from httpx import Response
from inbox_fixtures import TOKENS, csrf_of, stage_session, write_reviewers
from starlette.applications import Starlette
from starlette.testclient import TestClient

from fsm_stage.inbox import LoginThrottle, create_app
from fsm_stage.inbox._throttle import PER_CLIENT, PER_NAME


def _app(tmp_path: Path, throttle: LoginThrottle | None = None) -> tuple[Starlette, Path]:
    logs = tmp_path / "logs"
    logs.mkdir()
    stage_session(logs, "s1")
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"),
                     secret_key="k" * 40, throttle=throttle)
    return app, logs


def _login(client: TestClient, name: str, token: str) -> Response:
    page = client.get("/login")
    return client.post("/login", data={"csrf": csrf_of(page.text), "name": name, "token": token})


def test_the_defaults_are_five_per_name_and_twenty_per_client_a_minute() -> None:
    assert (PER_NAME, PER_CLIENT) == ("5/minute", "20/minute")


def test_failed_logins_past_the_limit_are_429_even_with_the_right_token(tmp_path: Path) -> None:
    app, _ = _app(tmp_path)
    client = TestClient(app, client=("203.0.113.7", 5000))
    for _ in range(5):
        bad = _login(client, "alice", "guess")
        assert bad.status_code == 401 and "wrong token" in bad.text
    held = _login(client, "alice", TOKENS["alice"])
    assert held.status_code == 429
    assert 1 <= int(held.headers["Retry-After"]) <= 60
    assert "too many failed logins" in held.text
    assert client.get("/", follow_redirects=False).status_code == 303  # not logged in
    # another name from the same client, and the same name from another client, still log in
    assert _login(client, "bob", TOKENS["bob"]).url.path == "/"
    other = TestClient(app, client=("198.51.100.9", 5000))
    assert _login(other, "alice", TOKENS["alice"]).url.path == "/"


def test_one_client_trying_many_names_is_held_by_the_per_client_limit(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, LoginThrottle(per_name="100/minute", per_client="3/minute"))
    client = TestClient(app, client=("203.0.113.8", 5000))
    for name in ("mallory", "eve", "trent"):
        assert _login(client, name, "x").status_code == 401
    assert _login(client, "bob", TOKENS["bob"]).status_code == 429


def test_wrong_bearer_tokens_are_limited_as_logins_are(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, LoginThrottle(per_name="2/minute"))
    client = TestClient(app, client=("203.0.113.9", 5000))
    wrong = {"Authorization": "Bearer alice:guess"}
    for _ in range(2):
        assert client.get("/api/reviews", headers=wrong).status_code == 401
    right = {"Authorization": f"Bearer alice:{TOKENS['alice']}"}
    held = client.get("/api/reviews", headers=right)
    assert held.status_code == 429 and "too many wrong tokens" in held.json()["error"]
    assert int(held.headers["Retry-After"]) >= 1
    # a failed web login counts toward the same name's limit as a wrong bearer token
    assert _login(client, "alice", TOKENS["alice"]).status_code == 429
    assert client.get("/api/reviews", headers={"Authorization": f"Bearer bob:{TOKENS['bob']}"}
                      ).status_code == 200


def test_the_window_moves_on(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, LoginThrottle(per_name="1/second"))
    client = TestClient(app, client=("203.0.113.10", 5000))
    assert _login(client, "alice", "guess").status_code == 401
    assert _login(client, "alice", TOKENS["alice"]).status_code == 429
    time.sleep(1.2)
    assert _login(client, "alice", TOKENS["alice"]).url.path == "/"


def test_right_tokens_are_never_counted(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, LoginThrottle(per_name="1/minute", per_client="1/minute"))
    client = TestClient(app, client=("203.0.113.11", 5000))
    right = {"Authorization": f"Bearer alice:{TOKENS['alice']}"}
    assert all(client.get("/api/reviews", headers=right).status_code == 200 for _ in range(5))


def test_a_malformed_limit_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        LoginThrottle(per_name="often")


def _serve(tmp_path: Path, *extra: str) -> tuple[Any, str]:
    """``fsm-stage inbox serve`` on a free port with the reviewers file: (process, base URL)."""
    import os
    import re
    import subprocess
    import sys

    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "fsm_stage", "inbox", "serve", str(logs), "--port", "0",
               "--reviewers", str(write_reviewers(tmp_path / "reviewers.yaml")), *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    assert proc.stdout is not None
    found = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", proc.stdout.readline())
    assert found is not None, proc.stderr.read() if proc.stderr else ""
    return proc, found.group(1)


def _statuses(url: str, n: int) -> list[int]:
    """``n`` API requests with a wrong token for alice, each claiming another client address."""
    import urllib.error
    import urllib.request

    out = []
    for i in range(n):
        request = urllib.request.Request(url + "api/reviews", headers={
            "Authorization": f"Bearer alice:guess{i}", "X-Forwarded-For": f"10.0.0.{i + 1}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                out.append(response.status)
        except urllib.error.HTTPError as err:
            out.append(err.code)
    return out


@pytest.mark.parametrize("trusted", [False, True])
def test_a_client_cannot_choose_the_address_its_failures_count_under(tmp_path: Path, trusted: bool) -> None:
    """uvicorn would take X-Forwarded-For from any loopback connection, so a local client (or one
    behind a proxy passing the header on) claimed a new address per request and was never held:
    ``inbox serve`` reads the header only from the ``--forwarded-allow-ips`` proxies."""
    import signal

    proc, url = _serve(tmp_path, *(["--forwarded-allow-ips", "127.0.0.1"] if trusted else []))
    try:
        statuses = _statuses(url, 7)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert statuses == ([401] * 7 if trusted else [401] * 5 + [429] * 2)


def test_expired_windows_are_dropped_so_memory_follows_recent_failures() -> None:
    """``limits``' memory storage keeps a window's key after its failures expire: failures from
    many addresses grew the process for ever (400,000 keys after 200,000). Every
    ``SWEEP_EVERY`` failures the expired windows go."""
    from fsm_stage.inbox._throttle import SWEEP_EVERY

    throttle = LoginThrottle(per_name="1/second", per_client="1/second")
    for i in range(SWEEP_EVERY - 1):
        throttle.failed(f"198.51.{i // 250}.{i % 250}", "alice")
    assert throttle.windows == 2 * (SWEEP_EVERY - 1)
    time.sleep(1.2)  # every window's failure expired
    throttle.failed("203.0.113.1", "alice")  # the SWEEP_EVERY-th failure sweeps
    assert throttle.windows == 2  # only the new failure's windows are left
    storage = throttle._storage  # the library's own record, not only ours
    assert len(storage.events) == 2
    assert throttle.retry_after("203.0.113.1", "alice") is not None  # the live one still holds
    assert throttle.retry_after("198.51.0.0", "alice") is None
