"""``inbox serve`` on an unreachable PostgreSQL location: every page that reads the store
answers 503 in one line (docs/inbox.md, "PostgreSQL unreachable"), never a traceback or 500."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from inbox_fixtures import TOKENS, write_reviewers

pytest.importorskip("starlette")
pytest.importorskip("psycopg")


def test_every_store_page_answers_503_when_postgresql_is_unreachable(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    url = f"postgresql://nobody@/nodb?host={tmp_path / 'no-server'}&port=1"
    app = create_app(url, reviewers_file=write_reviewers(tmp_path / "r.yaml"), secret_key="k" * 40)
    client = TestClient(app, raise_server_exceptions=False)
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    client.post("/login", data={"csrf": csrf.group(1), "name": "alice", "token": TOKENS["alice"]})
    for path in ("/", "/api/version", "/session/s1", "/review/s1/rv_1"):
        got = client.get(path)
        assert got.status_code == 503, path
        assert got.text.startswith("503: the session store cannot be read:") and "cannot connect" in got.text
        assert "\n" not in got.text.strip() and "Traceback" not in got.text
