"""Diagrams of stage graphs: Mermaid and Graphviz DOT text emitted by us, SVG/PNG through Graphviz.

The diagram is drawn from the validated config (the same data ``compile_graph`` uses), never
from the runtime machine (DESIGN.md §5). What is drawn:

* one node per stage, labelled with its real name; the initial stage is marked
  (Mermaid ``[*] -->``, DOT a start point);
* one arrow per model edge (``targets``), labelled with its eligibility guards
  ``[guard, …]`` when it has any. Every model edge also needs the user's review approval, and
  the user may jump to any stage with ``/stage``: neither is drawn;
* omitted ``targets`` (every other stage, no guards): in a graph of at most
  ``EXPAND_ANY_MAX_STAGES`` stages, one arrow per other stage; in a larger one, a single dashed
  arrow to one ``any other stage`` node (``ANY_STAGE_LABEL``), so a 1,000-stage graph draws
  1,000 arrows, not 999,000 (``expand_any`` forces either way);
* plan mode, when the file configures it, as a separate two-state box (``default`` / ``plan``);
* optionally the ``current`` stage, highlighted.

Mermaid (``stateDiagram-v2``) is written by hand because ``transitions``' own Mermaid output
breaks on stage names with ``-``, drops the title and splits labels at ``;``
(notes/transitions-notes.md §1.15). Ids are sanitised (``s_`` + name with ``-`` → ``_``, made
unique), real names are the labels, and the title goes in YAML front matter.

SVG / PNG need the ``graphviz`` Python package (extra ``fsm_stage[diagrams]``) and the
Graphviz ``dot`` program; a missing piece raises :class:`DiagramError` naming it.

Size limits of the renderers (:func:`size_warnings`): Mermaid renders at most
``MERMAID_MAX_TEXT`` (its default ``maxTextSize``, 50,000) characters and otherwise shows only
"Maximum text size in diagram exceeded"; Graphviz ``dot`` layout time grows steeply with
arrows between stages (measured on rings of 5 targets per stage: 250 arrows 0.5 s, 500 arrows
8 s, 1,000 arrows 106 s), so more than ``DOT_SLOW_ARROWS`` of them get a warning before
rendering.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Final, Literal

from fsm_stage.config import GraphConfig, PlanModeConfig
from fsm_stage.errors import UserError

__all__ = [
    "ANY_STAGE_LABEL",
    "DOT_SLOW_ARROWS",
    "EXPAND_ANY_MAX_STAGES",
    "FORMATS",
    "MERMAID_MAX_TEXT",
    "DiagramError",
    "Format",
    "arrow_count",
    "mermaid_ids",
    "render",
    "size_warnings",
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
_ANY_STYLE_MERMAID: Final = "fill:#ffffff,stroke:#868e96,stroke-dasharray:5 5"

#: Label of the node that stands for "every other stage" (omitted ``targets``) in large graphs.
ANY_STAGE_LABEL: Final = "any other stage"
#: Graphs with at most this many stages draw omitted targets edge by edge (no hub node).
EXPAND_ANY_MAX_STAGES: Final = 8
#: Mermaid's default ``maxTextSize``: longer diagram text renders as an error box.
MERMAID_MAX_TEXT: Final = 50_000
#: Above this many arrows Graphviz ``dot`` takes from seconds to minutes; warn before rendering.
DOT_SLOW_ARROWS: Final = 300
_MERMAID_ANY_ID: Final = "any_other_stage"  # stage ids start with s_, plan mode's with pm_
_DOT_ANY_ID: Final = "__any_other"  # stage names start with a letter


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


def _hub(graph: GraphConfig, expand_any: bool | None) -> bool:
    """Whether omitted targets are drawn through the single ``any other stage`` node."""
    if not any(s.targets is None for s in graph.stages):
        return False
    return len(graph.stages) > EXPAND_ANY_MAX_STAGES if expand_any is None else not expand_any


def _arrows(graph: GraphConfig, hub: bool) -> Iterator[tuple[str, str | None, tuple[str, ...]]]:
    """``(source, target, guards)`` per drawn arrow, in configured order; target None is the
    ``any other stage`` node. O(stages + explicit edges) with the hub."""
    for stage in graph.stages:
        if stage.targets is None and hub:
            yield stage.name, None, ()
        else:
            for edge in graph.edges_from(stage.name):
                yield stage.name, edge.target, edge.guards


def arrow_count(graph: GraphConfig, *, expand_any: bool | None = None, hub_arrows: bool = True) -> int:
    """How many model-edge arrows ``to_mermaid``/``to_dot`` draw for ``graph`` (the initial
    marker and plan mode not counted; ``hub_arrows=False`` leaves out the arrows into the
    ``any other stage`` node). O(stages)."""
    hub = _hub(graph, expand_any)
    n = len(graph.stages)
    return sum(
        (int(hub_arrows) if hub else n - 1) if s.targets is None else len(s.targets) for s in graph.stages
    )


def size_warnings(
    fmt: Format, graph: GraphConfig | None, text: str, *, expand_any: bool | None = None
) -> list[str]:
    """One-line warnings about a diagram too large for its renderer (empty when fine).

    ``text`` is the Mermaid or DOT text about to be written or rendered. Mermaid: more than
    ``MERMAID_MAX_TEXT`` characters. SVG/PNG: more than ``DOT_SLOW_ARROWS`` stage-to-stage
    arrows for Graphviz ``dot`` to lay out (arrows into the ``any other stage`` node form a
    star, which ``dot`` lays out at once: 1,000 of them take 0.3 s). DOT text has no limit.
    """
    out: list[str] = []
    if fmt == "mermaid" and len(text) > MERMAID_MAX_TEXT:
        out.append(
            f"the Mermaid text is {len(text):,} characters, over Mermaid's default maxTextSize of "
            f"{MERMAID_MAX_TEXT:,}: renderers show \"Maximum text size in diagram exceeded\" unless "
            "given a larger maxTextSize (mmdc -c config.json, mermaid.initialize); "
            "--format svg draws it with Graphviz"
        )
    if fmt in ("svg", "png") and graph is not None:
        arrows = arrow_count(graph, expand_any=expand_any, hub_arrows=False)
        if arrows > DOT_SLOW_ARROWS:
            out.append(
                f"{len(graph.stages):,} stages and {arrows:,} arrows between them: Graphviz `dot` may "
                "take minutes to lay this out (--format dot or mermaid write the text at once)"
            )
    return out


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
    expand_any: bool | None = None,
) -> str:
    """Mermaid ``stateDiagram-v2`` text for ``graph`` (and plan mode when given).

    ``title`` defaults to the graph name; ``current`` highlights that stage; ``expand_any``
    draws omitted targets edge by edge (True) or through the ``any other stage`` node (False);
    None: edge by edge up to ``EXPAND_ANY_MAX_STAGES`` stages. Returns text ending in a
    newline. Raises ``DiagramError`` when both ``graph`` and ``plan_mode`` are None.
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
        hub = _hub(graph, expand_any)
        if hub:
            lines.append(f'  state "{ANY_STAGE_LABEL}" as {_MERMAID_ANY_ID}')
        lines.append(f"  [*] --> {ids[graph.initial_stage]}")
        for source, target, guards in _arrows(graph, hub):
            dest = _MERMAID_ANY_ID if target is None else ids[target]
            label = _mermaid_text(_guard_label(guards))
            lines.append(f"  {ids[source]} --> {dest}" + (f": {label}" if label else ""))
        if hub:
            lines.append(f"  classDef anystage {_ANY_STYLE_MERMAID}")
            lines.append(f"  class {_MERMAID_ANY_ID} anystage")
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
    expand_any: bool | None = None,
) -> str:
    """Graphviz DOT text (a ``digraph``, left to right) for ``graph`` and optional plan mode.

    Node ids are the quoted stage names; a point node ``__start`` marks the initial stage;
    stage descriptions become tooltips; omitted targets as in :func:`to_mermaid` (the hub node
    is ``__any_other``, dashed). Raises ``DiagramError`` when there is nothing to draw.
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
        hub = _hub(graph, expand_any)
        if hub:
            style = 'style="rounded,dashed", fillcolor="#ffffff"'
            lines.append(f'  "{_DOT_ANY_ID}" [label={q(ANY_STAGE_LABEL)}, {style}];')
        lines.append(f'  "__start" -> {q(graph.initial_stage)};')
        for source, target, guards in _arrows(graph, hub):
            if target is None:
                lines.append(f'  {q(source)} -> "{_DOT_ANY_ID}" [style=dashed];')
                continue
            label = _guard_label(guards)
            suffix = f" [label={q(label)}]" if label else ""
            lines.append(f"  {q(source)} -> {q(target)}{suffix};")
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
