"""Shared pieces of the adapter tests (a plain module): a ``StageHost`` over a memory log with a
host section, the scripted "LLM" the examples use (``next_move``), the cache-safety check
over what a fake model received."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from fsm_stage.integrations._host import StageHost
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.reviews import Answer, ReviewChannel, ScriptedReviewChannel
from fsm_stage.runtime.assembly import SystemSection

HOST_SECTION = "You are a careful coding agent."
ASK_GRAPH = """\
name: host-tool-reviews
section: Call goto_stage with one of << stage_targets >>.
stages:
  - name: explore
    instruction: Explore.
    tools:
      ask: [apply_patch]
  - name: verify
    instruction: Verify.
"""
"""A stage graph whose first stage asks a human before the host's ``apply_patch`` runs."""
PLAN = "# Plan\n1. add --greeting\n2. test it"


def make_host(review: ReviewChannel | None = None, *, approve_all: bool = False) -> StageHost:
    """A host in plan mode over a fresh memory log (``approve_all``: a scripted reviewer)."""
    channel = ScriptedReviewChannel(default=lambda qs: [Answer(q.id, ("Approve",)) for q in qs]
                                    ) if approve_all else review
    host = StageHost.open(MemoryLog(SessionHeader("s1", cwd=tempfile.mkdtemp())), review=channel,
                          guards={"tests_written": True})
    host.runtime.add_section(SystemSection("host", 10, lambda _agent: HOST_SECTION))
    assert host.plan is not None
    host.plan.set(host.agent, True)
    return host


def next_move(host: StageHost) -> tuple[str, dict[str, str]] | None:
    """plan mode → exit_plan_mode; explore → implement; edit_file; implement → verify; done."""
    if host.plan is not None and host.plan.get(host.agent).active:
        return "exit_plan_mode", {"plan": PLAN}
    edited = any(e.type == "tool/call" and e.data["name"] == "edit_file" for e in host.session.events)
    return {"explore": ("goto_stage", {"stage": "implement"}),
            "implement": ("goto_stage", {"stage": "verify"}) if edited
            else ("edit_file", {"path": "cli.py", "text": "--greeting"})}.get(host.current_stage() or "")


def edit_file_result(path: str, text: str) -> str:
    """What the host's ``edit_file`` tool returns."""
    return f"wrote {len(text)} characters to {path}"


def assert_cache_safe(host: StageHost, systems: Sequence[str | None], tools: Sequence[Any]) -> None:
    """What the fake model received: one tool list for every request; the system prompt changes
    once, when plan mode's section leaves, and never on the stage switches."""
    assert len(systems) == 5, systems  # plan exit, implement, edit_file, verify, the answer
    assert all(t == tools[0] for t in tools), "the tool list changed between requests"
    assert systems[0] is not None and HOST_SECTION in systems[0] and "plan mode" in systems[0]
    assert all(s == systems[1] for s in systems[1:]), "a light stage switch changed the system prompt"
    assert systems[1] is not None and systems[1].strip() == HOST_SECTION
    assert systems[0] != systems[1]
    assert host.current_stage() == "verify"
    # the log records every tool the model saw, the framework's own (edit_file) after fsm_stage's
    logged = [[t["name"] for t in e.data["header"]["tools"]] for e in host.session.events
              if e.type == "request/header"]
    seen = [*tool_names(host.runtime.tool_specs), "edit_file"]
    assert logged and all(names == seen for names in logged), logged
    types = [e.type for e in host.session.events]
    assert types[-1] == "turn/end" and host.session.events[-1].data["reason"] == {"kind": "completed"}


def edit_call(host: StageHost) -> str:
    """The logged call id of the host's ``edit_file`` call."""
    return next(e.data["callId"] for e in host.session.events
                if e.type == "tool/call" and e.data["name"] == "edit_file")


def tool_names(specs: Sequence[Any]) -> list[str]:
    """fsm_stage's own tool names in the order the runtime registers them."""
    return [s.name for s in specs]
