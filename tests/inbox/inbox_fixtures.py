"""Session logs with open reviews for the inbox tests (a folder of JSONL logs), and a reviewers file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reviews"))

from rig import Rig

from fsm_stage.constants import REVIEW_REQUEST
from fsm_stage.inbox._auth import token_sha256
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews import SuspendingReviewChannel

TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}


def write_reviewers(path: Path) -> Path:
    """alice (group leads) and bob."""
    path.write_text("reviewers:\n"
                    f"  alice: {{token_sha256: {token_sha256(TOKENS['alice'])}, groups: [leads]}}\n"
                    f"  bob: {{token_sha256: {token_sha256(TOKENS['bob'])}}}\n")
    return path


def stage_session(folder: Path, sid: str, *, handoff: str = "# Handoff\nwhat was done",
                  target: str = "implement") -> str:
    """A session log ``<sid>.jsonl`` whose goto_stage waits on an open review; returns its id."""
    cwd = folder / f"{sid}.cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    log = JsonlLog(folder / f"{sid}.jsonl", header=SessionHeader(id=sid, cwd=str(cwd)))
    try:
        return Rig(log, SuspendingReviewChannel()).suspend("stage", target=target, handoff=handoff)
    finally:
        log.close()


def plan_session(folder: Path, sid: str, plan: str) -> str:
    """A session log in plan mode whose exit_plan_mode (plan text ``plan``) waits on a review."""
    cwd = folder / f"{sid}.cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    log = JsonlLog(folder / f"{sid}.jsonl", header=SessionHeader(id=sid, cwd=str(cwd)))
    try:
        return Rig(log, SuspendingReviewChannel()).suspend("plan", plan=plan)
    finally:
        log.close()


def set_requester(path: Path, name: str) -> None:
    """Name ``name`` as the requester of the session log at ``path`` (its header's ``requester``)."""
    import json

    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["requester"] = name  # an unmodelled header key: SessionHeader.extra
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")


def add_rules(path: Path, rules: dict[str, Any]) -> None:
    """Give the (single) review request of the log at ``path`` logged ``rules`` (what a graph's
    review rules write into the request)."""
    import json

    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("type") == REVIEW_REQUEST:
            obj["data"]["rules"] = rules
        out.append(json.dumps(obj, separators=(",", ":")))
    path.write_text("\n".join(out) + "\n")


def login(page: Any, base: str, name: str = "alice") -> None:
    """Log ``name`` in through the browser ``page`` (a Playwright page) on the inbox at ``base``."""
    page.goto(f"{base}/")
    page.fill("input[name=name]", name)
    page.fill("input[name=token]", TOKENS[name])
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def dsh_fork(folder: Path, parent: str, child: str) -> Path:
    """``folder/<child>.jsonl``: a fork of ``folder/<parent>.jsonl`` as DeepSeek Harness writes
    one (header with ``parentSession`` and ``seedLength``, the parent's events verbatim, then
    ``session/end-seed``); no ``forked`` redemptions are written."""
    import json

    lines = (folder / f"{parent}.jsonl").read_text().splitlines()
    header, seed = json.loads(lines[0]), lines[1:]
    header.update({"id": child, "parentSession": header["id"], "seedLength": len(seed)})
    end = {"type": "session/end-seed", "seq": len(seed), "time": header["createdAt"], "data": {}}
    path = folder / f"{child}.jsonl"
    path.write_text("\n".join([json.dumps(header), *seed, json.dumps(end)]) + "\n")
    return path


def csrf_of(text: str) -> str:
    """The CSRF token of a page's form."""
    import re

    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None
    return found.group(1)


def logged_in(tmp_path: Path, name: str = "alice") -> tuple[Any, Path]:
    """A ``TestClient`` of an inbox over ``tmp_path / "logs"`` (created), logged in as ``name``."""
    from starlette.testclient import TestClient

    from fsm_stage.inbox import create_app

    logs = tmp_path / "logs"
    logs.mkdir()
    app = create_app(logs, reviewers_file=write_reviewers(tmp_path / "reviewers.yaml"), secret_key="k" * 40)
    client = TestClient(app)
    page = client.get("/login")
    client.post("/login", data={"csrf": csrf_of(page.text), "name": name, "token": TOKENS[name]})
    return client, logs
