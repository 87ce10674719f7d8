"""The tool-policy rule table of docs/tool-policy.md as data (a plain test module shared by the
runtime, step-driver, adapter and MCP tests): each ``Row`` is a graph, a call's arguments and
the verdict every enforcement point must reach; ``workspace_at`` builds the session cwd the
rows' paths refer to; ``verdict_in`` reads the verdict back from the log."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.config import ConfigFile, load_config_text
from fsm_stage.reviews import Answer, ScriptedReviewChannel
from fsm_stage.runtime.tools import ToolCall

_HEAD = "name: rules\nsection: Call goto_stage with one of << stage_targets >>.\n"
_OTHER = "  - name: other\n    instruction: Other.\n"
GRAPHS: dict[str, str] = {
    # ask only: every write_file runs except under secret/, which is reviewed first
    "ask": _HEAD + "stages:\n  - name: work\n    instruction: Work.\n    tools:\n"
    '      ask: [{tool: write_file, paths: ["secret/**"]}]\n' + _OTHER,
    # allow only: read_file, and write_file on Markdown files
    "allow": _HEAD + "stages:\n  - name: work\n    instruction: Work.\n    tools:\n"
    '      allow: [read_file, {tool: write_file, paths: ["**/*.md"]}]\n' + _OTHER,
    # both, overlapping on secret/*.md
    "both": _HEAD + "stages:\n  - name: work\n    instruction: Work.\n    tools:\n"
    '      allow: [{tool: write_file, paths: ["**/*.md"]}]\n'
    '      ask: [{tool: write_file, paths: ["secret/**"]}]\n' + _OTHER,
    # stage asks, plan mode (effective) allows only read_file: deny beats ask
    "plan-deny": _HEAD + "stages:\n  - name: work\n    instruction: Work.\n    tools:\n"
    "      ask: [write_file]\n"
    + _OTHER
    + "plan_mode:\n  section: Plan first.\n  tools:\n    allow: [read_file]\n",
    # stage allows, plan mode (effective) asks: ask beats allow
    "plan-ask": _HEAD + "stages:\n  - name: work\n    instruction: Work.\n    tools:\n"
    "      allow: [read_file, write_file]\n"
    + _OTHER
    + "plan_mode:\n  section: Plan first.\n  tools:\n    ask: [write_file]\n",
}
PLAN_GRAPHS = frozenset({"plan-deny", "plan-ask"})


def config(graph: str) -> ConfigFile:
    """The loaded graph ``graph`` of ``GRAPHS``."""
    return load_config_text(GRAPHS[graph], f"{graph}.yaml")


def workspace_at(root: Path) -> str:
    """Lay out a session cwd under ``root``: ``secret/key``, ``notes.md``, ``docs/a.md``, the
    folder symlink ``alias -> secret`` and ``link.md`` pointing outside; return the cwd."""
    cwd = root / "ws"
    (cwd / "secret").mkdir(parents=True)
    (cwd / "docs").mkdir()
    (cwd / "secret" / "key").write_text("k")
    (cwd / "notes.md").write_text("n")
    (cwd / "docs" / "a.md").write_text("a")
    (root / "outside.md").write_text("o")
    os.symlink(cwd / "secret", cwd / "alias")
    os.symlink(root / "outside.md", cwd / "link.md")
    return str(cwd)


@attrs.frozen
class Row:
    """One rule of the table: ``rule`` (the docs' wording), ``graph``, ``args`` (a function of
    the cwd giving the arguments, or their raw text) and the ``verdict``."""

    rule: str
    graph: str
    args: Callable[[str], Mapping[str, Any] | str]
    verdict: str

    def call(self, cwd: str, tool: str = "write_file") -> ToolCall:
        """The row's call (id ``c1``)."""
        args = self.args(cwd)
        return ToolCall("c1", tool, args) if isinstance(args, str) else ToolCall.of(tool, args, id="c1")


def _a(value: Mapping[str, Any] | str) -> Callable[[str], Mapping[str, Any] | str]:
    return lambda _cwd: value


#: The rule table; ``id`` is the row name docs/tool-policy.md cites (``test_rule[<id>]``).
ROWS: dict[str, Row] = {
    "ask-one-path": Row("a path matching an ask glob", "ask", _a({"path": "secret/key"}), "ask"),
    "ask-dotdot": Row("`..` is resolved before matching", "ask", _a({"path": "x/../secret/key"}), "ask"),
    "ask-absolute": Row(
        "an absolute path inside the cwd is made relative",
        "ask",
        lambda cwd: {"path": f"{cwd}/secret/key"},
        "ask",
    ),
    "ask-slashes": Row(
        "`//`, `.` and a trailing `/` are dropped", "ask", _a({"path": "./secret//key/"}), "ask"
    ),
    "ask-folder": Row(
        "a folder that could hold a match matches an ask rule", "ask", _a({"path": "secret/"}), "ask"
    ),
    "ask-cwd": Row("the cwd itself could hold a match", "ask", _a({"path": "."}), "ask"),
    "ask-list": Row(
        "one matching path of a list is enough", "ask", _a({"path": ["notes.md", "secret/key"]}), "ask"
    ),
    "ask-second-arg": Row(
        "a second path-like argument is read", "ask", _a({"path": "notes.md", "file": "secret/key"}), "ask"
    ),
    "ask-nested": Row(
        "a path nested in another argument is unclassifiable",
        "ask",
        _a({"path": "notes.md", "edits": [{"file_path": "secret/key"}]}),
        "ask",
    ),
    "ask-not-a-string": Row(
        "a path value that is not a string is unclassifiable", "ask", _a({"path": 3}), "ask"
    ),
    "ask-not-json": Row(
        "arguments that are not a JSON object are unclassifiable", "ask", _a("{not json"), "ask"
    ),
    "ask-duplicate-key": Row(
        "a key given twice is unclassifiable", "ask", _a('{"path": "secret/key", "path": "notes.md"}'), "ask"
    ),
    "ask-outside": Row("a path outside the cwd is unclassifiable", "ask", _a({"path": "/etc/passwd"}), "ask"),
    "ask-escape": Row("`..` above the cwd is unclassifiable", "ask", _a({"path": "../ws/secret/key"}), "ask"),
    "ask-symlink": Row(
        "a symlink is followed (either form may match)", "ask", _a({"path": "alias/key"}), "ask"
    ),
    "ask-no-path": Row("a call without any path argument is unclassifiable", "ask", _a({"text": "x"}), "ask"),
    "ask-harmless": Row(
        "no path matches and all are clean: the rule does not apply", "ask", _a({"path": "notes.md"}), "allow"
    ),
    "allow-match": Row("every path matches an allow glob", "allow", _a({"path": "docs/a.md"}), "allow"),
    "allow-absolute-inside": Row(
        "an absolute path inside the cwd is made relative",
        "allow",
        lambda cwd: {"path": f"{cwd}/docs/a.md"},
        "allow",
    ),
    "allow-outside": Row(
        "an absolute path outside the cwd never matches", "allow", _a({"path": "/etc/x.md"}), "deny"
    ),
    "allow-double-slash": Row(
        "`//` at the start is still outside the cwd", "allow", _a({"path": "//etc/x.md"}), "deny"
    ),
    "allow-every-path": Row("every path must match", "allow", _a({"paths": ["a.md", "src/x.py"]}), "deny"),
    "allow-list-shape": Row(
        "a list under a one-path key is unexpected", "allow", _a({"path": ["a.md"]}), "deny"
    ),
    "allow-second-arg": Row(
        "a path-like argument the rule does not name is unexpected",
        "allow",
        _a({"path": "a.md", "dest": "b.md"}),
        "deny",
    ),
    "allow-nested": Row(
        "a nested path is unexpected", "allow", _a({"path": "a.md", "meta": {"path": "x.md"}}), "deny"
    ),
    "allow-symlink-out": Row("a symlink out of the cwd is outside", "allow", _a({"path": "link.md"}), "deny"),
    "allow-escape": Row("`..` above the cwd never matches", "allow", _a({"path": "../outside.md"}), "deny"),
    "allow-not-a-string": Row(
        "a path value that is not a string never matches", "allow", _a({"path": None}), "deny"
    ),
    "both-ask-beats-allow": Row(
        "ask beats allow within a policy", "both", _a({"path": "secret/a.md"}), "ask"
    ),
    "both-allow": Row("an allowed path outside the ask glob runs", "both", _a({"path": "notes.md"}), "allow"),
    "both-default-deny": Row("matched by neither: deny", "both", _a({"path": "a.py"}), "deny"),
    "plan-deny-beats-ask": Row(
        "deny (plan mode) beats ask (stage)", "plan-deny", _a({"path": "a.md"}), "deny"
    ),
    "plan-ask-beats-allow": Row(
        "ask (plan mode) beats allow (stage)", "plan-ask", _a({"path": "a.md"}), "ask"
    ),
}


def approving() -> ScriptedReviewChannel:
    """A review channel approving every question (an ``ask`` verdict then runs the call)."""
    return ScriptedReviewChannel(
        keep_label="Deny", default=lambda qs: [Answer(q.id, ("Approve",)) for q in qs]
    )


def verdict_in(events: Any, call_id: str, ran: int) -> str:
    """The verdict the log and the execution count show for ``call_id``: ``ask`` (a tool review
    was requested, then the approved call ran at most once), ``deny`` (refused, nothing ran) or
    ``allow`` (ran once, no review)."""
    reviewed = any(
        e.type == "fsm/review/request" and e.data.get("callId") == call_id and e.data.get("kind") == "tool"
        for e in events
    )
    refused = any(e.type == "fsm/tool/refused" and e.data.get("callId") == call_id for e in events)
    if refused:
        assert ran == 0, "a refused call ran"
        return "deny"
    if reviewed:  # approved: it ran once (arguments that are not JSON are then refused by dispatch)
        assert ran <= 1, f"an approved call ran {ran} times"
        return "ask"
    assert ran == 1, f"an admitted call ran {ran} times"
    return "allow"
