"""The examples' stand-in LLM: it decides only from what each request sends it, as a real model
does: the instructions (system text) and the messages' texts in order. It never reads the
host, the log or the stage controller, so whatever it does, it was told to do.

``example_graph()`` is the shipped ``feature-work`` graph with ``min_handoff_tokens: 0``, so the
examples' short conversations make every model transition *full*: ``goto_stage`` without a
``handoff`` fails with the handoff template, the model calls again with a document that follows
it, the reviewer approves, and the new stage starts from the handoff on an archived surface.
"""

from __future__ import annotations

import re

import attrs

from fsm_stage.config import ConfigFile, load_config
from fsm_stage.resources import data_dir

PLAN = "# Plan\n1. add a --greeting flag to cli.py\n2. test it"
FINAL = "Verified: the tests pass."
_STAGE = re.compile(r"Current stage: (\S+)")
_TEMPLATE_HEADINGS = ("## Primary Request and Intent", "## Key Technical Concepts", "## Files and Code",
                      "## Errors and Fixes", "## Pending Jobs", "## Current Work", "## Next Step",
                      "## Critical Context")
_NOTES = {"implement": ("add --greeting to cli.py", "cli.py: argument parsing", "(none)",
                        "edit cli.py", "(none)", "edit cli.py", "the plan is approved"),
          "verify": ("add --greeting to cli.py", "cli.py: --greeting added", "(none)", "run the tests",
                     "cli.py edited", "run the tests", "(none)")}


def example_graph() -> ConfigFile:
    """``feature-work`` with every model transition full (``min_handoff_tokens: 0``)."""
    loaded = load_config(data_dir("stage_graphs") / "feature-work.yaml")
    assert loaded.graph is not None
    return attrs.evolve(loaded, graph=attrs.evolve(loaded.graph, min_handoff_tokens=0))


def handoff(target: str) -> str:
    """A handoff document for ``target`` in the template's structure (each section in order)."""
    bullets = ("Add a --greeting flag.", *_NOTES[target])
    return "\n\n".join(f"{h}\n- {b}" for h, b in zip(_TEMPLATE_HEADINGS, bullets, strict=True))


Move = tuple[str, dict[str, str]]


def next_move(system: str, texts: list[tuple[str, str]]) -> Move | None:
    """The next tool call ``(name, arguments)``, or None for the final answer ``FINAL``.

    ``system``: the request's instructions; ``texts``: ``(kind, text)`` for every message in
    order, ``kind`` being ``user``, ``assistant`` or ``tool:<name>`` for a tool result."""
    if "You are in plan mode" in system:
        return "exit_plan_mode", {"plan": PLAN}
    stage, since = "", 0
    for i, (_kind, text) in enumerate(texts):
        for found in _STAGE.findall(text):
            stage, since = found, i
    edited = any(kind == "tool:edit_file" for kind, _text in texts[since:])
    target = {"explore": "implement", "implement": "verify" if edited else None}.get(stage)
    if stage == "implement" and not edited:
        return "edit_file", {"path": "cli.py", "text": "--greeting"}
    if target is None:
        return None
    last_kind, last_text = texts[-1] if texts else ("", "")
    if last_kind == "tool:goto_stage" and _TEMPLATE_HEADINGS[0] in last_text:  # the full-switch refusal
        return "goto_stage", {"stage": target, "handoff": handoff(target)}
    return "goto_stage", {"stage": target}
