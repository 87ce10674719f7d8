"""Path and stage rules that cannot classify a call give it the strictest verdict: a backslash
in a path (a separator on Windows, a name character elsewhere), a stage the graph no longer
has, a session cwd that appears after the first check; and path globs that could never match
are refused by validation (docs/tool-policy.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fsm_stage.config import load_config_text
from fsm_stage.config.policy import ToolPolicyConfig, ToolRuleConfig
from fsm_stage.errors import ConfigError
from fsm_stage.policy._gate import PolicyState, ToolPolicy, stage_policy
from fsm_stage.policy._paths import normalise, workspace
from fsm_stage.runtime.tools import ToolCall


def _policy(allow: Any = None, ask: Any = ()) -> ToolPolicy:
    def rules(items: Any) -> tuple[ToolRuleConfig, ...]:
        return tuple(ToolRuleConfig(**i) for i in items)

    return ToolPolicy(ToolPolicyConfig(None if allow is None else rules(allow), rules(ask)))


MD_OR_ASK = _policy(allow=[{"tool": "write_file", "paths": ["**/*.md"]}],
                    ask=[{"tool": "write_file", "paths": ["secret/**"]}])


@pytest.mark.skipif(os.sep == "\\", reason="a backslash is a separator on Windows")
@pytest.mark.parametrize("path", ["secret/k\\..\\..\\notes.md", "a\\b.md", "docs\\a.md"])
def test_a_backslash_in_a_path_is_unclassifiable_on_posix(tmp_path: Path, path: str) -> None:
    """``secret/k\\..\\..\\notes.md`` is a file inside ``secret/`` to a POSIX tool, not
    ``notes.md``: the path is not classified, so ask rules apply and allow rules do not."""
    ws = workspace(str(tmp_path))
    forms, why = normalise(path, ws)
    assert forms == () and why is not None and "backslash" in why
    assert MD_OR_ASK.decide("write_file", {"path": path}, ws).verdict == "ask"
    assert _policy(allow=[{"tool": "write_file", "paths": ["**/*.md"]}]).decide(
        "write_file", {"path": path}, ws).verdict == "deny"


@pytest.mark.skipif(os.sep == "\\", reason="a backslash is a separator on Windows")
def test_a_symlink_with_a_backslash_in_its_name_does_not_escape_the_cwd(tmp_path: Path) -> None:
    cwd, outside = tmp_path / "cwd", tmp_path / "outside"
    cwd.mkdir()
    outside.mkdir()
    (outside / "victim.md").write_text("original\n")
    (cwd / "a\\b.md").symlink_to(outside / "victim.md")
    allow_md = _policy(allow=[{"tool": "write_file", "paths": ["**/*.md"]}])
    assert allow_md.decide("write_file", {"path": "a\\b.md"}, workspace(str(cwd))).verdict == "deny"


GRAPH = """
name: g
section: go << stage_targets >>
stages:
  - name: explore
    instruction: Explore.
    tools: {allow: [read_file]}
  - name: draft-v2
    instruction: Draft.
    tools: {allow: [read_file]}
"""


def test_a_stage_the_graph_does_not_have_denies_every_tool() -> None:
    """A session whose logged stage the (edited) graph no longer has: every stage restricts
    tools, so the unknown one gets the strictest policy, not none."""
    cfg = load_config_text(GRAPH)
    assert cfg.graph is not None
    policy = stage_policy(cfg.graph, "draft")
    assert policy is not None
    state = PolicyState("draft", False, policy, None, cfg.graph)
    assert state.decide(ToolCall.of("write_file", {"path": "/etc/x"})).verdict == "deny"
    assert state.decide(ToolCall.of("read_file", {"path": "a"})).verdict == "deny"
    assert state.decide(ToolCall.of("goto_stage", {"stage": "explore"})).verdict == "allow"
    unrestricted = load_config_text(GRAPH.replace("    tools: {allow: [read_file]}\n", ""))
    assert unrestricted.graph is not None and stage_policy(unrestricted.graph, "draft") is None


def test_a_cwd_created_after_the_first_check_is_resolved_then(tmp_path: Path) -> None:
    """The first check found no cwd: a later one, after the folder appeared with a symlink out
    of it, still resolves the link (nothing about a missing cwd is remembered)."""
    cwd = tmp_path / "ws"
    allow_md = _policy(allow=[{"tool": "write_file", "paths": ["**/*.md"]}])
    assert allow_md.decide("write_file", {"path": "notes.md"}, workspace(str(cwd))).verdict == "allow"
    cwd.mkdir()
    (cwd / "link.md").symlink_to(tmp_path / "elsewhere.md")
    assert allow_md.decide("write_file", {"path": "link.md"}, workspace(str(cwd))).verdict == "deny"


@pytest.mark.parametrize(("glob", "message"), [
    ("/cwd/secret/**", "is absolute"),
    ("~/secret/**", "is home-relative"),
    ("../ws/secret/**", "holds `..`"),
    ("docs/../secret/**", "holds `..`"),
    ("secret\\\\**", "holds a backslash"),
])
def test_a_path_glob_that_could_never_match_is_a_positioned_error(glob: str, message: str) -> None:
    text = GRAPH.replace("    tools: {allow: [read_file]}\n",
                         f'    tools: {{ask: [{{tool: write_file, paths: ["{glob}"]}}]}}\n', 1)
    with pytest.raises(ConfigError) as err:
        load_config_text(text)
    assert f"stages[0].tools.ask[0].paths[0]: {message}" in str(err.value)


def test_a_path_glob_naming_a_folder_warns_that_it_matches_only_the_folder() -> None:
    text = GRAPH.replace("    tools: {allow: [read_file]}\n",
                         '    tools: {ask: [{tool: write_file, paths: ["secret/"]}]}\n', 1)
    (warning,) = [w for w in load_config_text(text).warnings if "paths[0]" in str(w)]
    assert "secret/**" in str(warning)
    for glob in ("secret/**/", "**/"):  # these match what the folder holds: no warning
        quiet = text.replace('"secret/"', f'"{glob}"')
        assert [w for w in load_config_text(quiet).warnings if "paths[0]" in str(w)] == []
