"""Diagrams of stage graphs: Mermaid and Graphviz DOT text emitted by us, SVG/PNG through Graphviz.

The diagram is drawn from the validated config (the same data ``compile_graph`` uses), never
from the runtime machine (DESIGN.md §5). What is drawn:

* one node per stage, labelled with its real name; the initial stage is marked
  (Mermaid ``[*] -->``, DOT a start point);
* one arrow per model edge (``targets``; omitted targets = every other stage), labelled with
  its eligibility guards ``[guard, …]`` when it has any. Every model edge also needs the
  user's review approval, and the user may jump to any stage with ``/stage``: neither is drawn;
* plan mode, when the file configures it, as a separate two-state box (``default`` / ``plan``);
* optionally the ``current`` stage, highlighted.

Mermaid (``stateDiagram-v2``) is written by hand because ``transitions``' own Mermaid output
breaks on stage names with ``-``, drops the title and splits labels at ``;``
(notes/transitions-notes.md §1.15). Ids are sanitised (``s_`` + name with ``-`` → ``_``, made
unique), real names are the labels, and the title goes in YAML front matter.

SVG / PNG need the ``graphviz`` Python package (extra ``fsm_stage[diagrams]``) and the
Graphviz ``dot`` program; a missing piece raises :class:`DiagramError` naming it.
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal

from fsm_stage.config import GraphConfig, PlanModeConfig
from fsm_stage.errors import UserError

__all__ = [
    "FORMATS",
    "DiagramError",
    "Format",
    "mermaid_ids",
    "render",
    "to_dot",
    "to_mermaid",
]

Format = Literal["mermaid", "dot", "svg", "png"]
FORMATS: Final[tuple[Format, ...]] = ("mermaid", "dot", "svg", "png")

PLAN_MODE_TITLE: Final = "plan mode"
_PLAN_EDGES: Final = (
    ("default", "plan", "enter_plan (/plan)"),
    ("plan", "default", "exit_plan [approved]"),
    ("plan", "default", "leave_plan (/plan off)"),
)
_CURRENT_STYLE_MERMAID: Final = "fill:#fde2c8,stroke:#d9480f,stroke-width:2px"


class DiagramError(UserError):
    """A diagram cannot be produced: nothing to draw, or a renderer piece is missing."""


def _check_something(graph: GraphConfig | None, plan_mode: PlanModeConfig | None) -> None:
    if graph is None and plan_mode is None:
        raise DiagramError("nothing to draw: the file configures neither a stage graph nor plan mode")


def _title(graph: GraphConfig | None, title: str | None) -> str:
    if title is not None:
        return title
    return graph.name if graph is not None else PLAN_MODE_TITLE


def _guard_label(guards: tuple[str, ...]) -> str:
    return "[" + ", ".join(guards) + "]" if guards else ""


# --------------------------------------------------------------------------- Mermaid


def mermaid_ids(names: tuple[str, ...]) -> dict[str, str]:
    """Map each stage name to a Mermaid-safe, unique state id (``s_`` + name, ``-`` → ``_``).

    The ``s_`` prefix keeps ids clear of Mermaid keywords (``state``, ``note``, ``end``…);
    names that sanitise to the same id get ``_2``, ``_3``… suffixes, in configured order.
    """
    ids: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        candidate, n = base, 1
        while candidate in used:
            n += 1
            candidate = f"{base}_{n}"
        used.add(candidate)
        ids[name] = candidate
    return ids


def _mermaid_text(text: str) -> str:
    """Make free text safe inside a Mermaid label: ``;`` would split it, quotes end it."""
    return re.sub(r"\s+", " ", text).replace(";", ",").replace('"', "'").strip()


def to_mermaid(
    graph: GraphConfig | None,
    plan_mode: PlanModeConfig | None = None,
    *,
    title: str | None = None,
    current: str | None = None,
) -> str:
    """Mermaid ``stateDiagram-v2`` text for ``graph`` (and plan mode when given).

    ``title`` defaults to the graph name; ``current`` highlights that stage. Returns text ending
    in a newline. Raises ``DiagramError`` when both ``graph`` and ``plan_mode`` are None.
    """
    _check_something(graph, plan_mode)
    lines = [
        "---",
        f"title: {json.dumps(_mermaid_text(_title(graph, title)), ensure_ascii=False)}",
        "---",
        "stateDiagram-v2",
        "  direction LR",
    ]
    if graph is not None:
        ids = mermaid_ids(graph.stage_names)
        for name in graph.stage_names:
            lines.append(f'  state "{_mermaid_text(name)}" as {ids[name]}')
        lines.append(f"  [*] --> {ids[graph.initial_stage]}")
        for name in graph.stage_names:
            for edge in graph.edges_from(name):
                label = _mermaid_text(_guard_label(edge.guards))
                lines.append(f"  {ids[name]} --> {ids[edge.target]}" + (f": {label}" if label else ""))
        if current is not None and current in ids:
            lines.append(f"  classDef current {_CURRENT_STYLE_MERMAID}")
            lines.append(f"  class {ids[current]} current")
    if plan_mode is not None:
        lines.append(f'  state "{PLAN_MODE_TITLE}" as plan_mode {{')
        lines.append('    state "default" as pm_default')
        lines.append('    state "plan" as pm_plan')
        lines.append("    [*] --> pm_default")
        for source, dest, label in _PLAN_EDGES:
            lines.append(f"    pm_{source} --> pm_{dest}: {_mermaid_text(label)}")
        lines.append("  }")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- DOT


def _dot_string(text: str) -> str:
    """A double-quoted DOT string (escapes backslash, quote and newline)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(
    graph: GraphConfig | None,
    plan_mode: PlanModeConfig | None = None,
    *,
    title: str | None = None,
    current: str | None = None,
) -> str:
    """Graphviz DOT text (a ``digraph``, left to right) for ``graph`` and optional plan mode.

    Node ids are the quoted stage names; a point node ``__start`` marks the initial stage;
    stage descriptions become tooltips. Raises ``DiagramError`` when there is nothing to draw.
    """
    _check_something(graph, plan_mode)
    q = _dot_string
    name = _title(graph, title)
    lines = [
        f"digraph {q(name)} {{",
        f'  graph [rankdir=LR, label={q(name)}, labelloc=t, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#f8f9fa", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    if graph is not None:
        lines.append('  "__start" [shape=point, width=0.15, label=""];')
        for stage in graph.stages:
            attrs = [f"label={q(stage.name)}"]
            if stage.description:
                attrs.append(f"tooltip={q(stage.description)}")
            if stage.name == current:
                attrs.append('fillcolor="#fde2c8", color="#d9480f", penwidth=2')
            lines.append(f"  {q(stage.name)} [{', '.join(attrs)}];")
        lines.append(f'  "__start" -> {q(graph.initial_stage)};')
        for stage_name in graph.stage_names:
            for edge in graph.edges_from(stage_name):
                label = _guard_label(edge.guards)
                suffix = f" [label={q(label)}]" if label else ""
                lines.append(f"  {q(stage_name)} -> {q(edge.target)}{suffix};")
    if plan_mode is not None:
        lines.append('  subgraph "cluster_plan_mode" {')
        lines.append(f'    label={q(PLAN_MODE_TITLE)}; style="rounded,dashed";')
        lines.append('    "plan_mode.__start" [shape=point, width=0.15, label=""];')
        lines.append('    "plan_mode.default" [label="default"];')
        lines.append('    "plan_mode.plan" [label="plan"];')
        lines.append('    "plan_mode.__start" -> "plan_mode.default";')
        for source, dest, label in _PLAN_EDGES:
            lines.append(f'    "plan_mode.{source}" -> "plan_mode.{dest}" [label={q(label)}];')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- rendering


def render(dot_text: str, fmt: Literal["svg", "png"]) -> bytes:
    """Render DOT text to SVG or PNG bytes with the Graphviz ``dot`` program.

    Raises ``DiagramError`` with a one-line install hint when the ``graphviz`` Python package
    or the ``dot`` executable is missing, or when ``dot`` fails.
    """
    try:
        import graphviz
    except ImportError:
        raise DiagramError(
            f"rendering {fmt.upper()} needs the graphviz Python package: pip install 'fsm_stage[diagrams]'"
        ) from None
    try:
        data: bytes = graphviz.Source(dot_text).pipe(format=fmt, engine="dot")
    except graphviz.ExecutableNotFound:
        raise DiagramError(
            f"rendering {fmt.upper()} needs the Graphviz `dot` program on PATH "
            "(e.g. apt-get install graphviz, brew install graphviz); "
            "--format mermaid and --format dot work without it"
        ) from None
    except graphviz.CalledProcessError as err:
        raw = err.stderr
        stderr = (raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")).strip()
        first = stderr.splitlines()[0] if stderr else f"exit status {err.returncode}"
        raise DiagramError(f"Graphviz `dot` failed: {first}") from None
    return data
