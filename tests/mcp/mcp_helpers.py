"""Shared helpers for the MCP server tests: a graph, a server in-process, log reading."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types

ROOT = Path(__file__).resolve().parents[2]
GRAPH = ROOT / "stage_graphs" / "feature-work.yaml"


def events(log: Path) -> list[dict[str, Any]]:
    """The log's event lines (the header dropped)."""
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [e for e in lines if e.get("type") != "session"]


def stages(log: Path) -> list[str]:
    """The stage notices' texts (``Current stage: …``) in the log, in order."""
    out = []
    for e in events(log):
        if e["type"] == "user/message":
            for block in e["data"].get("content", []):
                if block.get("type") == "text" and block["text"].startswith("Current stage: "):
                    out.append(block["text"].splitlines()[0].removeprefix("Current stage: "))
    return out


class Approver:
    """An elicitation callback answering every review with ``decision``; ``asked`` records the requests."""

    def __init__(self, decision: str, feedback: str | None) -> None:
        self.decision = decision
        self.feedback = feedback
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        content: dict[str, Any] = {"decision": self.decision}
        if self.feedback is not None:
            content["feedback"] = self.feedback
        return types.ElicitResult(action="accept", content=content)


def approve(decision: str = "Approve", feedback: str | None = None) -> Approver:
    """An elicitation callback answering every review with ``decision``."""
    return Approver(decision, feedback)


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result's first content block."""
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


def resource_text(result: types.ReadResourceResult) -> str:
    """The text of a resource read's first contents."""
    contents = result.contents[0]
    assert isinstance(contents, types.TextResourceContents), contents
    return contents.text


def env() -> dict[str, str]:
    """The environment for a server subprocess (this tree first on the path)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def server_argv(log: Path, cwd: Path, *extra: str) -> list[str]:
    """``python -m fsm_stage mcp --graph GRAPH --log LOG --cwd CWD …``."""
    return [sys.executable, "-m", "fsm_stage", "mcp", "--graph", str(GRAPH), "--log", str(log),
            "--cwd", str(cwd), *extra]


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(log: Path, cwd: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``fsm-stage mcp --http 127.0.0.1:PORT``; returns the process and its URL."""
    port = free_port()
    proc = subprocess.Popen(server_argv(log, cwd, "--http", f"127.0.0.1:{port}"), env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not listen within 30 s")
