"""The stage graph on an inbox review page marks the move by the review's state: ``in review``
while it is open, ``pending`` once approved and not yet applied, nothing once the transition is
applied or the move is refused (the DOT text is read from the page, Graphviz or not)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

from inbox_fixtures import TOKENS, stage_session, write_reviewers
from rig import Rig, run
from starlette.testclient import TestClient
from tests_graph import graph

from fsm_stage.inbox import _render, create_app
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import SuspendingReviewChannel


def _csrf(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None, text[:300]
    return found.group(1)


def _client(logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, str]:
    monkeypatch.setattr(_render, "graph_svg", lambda dot: None)  # the page shows the DOT text itself
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"), secret_key="k" * 40,
                     graph=graph())
    client = TestClient(app)
    done = client.post("/login", data={"csrf": _csrf(client.get("/login").text), "name": "alice",
                                       "token": TOKENS["alice"]})
    assert done.status_code == 200
    return client, _csrf(done.text)


def _edge_label(page: str) -> str:
    """The label of the explore → implement arrow in the page's DOT text."""
    dot = re.search(r'<pre class="dot">(.*?)</pre>', page, re.S)
    assert dot is not None, page[:500]
    arrow = re.search(r'"explore" -> "implement"(?: \[label="([^"]*)")?', html.unescape(dot.group(1)))
    assert arrow is not None, dot.group(1)
    return arrow.group(1) or ""


def test_open_approved_and_applied_reviews_mark_the_move_differently(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "s1")
    client, csrf = _client(logs, tmp_path, monkeypatch)
    url = f"/review/s1.jsonl/{rid}"

    assert "in review" in _edge_label(client.get(url).text)

    client.post(url, data={"csrf": csrf, "action": "approve"})
    approved = _edge_label(client.get(url).text)
    assert "pending" in approved and "in review" not in approved

    log = JsonlLog(logs / "s1.jsonl")  # the host resumes: the call redeems the approval
    rig = Rig(log, SuspendingReviewChannel())
    try:
        run(rig.resume(rig.goto_call("implement")))
        rig.step(2)  # the boundary applies the approved transition
        assert rig.stage.current(rig.session) == "implement"
    finally:
        log.close()
    applied = _edge_label(client.get(url).text)
    assert "pending" not in applied and "in review" not in applied


def test_a_refused_move_is_not_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "s1")
    client, csrf = _client(logs, tmp_path, monkeypatch)
    url = f"/review/s1.jsonl/{rid}"
    client.post(url, data={"csrf": csrf, "action": "keep", "feedback": "not yet"})
    label = _edge_label(client.get(url).text)
    assert "pending" not in label and "in review" not in label



def test_a_session_on_another_graph_is_not_drawn_with_the_inbox_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inbox draws its ``--graph`` only for sessions whose logged ``fsm/graph`` fingerprint
    is that graph's: a session run on another graph gets a note naming it, never a wrong
    drawing (nor its SVG)."""
    import json

    logs = tmp_path / "logs"
    logs.mkdir()
    rid = stage_session(logs, "s1")
    other = stage_session(logs, "s2")
    path = logs / "s2.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "fsm/graph":
            obj["data"] = {"name": "another", "fingerprint": "sha256:" + "0" * 64}
        lines.append(json.dumps(obj, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")
    client, _ = _client(logs, tmp_path, monkeypatch)
    assert "in review" in _edge_label(client.get(f"/review/s1.jsonl/{rid}").text)  # its own graph
    page = client.get(f"/review/s2.jsonl/{other}")
    assert page.status_code == 200 and '<pre class="dot">' not in page.text
    assert "this session runs another stage graph (&#39;another&#39;, sha256:000" in page.text
    monkeypatch.setattr(_render, "graph_svg", lambda dot: "<svg/>")
    assert client.get(f"/graph/s1.jsonl/{rid}.svg").status_code == 200
    assert client.get(f"/graph/s2.jsonl/{other}.svg").status_code == 404
