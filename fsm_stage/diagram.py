"""Diagrams of stage graphs: Mermaid and Graphviz DOT text, SVG/PNG through Graphviz.

``to_mermaid(graph, …)`` and ``to_dot(graph, …)`` draw a validated ``GraphConfig``: one node
per stage (the initial one marked; with its tool policy's count, ``3 tools``, when it has one,
and plan mode's ``plan`` state likewise), one arrow per model edge labelled with its guards,
omitted ``targets`` as one arrow per other stage up to ``EXPAND_ANY_MAX_STAGES`` stages and as one
arrow to an ``ANY_STAGE_LABEL`` node above (``expand_any`` forces either), and plan mode as a
two-state box. ``current``, ``pending=(source, target)`` and ``plan_active`` mark a session's
state. ``SizeHints`` become DOT ``dpi``/``size``, or a ``%%`` comment naming ``mmdc`` flags.

``render(dot_text, "svg" | "png")`` needs the ``graphviz`` package (extra
``fsm_stage[diagrams]``) and the ``dot`` program; a missing piece raises :class:`UserError`.
``size_warnings`` / ``size_notes`` flag diagrams too large for their renderer
(``MERMAID_MAX_TEXT``, ``DOT_SLOW_ARROWS``, ``MERMAID_MAX_STAGES``, ``MERMAID_MAX_EDGES``).
Rules and why: ``docs/diagram-decisions.md``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from fsm_stage.config import GraphConfig, PlanModeConfig
from fsm_stage.config.models import model_label
from fsm_stage.config.policy import tool_count_label
from fsm_stage.errors import UserError as UserError

__all__ = [
    "ANY_STAGE_LABEL",
    "DOT_SLOW_ARROWS",
    "EXPAND_ANY_MAX_STAGES",
    "FORMATS",
    "MERMAID_MAX_EDGES",
    "MERMAID_MAX_STAGES",
    "MERMAID_MAX_TEXT",
    "PLAN_ACTIVE_LABEL",
    "Format",
    "SizeHints",
    "UserError",
    "arrow_count",
    "mermaid_ids",
    "render",
    "size_notes",
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
_PENDING_STYLE_MERMAID: Final = "fill:#fff3bf,stroke:#f08c00,stroke-width:2px,stroke-dasharray:4 3"
_CURRENT_DOT: Final = 'fillcolor="#fde2c8", color="#d9480f", penwidth=2'
_PENDING_DOT: Final = 'color="#f08c00", fontcolor="#f08c00", penwidth=2'
PENDING_LABEL: Final = "pending"
#: Label of a transition an open review asks about (``fsm-stage draw --log``).
REVIEW_LABEL: Final = "in review"
#: Label of the marker drawn when the log says plan mode is active but the file has no plan box.
PLAN_ACTIVE_LABEL: Final = "plan mode: active"

#: Label of the node that stands for "every other stage" (omitted ``targets``) in large graphs.
ANY_STAGE_LABEL: Final = "any other stage"
#: Graphs with at most this many stages draw omitted targets edge by edge (no hub node).
EXPAND_ANY_MAX_STAGES: Final = 8
#: Mermaid's default ``maxTextSize``: longer diagram text renders as an error box.
MERMAID_MAX_TEXT: Final = 50_000
#: Above this many stages a Mermaid diagram is hard to read at its default size: a note.
MERMAID_MAX_STAGES: Final = 50
#: Mermaid's default ``maxEdges``: more arrows render as "Edge limit exceeded".
MERMAID_MAX_EDGES: Final = 500
#: Above this many arrows Graphviz ``dot`` takes from seconds to minutes; warn before rendering.
DOT_SLOW_ARROWS: Final = 300
_MERMAID_ANY_ID: Final = "any_other_stage"  # stage ids start with s_, plan mode's with pm_
_DOT_ANY_ID: Final = "__any_other"  # stage names start with a letter


@dataclass(frozen=True)
class SizeHints:
    """Render size of a diagram: ``width`` in pixels, ``scale`` (a factor) and ``dpi``.

    In DOT they become graph attributes: ``dpi`` (default 96, times ``scale``) and, with
    ``width``, ``size="W_INCHES,1000!"`` (the drawing is scaled to that width). Mermaid text
    only records them in a comment (``mmdc -w WIDTH -s SCALE`` renders at that size).
    """

    width: int | None = None
    scale: float | None = None
    dpi: int | None = None

    def dot_attrs(self) -> list[str]:
        """The DOT graph attributes (``dpi=…``, ``size=…``); empty when no hint is given."""
        if self.width is None and self.scale is None and self.dpi is None:
            return []
        dpi = (self.dpi or 96) * (self.scale or 1)
        attrs = [f"dpi={dpi:g}"]
        if self.width is not None:
            attrs.append(f'size="{self.width / dpi:.4g},1000!"')
        return attrs

    def mermaid_comment(self) -> str | None:
        """A ``%%`` comment naming the mermaid-cli flags for this size (None when no hint applies)."""
        flags = []
        if self.width is not None:
            flags.append(f"-w {self.width}")
        if self.scale is not None:
            flags.append(f"-s {self.scale:g}")
        return f"%% render size: mmdc {' '.join(flags)}" if flags else None


def _check_something(graph: GraphConfig | None, plan_mode: PlanModeConfig | None) -> None:
    if graph is None and plan_mode is None:
        raise UserError("nothing to draw: the file configures neither a stage graph nor plan mode")


def _title(graph: GraphConfig | None, title: str | None) -> str:
    if title is not None:
        return title
    return graph.name if graph is not None else PLAN_MODE_TITLE


def _stage_label(graph: GraphConfig, name: str, sep: str) -> str:
    """The stage's name, plus its tool policy's count when it has one (``explore · 3 tools``)
    and its model keys when it declares any (``design · thinker, high``)."""
    stage = graph.stage(name)
    count = tool_count_label(stage.tools if stage is not None else None, graph.tool_groups)
    model = model_label(stage) if stage is not None else None
    return sep.join(x for x in (name, count, model) if x is not None)


def _plan_label(plan_mode: PlanModeConfig, graph: GraphConfig | None, sep: str) -> str:
    """``plan``, plus plan mode's tool count when it has a policy (``plan · 3 tools``) and its
    model keys when it declares any."""
    count = tool_count_label(plan_mode.tools, graph.tool_groups if graph is not None else None)
    return sep.join(x for x in ("plan", count, model_label(plan_mode)) if x is not None)


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
    if fmt == "mermaid" and graph is not None:
        edges = arrow_count(graph, expand_any=expand_any)
        if edges > MERMAID_MAX_EDGES:
            out.append(
                f"{edges:,} arrows, over Mermaid's default maxEdges of {MERMAID_MAX_EDGES}: renderers show "
                '"Edge limit exceeded" unless given a larger maxEdges; --format svg draws it with Graphviz'
            )
    if fmt in ("svg", "png") and graph is not None:
        arrows = arrow_count(graph, expand_any=expand_any, hub_arrows=False)
        if arrows > DOT_SLOW_ARROWS:
            out.append(
                f"{len(graph.stages):,} stages and {arrows:,} arrows between them: Graphviz `dot` may "
                "take minutes to lay this out (--format dot or mermaid write the text at once)"
            )
    return out


def size_notes(fmt: Format, graph: GraphConfig | None) -> list[str]:
    """One-line notes about a diagram that renders but is hard to read at its renderer's
    default size: a Mermaid diagram of more than ``MERMAID_MAX_STAGES`` stages."""
    if fmt == "mermaid" and graph is not None and len(graph.stages) > MERMAID_MAX_STAGES:
        return [
            f"{len(graph.stages):,} stages is large for Mermaid's default size (about "
            f"{MERMAID_MAX_STAGES} fit): render with mmdc -w/-s (--width/--scale note it) or use --format svg"
        ]
    return []


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
    plan_active: bool | None = None,
    pending: tuple[str, str] | None = None,
    size: SizeHints | None = None,
    reviewing: tuple[str, str] | None = None,
) -> str:
    """Mermaid ``stateDiagram-v2`` text for ``graph`` (and plan mode when given).

    ``title`` defaults to the graph name; ``current`` highlights that stage; ``expand_any``
    draws omitted targets edge by edge (True) or through the ``any other stage`` node (False);
    None: edge by edge up to ``EXPAND_ANY_MAX_STAGES`` stages. ``plan_active`` (from a log)
    marks the current plan-mode state, ``pending`` an approved transition applied at the next
    step (its arrow labelled ``pending``, its target dashed), ``reviewing`` the transition an
    open review asks about (labelled ``in review``, drawn the same way) and ``size`` adds a
    render-size comment (module docstring). Returns text ending in a newline. Raises
    ``UserError`` when both ``graph`` and ``plan_mode`` are None.
    """
    _check_something(graph, plan_mode)
    lines = [
        "---",
        f"title: {json.dumps(_mermaid_text(_title(graph, title)), ensure_ascii=False)}",
        "---",
        "stateDiagram-v2",
        "  direction LR",
    ]
    highlighted: list[str] = []
    comment = size.mermaid_comment() if size is not None else None
    if comment is not None:
        lines.insert(4, comment)
    if graph is not None:
        ids = mermaid_ids(graph.stage_names)
        for name in graph.stage_names:
            lines.append(f'  state "{_mermaid_text(_stage_label(graph, name, " · "))}" as {ids[name]}')
        hub = _hub(graph, expand_any)
        if hub:
            lines.append(f'  state "{ANY_STAGE_LABEL}" as {_MERMAID_ANY_ID}')
        lines.append(f"  [*] --> {ids[graph.initial_stage]}")
        marks = _session_marks(graph, pending, reviewing)
        undrawn = dict(marks)
        for source, target, guards in _arrows(graph, hub):
            dest = _MERMAID_ANY_ID if target is None else ids[target]
            label = _guard_label(guards)
            if target is not None and (source, target) in marks:
                label = f"{label} ({undrawn.pop((source, target), marks[(source, target)])})".strip()
            label = _mermaid_text(label)
            lines.append(f"  {ids[source]} --> {dest}" + (f": {label}" if label else ""))
        for (source, target), mark in undrawn.items():
            lines.append(f"  {ids[source]} --> {ids[target]}: {mark}")
        if marks:
            lines.append(f"  classDef pending {_PENDING_STYLE_MERMAID}")
            lines.extend(f"  class {ids[target]} pending" for target in dict.fromkeys(t for _, t in marks))
        if hub:
            lines.append(f"  classDef anystage {_ANY_STYLE_MERMAID}")
            lines.append(f"  class {_MERMAID_ANY_ID} anystage")
        if current is not None and current in ids:
            highlighted.append(ids[current])
    if plan_mode is not None:
        lines.append(f'  state "{PLAN_MODE_TITLE}" as plan_mode {{')
        lines.append('    state "default" as pm_default')
        lines.append(f'    state "{_mermaid_text(_plan_label(plan_mode, graph, " · "))}" as pm_plan')
        lines.append("    [*] --> pm_default")
        for source, dest, label in _PLAN_EDGES:
            lines.append(f"    pm_{source} --> pm_{dest}: {_mermaid_text(label)}")
        lines.append("  }")
        if plan_active is not None:
            highlighted.append("pm_plan" if plan_active else "pm_default")
    elif plan_active:
        lines.append(f'  state "{PLAN_ACTIVE_LABEL}" as plan_mode_active')
        highlighted.append("plan_mode_active")
    if highlighted:
        lines.append(f"  classDef current {_CURRENT_STYLE_MERMAID}")
        lines.extend(f"  class {node} current" for node in highlighted)
    return "\n".join(lines) + "\n"


def _session_marks(graph: GraphConfig, pending: tuple[str, str] | None,
                   reviewing: tuple[str, str] | None) -> dict[tuple[str, str], str]:
    """``(source, target)`` -> label of the transitions a session marks (``pending``, ``in
    review``), keeping those whose ends are both stages of ``graph`` (else nothing to draw)."""
    out: dict[tuple[str, str], str] = {}
    for edge, label in ((pending, PENDING_LABEL), (reviewing, REVIEW_LABEL)):
        if edge is not None and graph.stage(edge[0]) is not None and graph.stage(edge[1]) is not None:
            out[edge] = f"{out[edge]}, {label}" if edge in out else label
    return out


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
    plan_active: bool | None = None,
    pending: tuple[str, str] | None = None,
    size: SizeHints | None = None,
    reviewing: tuple[str, str] | None = None,
) -> str:
    """Graphviz DOT text (a ``digraph``, left to right) for ``graph`` and optional plan mode.

    Node ids are the quoted stage names; a point node ``__start`` marks the initial stage;
    stage descriptions become tooltips; omitted targets as in :func:`to_mermaid` (the hub node
    is ``__any_other``, dashed); every labelled edge is its own statement with
    ``decorate=true``. ``current``, ``plan_active``, ``pending``, ``reviewing`` and ``size`` as in
    :func:`to_mermaid` (``size`` as graph attributes). Raises ``UserError`` when there is
    nothing to draw.
    """
    _check_something(graph, plan_mode)
    q = _dot_string
    name = _title(graph, title)
    sized = "".join(f", {a}" for a in size.dot_attrs()) if size is not None else ""
    lines = [
        f"digraph {q(name)} {{",
        f'  graph [rankdir=LR, label={q(name)}, labelloc=t, fontname="Helvetica"{sized}];',
        '  node [shape=box, style="rounded,filled", fillcolor="#f8f9fa", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    if graph is not None:
        lines.append('  "__start" [shape=point, width=0.15, label=""];')
        for stage in graph.stages:
            attrs = [f"label={q(_stage_label(graph, stage.name, chr(10)))}"]
            if stage.description:
                attrs.append(f"tooltip={q(stage.description)}")
            if stage.name == current:
                attrs.append(_CURRENT_DOT)
            lines.append(f"  {q(stage.name)} [{', '.join(attrs)}];")
        hub = _hub(graph, expand_any)
        if hub:
            style = 'style="rounded,dashed", fillcolor="#ffffff"'
            lines.append(f'  "{_DOT_ANY_ID}" [label={q(ANY_STAGE_LABEL)}, {style}];')
        lines.append(f'  "__start" -> {q(graph.initial_stage)};')
        marks = _session_marks(graph, pending, reviewing)
        undrawn = dict(marks)
        for source, target, guards in _arrows(graph, hub):
            if target is None:
                lines.append(f'  {q(source)} -> "{_DOT_ANY_ID}" [style=dashed];')
                continue
            label = _guard_label(guards)
            extra = ""
            if (source, target) in marks:
                mark = undrawn.pop((source, target), marks[(source, target)])
                label, extra = f"{label} ({mark})".strip(), f", {_PENDING_DOT}"
            suffix = f" [label={q(label)}, decorate=true{extra}]" if label else ""
            lines.append(f"  {q(source)} -> {q(target)}{suffix};")
        for (source, target), mark in undrawn.items():
            style = f"label={q(mark)}, decorate=true, style=dashed, {_PENDING_DOT}"
            lines.append(f"  {q(source)} -> {q(target)} [{style}];")
    if plan_mode is not None:
        lines.append('  subgraph "cluster_plan_mode" {')
        lines.append(f'    label={q(PLAN_MODE_TITLE)}; style="rounded,dashed";')
        lines.append('    "plan_mode.__start" [shape=point, width=0.15, label=""];')
        active = {"default": plan_active is False, "plan": plan_active is True}
        for state_name in ("default", "plan"):
            mark = f", {_CURRENT_DOT}" if active[state_name] else ""
            label = _plan_label(plan_mode, graph, chr(10)) if state_name == "plan" else state_name
            lines.append(f'    "plan_mode.{state_name}" [label={_dot_string(label)}{mark}];')
        lines.append('    "plan_mode.__start" -> "plan_mode.default";')
        for source, dest, label in _PLAN_EDGES:
            lines.append(f'    "plan_mode.{source}" -> "plan_mode.{dest}" [label={q(label)}, decorate=true];')
        lines.append("  }")
    elif plan_active:
        lines.append(f'  "plan_mode.active" [label={q(PLAN_ACTIVE_LABEL)}, shape=note, {_CURRENT_DOT}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- rendering


def render(dot_text: str, fmt: Literal["svg", "png"]) -> bytes:
    """Render DOT text to SVG or PNG bytes with the Graphviz ``dot`` program.

    Raises ``UserError`` with a one-line install hint when the ``graphviz`` Python package
    or the ``dot`` executable is missing, or when ``dot`` fails.
    """
    try:
        import graphviz
    except ImportError:
        raise UserError(
            f"rendering {fmt.upper()} needs the graphviz Python package: pip install 'fsm_stage[diagrams]'"
        ) from None
    try:
        data: bytes = graphviz.Source(dot_text).pipe(format=fmt, engine="dot")
    except graphviz.ExecutableNotFound:
        raise UserError(
            f"rendering {fmt.upper()} needs the Graphviz `dot` program on PATH "
            "(e.g. apt-get install graphviz, brew install graphviz); "
            "--format mermaid and --format dot work without it"
        ) from None
    except graphviz.CalledProcessError as err:
        raw = err.stderr
        stderr = (raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")).strip()
        first = stderr.splitlines()[0] if stderr else f"exit status {err.returncode}"
        raise UserError(f"Graphviz `dot` failed: {first}") from None
    return data
