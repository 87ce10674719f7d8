"""Where the policy shows: validate --tools, state, diagrams, the simulator and feature-work."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from policy_helpers import GRAPH, config

from fsm_stage.cli import main
from fsm_stage.diagram import to_dot, to_mermaid
from fsm_stage.resources import data_dir

FEATURE = data_dir("stage_graphs") / "feature-work.yaml"
SCENARIO = data_dir("stage_graphs") / "scenarios" / "feature-work.yaml"
CATALOG = "read_file,grep,list_files,apply_patch,write_file,run_tests"


def test_validate_takes_the_host_catalog() -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["validate", str(FEATURE), "--tools", CATALOG])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(
        main, ["validate", str(FEATURE), "--tools", "read_file,grep", "--tools", "list_files"]
    )
    assert bad.exit_code == 1
    lines = [x for x in bad.output.splitlines() if "unknown tool" in x]
    assert lines and lines[0].startswith(f'{FEATURE}:16:10: tool_groups.edit[0]: unknown tool "apply_patch"')


def test_validate_without_a_catalog_warns_about_names_in_no_group(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(GRAPH, encoding="utf-8")
    out = CliRunner().invoke(main, ["validate", str(path)])
    assert out.exit_code == 0
    assert f'{path}:10:31: warning: stages[0].tools.allow[1].tool: tool "write_file" is in no' in out.output


def test_diagrams_count_the_tools_per_stage_and_plan_mode() -> None:
    cfg = config()
    assert cfg.graph is not None
    mermaid = to_mermaid(cfg.graph, cfg.plan_mode)
    assert 'state "explore · 3 tools" as' in mermaid and 'state "implement" as' in mermaid
    assert 'state "verify · 3 tools, 1 ask" as' in mermaid and 'state "plan · 3 tools" as pm_plan' in mermaid
    dot = to_dot(cfg.graph, cfg.plan_mode)
    assert '"explore" [label="explore\\n3 tools"]' in dot and '[label="plan\\n3 tools"]' in dot


def test_simulating_feature_work_refuses_apply_patch_in_explore_and_keeps_the_prefix(tmp_path: Path) -> None:
    log = tmp_path / "fw.jsonl"
    out = CliRunner().invoke(main, ["simulate", str(SCENARIO), "--json", "--log", str(log)])
    assert out.exit_code == 0, out.output
    records = [json.loads(x) for x in out.output.splitlines() if x.startswith("{")]
    requests = [r for r in records if "request" in r]
    # the policy in effect, as the tools of the catalog it admits
    assert requests[0]["policy"] == "stage explore: read_file · plan mode: read_file"
    assert requests[4]["stage"] == "implement" and "policy" in requests[4]
    assert requests[4]["policy"] == "every tool"
    # the catalog never changes; the system prompt changes only where plan mode's own section
    # (order 50) goes away; the light switch to implement reuses the whole prefix
    assert all(r["prefix"]["tools"] == "kept" for r in requests[1:])
    changed = [r["request"] for r in requests[1:] if r["prefix"]["system"] != "kept"]
    assert changed == [4] and requests[3]["prefix"]["system_change"] == "plan:policy (order 50) removed"
    light = requests[4]["prefix"]
    assert (light["system"], light["tools"], light["messages"]) == ("kept", "kept", "kept")
    refusal = [m["text"] for m in requests[2]["messages"] if "not allowed" in m["text"]]
    assert refusal == [
        '[error] Error: Tool "apply_patch" is not allowed in stage "explore" (rule: not in the allow '
        "list); nothing ran. It is allowed in stages: implement"
    ]
    events = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()[1:]]
    refused = [e for e in events if e["type"] == "fsm/tool/refused"]
    assert [(e["data"]["name"], e["data"]["stage"]) for e in refused] == [("apply_patch", "explore")]
    state = CliRunner().invoke(main, ["state", str(log), "--graph", str(FEATURE), "--json"])
    assert (
        json.loads(state.output)["stage"]["tools"] == "stage verify: read_file, grep, list_files, run_tests"
    )


def test_state_prints_the_current_policy(tmp_path: Path) -> None:
    log = tmp_path / "fw.jsonl"
    assert CliRunner().invoke(main, ["simulate", str(SCENARIO), "--log", str(log)]).exit_code == 0
    out = CliRunner().invoke(main, ["state", str(log), "--graph", str(FEATURE)])
    assert "tools:        stage verify: read_file, grep, list_files, run_tests" in out.output.splitlines()
    early = CliRunner().invoke(main, ["state", str(log), "--graph", str(FEATURE), "--at", "10"])
    both = "stage explore: read_file, grep, list_files · plan mode: read_file, grep, list_files"
    assert f"tools:        {both}" in early.output.splitlines()
    bare = CliRunner().invoke(main, ["state", str(log), "--json"])
    assert "tools" not in json.loads(bare.output)["stage"]
