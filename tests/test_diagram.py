"""Diagrams (fsm_stage.diagram) and ``fsm-stage draw``, checked with the real renderers
(Graphviz ``dot``; mermaid-cli on Debian's chromium) where they are installed."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fsm_stage.cli import main
from fsm_stage.config import EdgeConfig, GraphConfig, PlanModeConfig, StageConfig, load_config
from fsm_stage.diagram import (
    ANY_STAGE_LABEL,
    DOT_SLOW_ARROWS,
    EXPAND_ANY_MAX_STAGES,
    MERMAID_MAX_TEXT,
    UserError,
    arrow_count,
    mermaid_ids,
    render,
    to_dot,
    to_mermaid,
)

REPO = Path(__file__).resolve().parents[1]
FEATURE_WORK = REPO / "stage_graphs" / "feature-work.yaml"

AWKWARD = GraphConfig(
    name="awkward; names",
    section="s",
    initial="collect-data",
    stages=(
        StageConfig("collect_data", "x", (EdgeConfig("collect-data"),)),
        StageConfig("collect-data", "x", (EdgeConfig("state", ("has_plan", "odd;guard")),)),
        StageConfig("state", "x", (EdgeConfig("end"),)),
        StageConfig("end", "x", None),
    ),
)
PLAN = PlanModeConfig(section="Plan first.")


# --------------------------------------------------------------------------- renderers


def _mmdc() -> tuple[str, str] | None:
    local = [REPO / base / "node_modules" / ".bin" / "mmdc" for base in (".ci/mermaid", ".")]
    found = [p for p in local if p.exists()]
    mmdc = str(found[0]) if found else shutil.which("mmdc")
    candidates = ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
    chromium = next((p for p in candidates if p), None)
    if mmdc is None or chromium is None or not Path(chromium).exists():
        return None
    return mmdc, chromium


def render_mermaid(text: str, tmp_path: Path) -> str:
    """Render Mermaid text to SVG with mermaid-cli; skip (visibly) when it is not installed."""
    found = _mmdc()
    if found is None:
        pytest.skip(
            "mermaid-cli or chromium not installed "
            "(PUPPETEER_SKIP_DOWNLOAD=1 npm i @mermaid-js/mermaid-cli; apt install chromium)"
        )
    mmdc, chromium = found
    config = tmp_path / "puppeteer.json"
    config.write_text(json.dumps({"executablePath": chromium, "args": ["--no-sandbox"]}))
    source, out = tmp_path / "diagram.mmd", tmp_path / "diagram.svg"
    source.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [mmdc, "-p", str(config), "-i", str(source), "-o", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out.read_text(encoding="utf-8")


HAS_GRAPHVIZ_PACKAGE = importlib.util.find_spec("graphviz") is not None
#: Renders with Graphviz: needs the `dot` program and the graphviz Python package.
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None or not HAS_GRAPHVIZ_PACKAGE,
    reason="Graphviz `dot` or the graphviz Python package not installed "
    "(apt install graphviz; pip install 'fsm_stage[diagrams]')",
)
#: Checks the missing-`dot` message, which only the graphviz Python package can give.
needs_graphviz_package = pytest.mark.skipif(
    not HAS_GRAPHVIZ_PACKAGE,
    reason="the graphviz Python package is not installed (pip install 'fsm_stage[diagrams]')",
)


# --------------------------------------------------------------------------- Mermaid text


def test_mermaid_ids_are_sanitised_unique_and_keyword_free() -> None:
    ids = mermaid_ids(("collect_data", "collect-data", "state", "end", "collect_data_2"))
    assert ids == {
        "collect_data": "s_collect_data",
        "collect-data": "s_collect_data_2",
        "state": "s_state",
        "end": "s_end",
        "collect_data_2": "s_collect_data_2_2",
    }
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", i) for i in ids.values())


def test_mermaid_text_has_title_labels_initial_guards() -> None:
    text = to_mermaid(AWKWARD)
    ids = mermaid_ids(AWKWARD.stage_names)
    assert text.startswith('---\ntitle: "awkward, names"\n---\nstateDiagram-v2\n')
    for name in AWKWARD.stage_names:
        assert f'state "{name}" as {ids[name]}' in text
    assert f"[*] --> {ids['collect-data']}\n" in text
    assert f"{ids['collect-data']} --> {ids['state']}: [has_plan, odd,guard]\n" in text
    assert f"{ids['collect_data']} --> {ids['collect-data']}\n" in text
    # targets omitted on "end": an edge to every other stage
    assert sum(line.startswith(f"  {ids['end']} -->") for line in text.splitlines()) == 3
    assert ";" not in text.split("---\n", 2)[2]  # `;` would split a Mermaid label


def test_mermaid_plan_mode_and_current_stage() -> None:
    text = to_mermaid(AWKWARD, PLAN, current="state")
    assert 'state "plan mode" as plan_mode {' in text
    assert "pm_plan --> pm_default: exit_plan [approved]" in text
    assert "class s_state current" in text
    plan_only = to_mermaid(None, PLAN, title="seed-plan-mode")
    assert "title: \"seed-plan-mode\"" in plan_only and "s_" not in plan_only


def test_nothing_to_draw_is_a_user_error() -> None:
    with pytest.raises(UserError):
        to_mermaid(None)
    with pytest.raises(UserError):
        to_dot(None, None)


def test_mermaid_renders_with_mermaid_cli(tmp_path: Path) -> None:
    """Names with `-` and `_`, keyword-like names, `;` in a guard, plan mode and a highlighted
    stage all parse and render; the SVG carries the real names and the title."""
    svg = render_mermaid(to_mermaid(AWKWARD, PLAN, current="collect-data"), tmp_path)
    for label in ("collect-data", "collect_data", "state", "end", "plan mode", "awkward, names", "has_plan"):
        assert label in svg, label


def test_feature_work_example_renders_with_mermaid_cli(tmp_path: Path) -> None:
    """Done-when check: `fsm-stage draw stage_graphs/feature-work.yaml` prints Mermaid that
    mermaid-cli renders."""
    result = CliRunner().invoke(main, ["draw", str(FEATURE_WORK)])
    assert result.exit_code == 0, result.output
    svg = render_mermaid(result.stdout, tmp_path)
    config = load_config(FEATURE_WORK)
    assert config.graph is not None
    for name in config.graph.stage_names:
        assert name in svg


# --------------------------------------------------------------------------- large graphs


def all_to_all(n: int, **explicit: tuple[EdgeConfig, ...]) -> GraphConfig:
    """``n`` stages ``s000``… with ``targets`` omitted (every other stage), except ``explicit``."""
    names = [f"s{i:03d}" for i in range(n)]
    return GraphConfig(
        name=f"all-{n}", section="s", stages=tuple(StageConfig(x, "x", explicit.get(x)) for x in names)
    )


def _arrows(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "-->" in line or " -> " in line]


def test_omitted_targets_in_a_large_graph_draw_one_arrow_to_an_any_stage_hub() -> None:
    """A 1,000-stage graph with omitted targets is 999,000 model edges: drawn one by one that is
    an unusable diagram (and minutes of work). Above EXPAND_ANY_MAX_STAGES stages each
    omitted-targets stage gets one dashed arrow to a single `any other stage` node; explicit
    targets are still drawn edge by edge, with their guards."""
    config = all_to_all(1000, s001=(EdgeConfig("s002", ("ready",)), EdgeConfig("s000")), s002=())
    assert len(config.stages) > EXPAND_ANY_MAX_STAGES
    ids = mermaid_ids(config.stage_names)
    text = to_mermaid(config)
    arrows = _arrows(text)
    assert f'state "{ANY_STAGE_LABEL}" as any_other_stage' in text
    assert f"[*] --> {ids['s000']}" in arrows
    assert f"{ids['s001']} --> {ids['s002']}: [ready]" in arrows
    assert f"{ids['s001']} --> {ids['s000']}" in arrows
    into_hub = [a for a in arrows if a.endswith("--> any_other_stage")]
    assert len(into_hub) == 998  # every stage but the explicit s001 and s002
    assert len(arrows) == 1 + 2 + 998
    assert f"{ids['s002']} --> any_other_stage" not in arrows
    dot = to_dot(config)
    dot_arrows = _arrows(dot)
    assert sum(a.startswith('"s') and '-> "__any_other"' in a for a in dot_arrows) == 998
    assert '"s001" -> "s002" [label="[ready]", decorate=true];' in dot_arrows
    assert len(dot_arrows) == 1 + 2 + 998
    assert f'"__any_other" [label="{ANY_STAGE_LABEL}"' in dot


def test_small_graphs_draw_omitted_targets_edge_by_edge_unless_asked() -> None:
    """Up to EXPAND_ANY_MAX_STAGES stages every omitted-targets edge is its own arrow (no hub);
    ``expand_any`` forces either way."""
    small = all_to_all(EXPAND_ANY_MAX_STAGES)
    n = EXPAND_ANY_MAX_STAGES
    assert "any_other_stage" not in to_mermaid(small)
    assert len(_arrows(to_mermaid(small))) == 1 + n * (n - 1)
    assert len(_arrows(to_dot(small))) == 1 + n * (n - 1)
    hub = to_mermaid(small, expand_any=False)
    assert len(_arrows(hub)) == 1 + n and "any_other_stage" in hub
    big = all_to_all(n + 1)
    assert len(_arrows(to_mermaid(big))) == 1 + (n + 1)
    assert len(_arrows(to_dot(big, expand_any=True))) == 1 + (n + 1) * n


def test_arrow_count_matches_what_is_drawn() -> None:
    for config, expand in ((all_to_all(30, s004=(EdgeConfig("s005"),)), None), (all_to_all(5), None),
                           (all_to_all(12), True), (AWKWARD, False)):
        arrows = _arrows(to_mermaid(config, expand_any=expand))[1:]  # minus [*] -->
        assert arrow_count(config, expand_any=expand) == len(arrows)
        between = [a for a in arrows if not a.endswith(" any_other_stage")]
        assert arrow_count(config, expand_any=expand, hub_arrows=False) == len(between)


def test_any_stage_hub_renders_with_mermaid_cli(tmp_path: Path) -> None:
    svg = render_mermaid(to_mermaid(all_to_all(12, s003=(EdgeConfig("s004", ("ready",)),)), PLAN), tmp_path)
    for label in (ANY_STAGE_LABEL, "s000", "s011", "[ready]", "plan mode"):
        assert label in svg, label


@needs_dot
def test_any_stage_hub_renders_with_dot() -> None:
    dot = to_dot(all_to_all(12, s003=(EdgeConfig("s004", ("ready",)),)))
    svg = html.unescape(render(dot, "svg").decode())
    for label in (ANY_STAGE_LABEL, "s000", "s011", "[ready]"):
        assert f">{label}</text>" in svg, label


def _ring_yaml(stages: int, fanout: int) -> str:
    lines = ["name: ring", "section: s", "stages:"]
    for i in range(stages):
        lines += [f"  - name: s{i:04d}", "    instruction: x", "    targets:"]
        lines += [f"      - s{(i + k) % stages:04d}" for k in range(1, fanout + 1)]
    return "\n".join(lines) + "\n"


def test_cli_draw_warns_when_mermaid_would_refuse_the_text(tmp_path: Path) -> None:
    """Mermaid renders at most maxTextSize (50,000) characters and maxEdges (500) arrows by
    default and otherwise shows only an error: `draw` says so on stderr (exit 0, the text is
    still written), plus a note that 1,000 stages is large for Mermaid's default size; a small
    graph draws without warnings."""
    path = tmp_path / "ring.yaml"
    path.write_text(_ring_yaml(1000, 5))
    result = CliRunner().invoke(main, ["draw", str(path)])
    assert result.exit_code == 0, result.output
    assert len(result.stdout) > MERMAID_MAX_TEXT
    text_size, edges, note = result.stderr.strip().splitlines()
    assert text_size.startswith("fsm-stage: warning: ") and edges.startswith("fsm-stage: warning: ")
    assert "maxTextSize" in text_size and f"{len(result.stdout):,}" in text_size
    assert "maxEdges of 500" in edges and "5,000 arrows" in edges
    assert note.startswith("fsm-stage: note: 1,000 stages is large for Mermaid")
    quiet = CliRunner().invoke(main, ["draw", str(FEATURE_WORK)])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_cli_draw_warns_before_a_slow_graphviz_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graphviz `dot` needs minutes for a thousand arrows (200 stages x 5: ~100 s): before
    rendering SVG/PNG of more than DOT_SLOW_ARROWS arrows, `draw` warns (and still renders)."""
    import fsm_stage.cli.draw_cmds as draw_cmds

    path = tmp_path / "ring.yaml"
    path.write_text(_ring_yaml(100, 5))
    rendered: list[str] = []
    monkeypatch.setattr(draw_cmds, "render", lambda dot, fmt: rendered.append(fmt) or b"<svg/>")
    result = CliRunner().invoke(main, ["draw", str(path), "-o", str(tmp_path / "ring.svg")])
    assert result.exit_code == 0, result.output
    assert rendered == ["svg"] and (tmp_path / "ring.svg").read_bytes() == b"<svg/>"
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("fsm-stage: warning: ")
    assert "100 stages and 500 arrows between them" in warnings[0]
    assert DOT_SLOW_ARROWS < 500
    # arrows into the `any other stage` node form a star that dot lays out at once: no warning
    big = tmp_path / "big.yaml"
    stages = "".join(f"  - {{name: s{i}, instruction: x}}\n" for i in range(1000))
    big.write_text("section: s\nstages:\n" + stages)
    star = CliRunner().invoke(main, ["draw", str(big), "-o", str(tmp_path / "big.svg")])
    assert star.exit_code == 0 and star.stderr == "" and rendered == ["svg", "svg"]
    as_text = CliRunner().invoke(main, ["draw", str(path), "--format", "dot"])
    assert as_text.exit_code == 0 and as_text.stderr == ""  # DOT text itself is instant


# --------------------------------------------------------------------------- DOT


def test_dot_text_quotes_names_and_labels_guards() -> None:
    dot = to_dot(AWKWARD, PLAN, current="end")
    assert dot.startswith('digraph "awkward; names" {')
    assert '"collect-data" -> "state" [label="[has_plan, odd;guard]", decorate=true];' in dot
    assert '"__start" -> "collect-data";' in dot
    assert 'subgraph "cluster_plan_mode"' in dot
    assert re.search(r'"end" \[label="end", fillcolor=', dot)


def test_dot_escapes_quotes_and_backslashes() -> None:
    config = GraphConfig(name='say "hi" \\ there', section="s", stages=(StageConfig("a", "x"),))
    assert 'digraph "say \\"hi\\" \\\\ there" {' in to_dot(config)


@needs_dot
def test_dot_renders_svg_with_stage_names() -> None:
    svg = html.unescape(render(to_dot(AWKWARD, PLAN), "svg").decode())  # dot writes `-` as &#45;
    assert "<svg" in svg and "Generated by graphviz" in svg
    for name in AWKWARD.stage_names:
        assert f">{name}</text>" in svg
    assert render(to_dot(AWKWARD), "png").startswith(b"\x89PNG")


@needs_dot
def test_dot_failure_is_one_line_user_error() -> None:
    with pytest.raises(UserError, match="dot` failed"):
        render("digraph {", "svg")


@needs_graphviz_package
def test_missing_dot_binary_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(UserError) as info:
        render(to_dot(AWKWARD), "svg")
    assert "`dot` program" in str(info.value) and "apt-get install graphviz" in str(info.value)


def test_missing_graphviz_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(UserError, match=r"graphviz Python package: pip install 'fsm_stage\[diagrams\]'"):
        render(to_dot(AWKWARD), "svg")


# --------------------------------------------------------------------------- CLI

AWKWARD_YAML = """\
name: awkward
section: "Stage << stage_current >>"
initial: collect-data
stages:
  - name: collect_data
    instruction: x
    targets: [collect-data]
  - name: collect-data
    instruction: x
    targets:
      - to: write-up
        guards: [has_data]
  - name: write-up
    instruction: x
plan_mode:
  section: Plan first.
"""


def test_cli_draw_defaults_to_mermaid_on_stdout(tmp_path: Path) -> None:
    path = tmp_path / "awkward.yaml"
    path.write_text(AWKWARD_YAML)
    result = CliRunner().invoke(main, ["draw", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == to_mermaid(load_config(path).graph, load_config(path).plan_mode)


@needs_dot
def test_cli_draw_svg_is_produced_by_dot(tmp_path: Path) -> None:
    """Done-when check: `--format svg` writes an SVG that `dot` produced (format from -o too)."""
    path = tmp_path / "awkward.yaml"
    path.write_text(AWKWARD_YAML)
    out = tmp_path / "out.svg"
    result = CliRunner().invoke(main, ["draw", str(path), "-o", str(out), "--format", "svg"])
    assert result.exit_code == 0, result.output
    svg = html.unescape(out.read_text())
    assert "Generated by graphviz" in svg
    for name in ("collect_data", "collect-data", "write-up", "[has_data]"):
        assert name in svg
    png = tmp_path / "out.png"
    assert CliRunner().invoke(main, ["draw", str(path), "-o", str(png)]).exit_code == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    dot = tmp_path / "out.gv"
    assert CliRunner().invoke(main, ["draw", str(path), "-o", str(dot)]).exit_code == 0
    assert dot.read_text().startswith('digraph "awkward"')


@needs_graphviz_package
def test_cli_draw_without_dot_fails_in_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")
    out = tmp_path / "out.svg"
    result = CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "-o", str(out)])
    assert result.exit_code == 1
    assert "`dot` program" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_draw_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    unknown_suffix = runner.invoke(main, ["draw", str(FEATURE_WORK), "-o", str(tmp_path / "x.txt")])
    assert unknown_suffix.exit_code == 2 and "--format" in unknown_suffix.stderr
    bad_format = runner.invoke(main, ["draw", str(FEATURE_WORK), "--format", "gif"])
    assert bad_format.exit_code == 2


def test_cli_draw_unknown_stage_depends_on_the_file_exit_1() -> None:
    """Whether `--stage NAME` exists depends on the file's content,
    so it is a one-line `fsm-stage: …` error with exit 1, not a usage error (exit 2)."""
    line = _one_error_line(CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "--stage", "nope"]),
                           "'nope' is not a stage of")
    assert str(FEATURE_WORK) in line and "implement" in line  # names the stages there are


def test_cli_draw_invalid_graph_is_a_positioned_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nsection: s\nstages:\n  - name: Bad\n    instruction: x\n")
    result = CliRunner().invoke(main, ["draw", str(path)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert re.search(r"bad\.yaml:4:\d+: ", result.stderr)
    assert result.stdout == ""


def test_cli_draw_highlights_a_stage() -> None:
    result = CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "--stage", "implement"])
    assert result.exit_code == 0 and "class s_implement current" in result.stdout


# --------------------------------------------------------------------------- CLI: files


def _one_error_line(result: Result, fragment: str) -> str:
    """The single `fsm-stage: …` stderr line of a failed command (exit 1, no traceback)."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an uncaught error
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fsm-stage: ") and fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


def test_cli_draw_into_a_missing_folder_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-o nodir/x.svg` is one line, not a FileNotFoundError traceback from mkstemp. The folder
    is checked before rendering, so no renderer is needed (and none is run)."""
    from fsm_stage.cli import draw_cmds

    def no_render(dot: str, fmt: str) -> bytes:
        raise AssertionError("rendered before checking the output folder")

    monkeypatch.setattr(draw_cmds, "render", no_render)
    for name in ("x.svg", "x.mmd", "x.dot"):
        out = tmp_path / "nodir" / name
        line = _one_error_line(CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "-o", str(out)]),
                               "cannot write diagram")
        assert f"folder {out.parent} does not exist" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux /sys (not writable, even as root)")
def test_cli_draw_into_an_unwritable_folder_is_one_line() -> None:
    """`-o /sys/x.svg` is one line, not a PermissionError traceback from mkstemp."""
    line = _one_error_line(CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "-o", "/sys/x.mmd"]),
                           "/sys/x.mmd: cannot write diagram")
    assert "mkstemp" not in line
    assert not Path("/sys/x.mmd").exists()


def test_cli_draw_onto_a_directory_is_one_line_and_leaves_it_alone(tmp_path: Path) -> None:
    """`-o` naming an existing directory: exit 1 (not a click usage error), the folder untouched."""
    folder = tmp_path / "out.mmd"
    folder.mkdir()
    result = CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "-o", str(folder)])
    _one_error_line(result, "it is a directory")
    plain = tmp_path / "adir"
    plain.mkdir()
    _one_error_line(
        CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "--format", "dot", "-o", str(plain)]),
        "it is a directory",
    )
    assert list(folder.iterdir()) == [] and list(plain.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "out.mmd"]


@pytest.mark.parametrize("given", ["adir", "adir/", ".", "new.mmd/", "adir/."])
def test_cli_draw_to_a_folder_without_a_suffix_or_with_a_trailing_slash_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    """A folder has no suffix to tell a format from, and a trailing "/" names a folder even
    when none exists: each is "it is a directory" (exit 1), not a usage error about the format
    nor a file written under the name without its slash."""
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    _one_error_line(CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "-o", given]),
                    "cannot write diagram: it is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"] and not any((tmp_path / "adir").iterdir())


def test_cli_draw_refuses_to_overwrite_its_own_graph(tmp_path: Path) -> None:
    """`-o` naming GRAPH itself: refused, the graph file unchanged."""
    path = tmp_path / "g.yaml"
    path.write_text(AWKWARD_YAML)
    result = CliRunner().invoke(main, ["draw", str(path), "--format", "mermaid", "-o", str(path)])
    _one_error_line(result, "is the input stage graph")
    assert path.read_text() == AWKWARD_YAML
    # the same without --format (the .yaml suffix names no format)
    result = CliRunner().invoke(main, ["draw", str(path), "-o", str(path)])
    assert _one_error_line(result, "cannot write diagram: it is the input stage graph").startswith(
        f"fsm-stage: {path}: ")
    assert path.read_text() == AWKWARD_YAML


def test_cli_draw_writes_files_with_umask_permissions(tmp_path: Path) -> None:
    """`-o` files follow the umask like any other file (not mkstemp's 0600)."""
    old = os.umask(0o022)
    try:
        result = CliRunner().invoke(main, ["draw", str(FEATURE_WORK), "-o", str(tmp_path / "g.mmd")])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g.mmd").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "g.mmd").read_text() == to_mermaid(
        load_config(FEATURE_WORK).graph, load_config(FEATURE_WORK).plan_mode
    )
    assert [p.name for p in tmp_path.iterdir()] == ["g.mmd"]


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: None, "cannot read stage graph: no such file"),
        (lambda p: p.mkdir(), "cannot read stage graph: it is a directory"),
        (lambda p: p.write_bytes(b"name: g\x00\x01\x02\xff"), "cannot read stage graph: it is a binary file"),
        (lambda p: p.write_bytes(b"name: caf\xe9\n"), "cannot read stage graph: not UTF-8 text"),
    ],
    ids=["missing", "directory", "binary", "latin-1"],
)
def test_cli_draw_unreadable_graph_is_one_line_exit_1(
    tmp_path: Path, make: Callable[[Path], object], fragment: str
) -> None:
    """A GRAPH that is missing, a directory or not text: `fsm-stage: PATH: cannot read …`, exit 1
    (the same shape as every other command's unreadable input; click usage errors stay exit 2)."""
    path = tmp_path / "graph.yaml"
    make(path)
    result = CliRunner().invoke(main, ["draw", str(path), "-o", str(tmp_path / "o.mmd")])
    line = _one_error_line(result, fragment)
    assert line.startswith(f"fsm-stage: {path}: ")
    assert not (tmp_path / "o.mmd").exists()



def test_cli_draw_marks_config_warnings_as_warnings(tmp_path: Path) -> None:
    """A warning (unreachable stage) printed bare looks like an error;
    `draw` prefixes it `fsm-stage: warning:` and keeps its position (exit 0, diagram written)."""
    path = tmp_path / "unreachable.yaml"
    path.write_text(
        "section: s\nstages:\n  - {name: a, instruction: x, targets: []}\n  - {name: b, instruction: y}\n"
    )
    result = CliRunner().invoke(main, ["draw", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"fsm-stage: warning: {path}:4:") and 'stage "b" is unreachable' in lines[0]
    assert result.stdout.startswith("---\ntitle:")
