"""``fsm-stage draw GRAPH --log LOG``: the session's current stage, plan mode and a pending
transition highlighted; ``--width/--scale/--dpi`` size hints; one label per DOT arrow."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cli_inputs import _log

from fsm_stage.cli import main, session_marks
from fsm_stage.config import EdgeConfig, GraphConfig, PlanModeConfig, StageConfig
from fsm_stage.constants import REVIEW_REQUEST, TOOL_CALL
from fsm_stage.diagram import PLAN_ACTIVE_LABEL, SizeHints, size_notes, to_dot, to_mermaid
from fsm_stage.log.events import NewEvent
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.reviews._fold import stage_payload_sha256

GRAPH = """\
name: g
section: s
stages:
  - {name: a, instruction: x, targets: [{to: b, guards: [ready]}]}
  - {name: b, instruction: y, targets: [{to: a, guards: [redo]}, c]}
  - {name: c, instruction: z, targets: []}
"""
PLAN = "plan_mode:\n  section: Plan first.\n"
BI = GraphConfig(
    name="bi",
    section="s",
    stages=(
        StageConfig("a", "x", (EdgeConfig("b", ("ready",)),)),
        StageConfig("b", "x", (EdgeConfig("a", ("redo",)), EdgeConfig("c"))),
        StageConfig("c", "x", ()),
    ),
)


def _graph(tmp_path: Path, text: str = GRAPH) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _draw(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, ["draw", *args])
    return res.exit_code, res.stdout, res.stderr


def test_log_highlights_its_current_stage(tmp_path: Path) -> None:
    graph, log = _graph(tmp_path), _log(tmp_path / "s.jsonl", "b")
    code, out, err = _draw(str(graph), "--log", str(log))
    assert code == 0, err
    assert "class s_b current" in out and "class s_a current" not in out
    code, dot, _ = _draw(str(graph), "--log", str(log), "--format", "dot")
    assert re.search(r'^  "b" \[label="b", fillcolor="#fde2c8"', dot, re.M)


def test_log_without_a_stage_record_highlights_the_initial_stage(tmp_path: Path) -> None:
    code, out, err = _draw(str(_graph(tmp_path)), "--log", str(_log(tmp_path / "s.jsonl", None)))
    assert code == 0, err
    assert "class s_a current" in out


def test_log_stage_not_in_the_graph_is_a_warning(tmp_path: Path) -> None:
    code, out, err = _draw(str(_graph(tmp_path)), "--log", str(_log(tmp_path / "s.jsonl", "ghost")))
    assert code == 0 and "current" not in out.split("[*]")[1]
    assert err.startswith("fsm-stage: warning: stage 'ghost' from the log is not a stage of")


def test_log_plan_mode_marks_the_plan_box_or_adds_a_marker(tmp_path: Path) -> None:
    with_box = _graph(tmp_path, GRAPH + PLAN)
    active = _log(tmp_path / "on.jsonl", "a", plan_active=True)
    code, out, err = _draw(str(with_box), "--log", str(active))
    assert code == 0, err
    assert "class pm_plan current" in out and "class pm_default current" not in out
    code, out, _ = _draw(str(with_box), "--log", str(_log(tmp_path / "off.jsonl", "a", plan_active=False)))
    assert "class pm_default current" in out and "class pm_plan current" not in out
    (tmp_path / "nobox").mkdir()
    code, out, _ = _draw(str(_graph(tmp_path / "nobox")), "--log", str(active))
    assert f'state "{PLAN_ACTIVE_LABEL}" as plan_mode_active' in out
    assert "class plan_mode_active current" in out
    code, dot, _ = _draw(str(_graph(tmp_path / "nobox")), "--log", str(active), "--format", "dot")
    assert f'"plan_mode.active" [label="{PLAN_ACTIVE_LABEL}", shape=note' in dot
    code, out, _ = _draw(str(_graph(tmp_path / "nobox")), "--log", str(_log(tmp_path / "n.jsonl", "a")))
    assert PLAN_ACTIVE_LABEL not in out


def test_log_from_standard_input_and_errors(tmp_path: Path) -> None:
    graph = _graph(tmp_path)
    res = CliRunner().invoke(main, ["draw", str(graph), "--log", "-"],
                             input=_log(tmp_path / "s.jsonl", "c").read_bytes())
    assert res.exit_code == 0, res.output
    assert "class s_c current" in res.stdout
    code, out, err = _draw(str(graph), "--log", str(tmp_path / "missing.jsonl"))
    assert code == 1 and out == ""
    assert err == f"fsm-stage: {tmp_path / 'missing.jsonl'}: cannot read session log: no such file\n"
    code, _, err = _draw(str(graph), "--log", str(tmp_path / "s.jsonl"), "--stage", "a")
    assert code == 2 and "--stage and --log" in err


def test_pending_transition_is_drawn_on_its_arrow_or_as_its_own() -> None:
    """The hook: a pending (source, target) gets the existing arrow labelled `pending` (and
    highlighted), or an extra dashed arrow when none is drawn (a user jump)."""
    mermaid = to_mermaid(BI, pending=("a", "b"))
    assert "s_a --> s_b: [ready] (pending)" in mermaid and "class s_b pending" in mermaid
    jump = to_mermaid(BI, pending=("c", "a"))
    assert "s_c --> s_a: pending" in jump
    dot = to_dot(BI, pending=("a", "b"))
    assert '"a" -> "b" [label="[ready] (pending)", decorate=true, color="#f08c00"' in dot
    assert '"c" -> "a" [label="pending", decorate=true, style=dashed' in to_dot(BI, pending=("c", "a"))
    assert to_mermaid(BI, pending=("a", "nope")) == to_mermaid(BI)
    assert session_marks.pending_transition([]) is None and session_marks.reviewed_transition([]) is None


def _stage_review_log(path: Path) -> Path:
    """A log whose stage review a -> b is open (asked, not answered)."""
    log = JsonlLog(_log(path, "a"))
    try:
        log.append_many([
            NewEvent(TOOL_CALL, {"callId": "c1", "name": "goto_stage", "arguments": '{"stage": "b"}'}),
            NewEvent(REVIEW_REQUEST, {"id": "r1", "callId": "c1", "kind": "stage", "from": "a", "target": "b",
                                      "options": ["Approve", "Keep current stage"], "shape": "light",
                                      "handoffPath": None, "payloadSha256": stage_payload_sha256("b", None),
                                      "turn": 1, "step": 1}, ignorable=True),
        ])
    finally:
        log.close()
    return path


def test_log_marks_an_open_review_then_the_approved_pending_transition(tmp_path: Path) -> None:
    graph, log = _graph(tmp_path), _stage_review_log(tmp_path / "s.jsonl")
    code, out, err = _draw(str(graph), "--log", str(log))
    assert code == 0, err
    assert "s_a --> s_b: [ready] (in review)" in out and "class s_b pending" in out and "(pending)" not in out
    code, dot, _ = _draw(str(graph), "--log", str(log), "--format", "dot")
    assert '"a" -> "b" [label="[ready] (in review)", decorate=true, color="#f08c00"' in dot
    assert CliRunner().invoke(main, ["review", str(log), "--approve", "r1"]).exit_code == 0
    code, out, err = _draw(str(graph), "--log", str(log))
    assert "s_a --> s_b: [ready] (pending)" in out and "in review" not in out, out
    assert session_marks.session_marks(str(log)).pending == ("a", "b")


def test_dot_gives_each_directed_edge_its_own_label() -> None:
    """a→b [ready] and b→a [redo]: two edge statements, each with its own label attached
    (decorate), never merged into one two-headed edge with labels between the arrows."""
    dot = to_dot(BI, PlanModeConfig(section="p"))
    assert '"a" -> "b" [label="[ready]", decorate=true];' in dot
    assert '"b" -> "a" [label="[redo]", decorate=true];' in dot
    assert "dir=both" not in dot and "concentrate" not in dot
    labelled = [line for line in dot.splitlines() if " -> " in line and "label=" in line]
    assert labelled and all("decorate=true" in line for line in labelled)


def test_size_hints_in_dot_and_mermaid(tmp_path: Path) -> None:
    assert SizeHints().dot_attrs() == [] and SizeHints().mermaid_comment() is None
    assert SizeHints(dpi=150).dot_attrs() == ["dpi=150"]
    assert SizeHints(scale=2).dot_attrs() == ["dpi=192"]
    assert SizeHints(width=960).dot_attrs() == ["dpi=96", 'size="10,1000!"']
    graph = _graph(tmp_path)
    code, dot, _ = _draw(str(graph), "--format", "dot", "--dpi", "120", "--width", "600")
    assert code == 0 and 'dpi=120, size="5,1000!"];' in dot.splitlines()[1]
    code, mermaid, _ = _draw(str(graph), "--width", "1200", "--scale", "2")
    assert code == 0 and "%% render size: mmdc -w 1200 -s 2" in mermaid.splitlines()
    code, _, err = _draw(str(graph), "--dpi", "100")
    assert code == 2 and "--dpi" in err
    assert _draw(str(graph), "--width", "0")[0] == 2


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not installed (apt install graphviz)")
def test_width_sets_the_png_width(tmp_path: Path) -> None:
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed")
    out = tmp_path / "g.png"
    code, _, err = _draw(str(_graph(tmp_path)), "-o", str(out), "--width", "640")
    assert code == 0, err
    assert struct.unpack(">II", out.read_bytes()[16:24])[0] == 640


def test_big_graphs_get_a_mermaid_size_note(tmp_path: Path) -> None:
    stages = "".join(
        f"  - {{name: s{i:02d}, instruction: x, targets: [s{(i + 1) % 60:02d}]}}\n" for i in range(60)
    )
    graph = _graph(tmp_path, "name: big\nsection: s\nstages:\n" + stages)
    code, _, err = _draw(str(graph))
    assert code == 0
    assert err.startswith("fsm-stage: note: 60 stages is large for Mermaid") and err.count("\n") == 1
    assert _draw(str(graph), "--format", "dot")[2] == ""
    assert size_notes("mermaid", BI) == []


def test_a_torn_log_on_stdin_is_named_stdin_not_the_spool_file(tmp_path: Path) -> None:
    data = _log(tmp_path / "s.jsonl", "b").read_bytes()[:-7]  # torn last line
    res = CliRunner().invoke(main, ["draw", str(_graph(tmp_path)), "--log", "-"], input=data)
    assert res.exit_code == 0, res.stderr
    assert "fsm-stage: warning: <stdin>: torn tail" in res.stderr
    assert ".spool" not in res.stderr and "<stdin>: <stdin>" not in res.stderr
    res = CliRunner().invoke(main, ["state", "-"], input=data)
    assert res.exit_code == 0, res.stderr
    assert "  - <stdin>: torn tail" in res.stdout and ".spool" not in res.stdout
    (tmp_path / "torn.jsonl").write_bytes(data)
    res = CliRunner().invoke(main, ["draw", str(_graph(tmp_path)), "--log", str(tmp_path / "torn.jsonl")])
    assert res.stderr.count(str(tmp_path / "torn.jsonl")) == 1  # named once, not twice


def test_a_log_of_another_graph_is_drawn_with_a_warning(tmp_path: Path) -> None:
    """The session records the fingerprint of the graph it runs (``fsm/graph``): drawing it on
    another graph warns that the highlight may not be that graph's; on its own graph, no warning."""
    from fsm_stage.config import load_config_text
    from fsm_stage.graph import fingerprint

    graph = _graph(tmp_path)
    own = load_config_text(GRAPH).graph
    assert own is not None
    cases = (("g", "sha256:" + fingerprint(own), False), ("other", "sha256:" + "0" * 64, True))
    for name, fp, warned in cases:
        log = _log(tmp_path / f"{name}.jsonl", "b")
        with JsonlLog(log, clock=lambda: 2) as opened:
            opened.append("fsm/graph", {"name": name, "fingerprint": fp}, ignorable=True)
        code, out, err = _draw(str(graph), "--log", str(log))
        assert code == 0 and "class s_b current" in out  # drawn either way
        assert ("runs another stage graph ('other', sha256:000" in err) is warned, err
        assert ("may not be this graph's" in err) is warned
