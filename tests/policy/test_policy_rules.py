"""Every row of the tool-policy rule table (docs/tool-policy.md) at the reference loop's
``Runtime.call_tool`` and at the step driver (``StagedSession.run_tool`` and
``StagedSession.authorize``), plus the path reading itself: case, path-like keys, bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policy_helpers import Recording, run
from policy_rules import PLAN_GRAPHS, ROWS, approving, config, verdict_in, workspace_at

from fsm_stage import open_session
from fsm_stage.config.policy import ToolPolicyConfig, ToolRuleConfig
from fsm_stage.driver import StagedSession
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.policy._gate import ToolPolicy
from fsm_stage.policy._paths import Workspace, call_paths, normalise, path_like, workspace
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.messages import user_message
from fsm_stage.runtime.runtime import Runtime


def _wired(graph: str, cwd: str) -> tuple[Runtime, InboxAgent, Recording]:
    cfg = config(graph)
    assert cfg.graph is not None
    host = open_session(cfg, MemoryLog(SessionHeader("rules", cwd=cwd)), review=approving(), guidance=False,
                        repair=False)
    rt, agent = host.runtime, host.agent
    if host.plan is not None:
        host.plan.set(agent, graph in PLAN_GRAPHS)
    tool = Recording("write_file")
    rt.add_tool(tool)
    return rt, agent, tool


def _driver(rt: Runtime, agent: InboxAgent, call: Any) -> StagedSession:
    driver = StagedSession(rt, agent)
    agent.steer(user_message("go"))
    driver.start_turn()
    assert driver.begin_step() is not None
    driver.record_reply("", [call])
    return driver


def _at_runtime(graph: str, cwd: str, call: Any) -> str:
    rt, agent, tool = _wired(graph, cwd)
    run(rt.call_tool(agent, call, turn=1, step=1))
    return verdict_in(agent.session.events, call.id, len(tool.calls))


def _at_driver_run_tool(graph: str, cwd: str, call: Any) -> str:
    rt, agent, tool = _wired(graph, cwd)
    run(_driver(rt, agent, call).run_tool(call))
    return verdict_in(agent.session.events, call.id, len(tool.calls))


def _at_driver_authorize(graph: str, cwd: str, call: Any) -> str:
    rt, agent, _tool = _wired(graph, cwd)
    driver = _driver(rt, agent, call)
    refused = run(driver.authorize(call))
    ran = 0
    if refused is None:  # the host runs its own tool now
        ran = 1
        driver.record_tool_result(call, "done")
    return verdict_in(agent.session.events, call.id, ran)


POINTS = {
    "runtime": _at_runtime,
    "driver.run_tool": _at_driver_run_tool,
    "driver.authorize": _at_driver_authorize,
}


@pytest.mark.parametrize("point", sorted(POINTS))
@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rule(row_id: str, point: str, tmp_path: Path) -> None:
    row = ROWS[row_id]
    cwd = workspace_at(tmp_path)
    assert POINTS[point](row.graph, cwd, row.call(cwd)) == row.verdict, row.rule


def test_the_catalog_is_byte_identical_in_every_stage(tmp_path: Path) -> None:
    rt, agent, _tool = _wired("ask", workspace_at(tmp_path))
    before = [(s.name, s.description, repr(s.parameters)) for s in rt.tool_specs]
    run(rt.run_command(agent, "/stage other"))
    assert [(s.name, s.description, repr(s.parameters)) for s in rt.tool_specs] == before


# --- reading paths -----------------------------------------------------------------------------


def _policy(allow: Any = None, ask: Any = ()) -> ToolPolicy:
    def rules(items: Any) -> tuple[ToolRuleConfig, ...]:
        return tuple(ToolRuleConfig(**i) for i in items)

    return ToolPolicy(ToolPolicyConfig(None if allow is None else rules(allow), rules(ask)))


ASK = _policy(ask=[{"tool": "write_file", "paths": ["secret/**"]}])
ALLOW = _policy(allow=[{"tool": "write_file", "paths": ["docs/*.md"]}])


@pytest.mark.parametrize(
    ("case", "ask", "allow"),
    [
        ("fold", "ask", "allow"),  # the file system ignores case: SECRET is secret, DOCS is docs
        ("exact", "allow", "deny"),  # it does not: SECRET and DOCS are other folders
        ("unknown", "ask", "deny"),  # not known: the strict side of both
    ],
)
def test_case_follows_the_file_system_and_is_strict_when_unknown(case: str, ask: str, allow: str) -> None:
    ws = Workspace("/w", None, case)  # type: ignore[arg-type]
    assert ASK.decide("write_file", {"path": "SECRET/key"}, ws).verdict == ask
    assert ALLOW.decide("write_file", {"path": "DOCS/A.md"}, ws).verdict == allow
    assert ALLOW.decide("write_file", {"path": "/W/docs/a.md"}, ws).verdict == (
        "allow" if case == "fold" else "deny"
    )


def test_the_case_probe_reads_the_cwd(tmp_path: Path) -> None:
    (tmp_path / "Probe").mkdir()
    ws = workspace(str(tmp_path))
    lower_exists = (tmp_path / "pROBE").exists()
    assert ws.case == ("fold" if lower_exists else "exact")
    assert workspace(None).case == "unknown" and workspace("relative/cwd").root is None
    assert workspace(str(tmp_path)) == ws


@pytest.mark.parametrize(
    ("key", "like"),
    [
        ("path", True),
        ("file_path", True),
        ("targetFile", True),
        ("src-dir", True),
        ("output.path", True),
        ("cwd", True),
        ("destination", True),
        ("paths", True),
        ("pathname", True),
        ("src", True),
        ("sourceFiles", True),
        ("target", True),
        ("output", True),
        ("uri", True),
        ("profile", False),
        ("resource", False),
        ("outcome", False),
        ("text", False),
        ("content", False),
        ("pathology", False),
    ],
)
def test_path_like_keys(key: str, like: bool) -> None:
    assert path_like(key) is like


@pytest.mark.parametrize("key", ["pathname", "src", "source", "dst", "target", "output", "outdir", "uri",
                                 "url"])
def test_a_second_path_in_a_common_path_word_is_never_unread(key: str) -> None:
    """A path under a word that often names one is read as path-like, so an allow rule for
    ``**/*.md`` does not let ``secret/key`` through beside an allowed ``path``."""
    args = {"path": "notes.md", key: "secret/key.md"}
    assert ALLOW.decide("write_file", args).verdict == "deny"
    assert ASK.decide("write_file", args).verdict == "ask"


@pytest.mark.parametrize("bad", ["", "a\x00b", "~/x", "C:/x", "file:///etc", "x" * 5000, "../x"])
def test_paths_that_cannot_be_normalised(bad: str) -> None:
    forms, why = normalise(bad, Workspace(None, None, "unknown"))
    assert forms == () and why
    assert ASK.decide("write_file", {"path": bad}).verdict == "ask"
    assert ALLOW.decide("write_file", {"path": bad}).verdict == "deny"


def test_absolute_paths_need_a_session_cwd() -> None:
    assert (
        normalise("/w/docs/a.md", Workspace(None, None, "unknown"))[1]
        == "is absolute and the session has no cwd"
    )
    assert normalise("/w/docs/../docs/a.md", Workspace("/w", None, "exact")) == (("docs/a.md",), None)
    assert normalise("/w", Workspace("/w", None, "exact")) == (("",), None)
    assert normalise("/wx/a", Workspace("/w", None, "exact"))[1] == "lies outside the session cwd"


def test_hostile_arguments_stay_bounded() -> None:
    deep: Any = "x"
    for _ in range(50_000):
        deep = [deep]
    found = call_paths({"path": "a.md", "blob": deep}, ("path",), Workspace(None, None, "unknown"))
    assert found.problems == ("argument 'blob' nests a path (…)",)
    many = call_paths({"paths": ["a.md"] * 1000}, ("paths",), Workspace(None, None, "unknown"))
    assert "more than 256 paths" in many.problems[-1]
    assert ALLOW.decide("write_file", {"path": "docs/a.md", "blob": deep}).verdict == "deny"


def test_a_host_without_stage_or_plan_controllers_never_loads_the_gate() -> None:
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from fsm_stage.driver import StagedSession\n"
        "from fsm_stage.runtime.runtime import Runtime\n"
        "from fsm_stage.runtime.tools import ToolCall\n"
        "asyncio.run(Runtime().authorize(None, ToolCall.of('x', {'path': '/etc/x'})))\n"
        "print(sorted(m for m in ('fsm_stage.policy._gate', 'fsm_stage.config') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
