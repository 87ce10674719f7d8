"""``fsm-stage draw``: draw a stage-graph file as Mermaid, DOT, SVG or PNG (fsm_stage.diagram).

GRAPH is read with ``fileio.read_text_input`` (missing, a directory, binary, not UTF-8: one line
``fsm-stage: PATH: cannot read stage graph: …``, exit 1); ``-o`` is written with
``fileio.atomic_write`` (umask permissions, never half-written) and a refusal of the OS becomes
one line ``fsm-stage: PATH: cannot write diagram: …``, exit 1 (also ``-o`` naming GRAPH itself,
whatever ``--format``). ``--stage NAME`` not in the file is exit 1 too (it depends on the file's
content). Usage mistakes exit 2 (click). GRAPH ``-`` reads standard input.

``--log LOG`` folds a session log (``fsm_stage.cli.session_marks``) and highlights its current
stage (the graph's initial stage when the log has no stage record), a pending transition and
plan mode. ``--width PX``, ``--scale F`` and ``--dpi N`` size rendered output (DOT graph
attributes ``dpi``/``size``; a ``%% render size: mmdc -w/-s`` comment in Mermaid, which takes
no ``--dpi``). An ``-o`` folder that does not exist is refused before rendering.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from fsm_stage.cli.inputs import display_name, read_text_arg
from fsm_stage.cli.params import FiniteFloatRange
from fsm_stage.config import load_config_text
from fsm_stage.diagram import (
    EXPAND_ANY_MAX_STAGES,
    FORMATS,
    Format,
    SizeHints,
    render,
    size_notes,
    size_warnings,
    to_dot,
    to_mermaid,
)
from fsm_stage.errors import UserError
from fsm_stage.fileio import atomic_write, output_error
from fsm_stage.text import visible

_SUFFIXES: dict[str, Format] = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


@click.command()
@click.argument("graph", type=click.Path(allow_dash=True))
@click.option(
    "-o",
    "--output",
    "output_arg",
    type=click.Path(dir_okay=True),
    help="Write here instead of stdout; the suffix (.mmd .dot .gv .svg .png) picks the format.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="mermaid (default), dot, or svg/png rendered by Graphviz `dot`.",
)
@click.option("--stage", "current", metavar="NAME", help="Highlight this stage (e.g. a session's current).")
@click.option(
    "--log",
    "log",
    type=click.Path(allow_dash=True),
    default=None,
    help="Session log (a path, - or postgresql://…?session=ID): highlight its current stage, "
    "pending transition and plan mode (not with --stage).",
)
@click.option("--width", type=click.IntRange(min=1), metavar="PX", help="Render this many pixels wide.")
@click.option(
    "--scale", type=FiniteFloatRange(min=0, min_open=True), metavar="F", help="Render scale factor (e.g. 2)."
)
@click.option(
    "--dpi", type=click.IntRange(min=1), metavar="N", help="Resolution of DOT/SVG/PNG output (dot -Gdpi)."
)
@click.option(
    "--expand-any/--any-node",
    "expand_any",
    default=None,
    help="Omitted targets: one arrow per other stage, or one arrow to an 'any other stage' node "
    f"(default: expand up to {EXPAND_ANY_MAX_STAGES} stages).",
)
def draw(
    graph: str,
    output_arg: str | None,
    fmt: Format | None,
    current: str | None,
    log: str | None,
    expand_any: bool | None,
    width: int | None,
    scale: float | None,
    dpi: int | None,
) -> None:
    """Draw the stage graph (and plan mode) of GRAPH ('-': standard input).

    Mermaid and DOT are written by fsm_stage itself; SVG and PNG need the Graphviz `dot`
    program and the graphviz Python package (pip install 'fsm_stage[diagrams]'). Diagrams too
    large for their renderer get a warning on stderr. --log highlights a session's current
    stage, pending transition and plan mode.
    """
    if current is not None and log is not None:
        raise click.UsageError("--stage and --log both pick the highlighted stage; pass one")
    if graph == "-" and log == "-":
        raise click.UsageError("GRAPH and --log cannot both be '-' (standard input)")
    output = None if output_arg is None else Path(output_arg)
    # before the format: the suffix is .yaml
    if output is not None and graph != "-" and _same_file(output, Path(graph)):
        raise UserError(f"{output}: cannot write diagram: it is the input stage graph")
    # before the format too: a folder has no suffix to tell it (a trailing "/" names one)
    if output_arg is not None and (os.path.basename(output_arg) in ("", os.curdir, os.pardir)
                                   or Path(output_arg).is_dir()):
        raise output_error(output_arg, IsADirectoryError(), what="diagram")
    if fmt is None:
        if output is not None:
            fmt = _SUFFIXES.get(output.suffix.lower())
            if fmt is None:
                raise click.UsageError(
                    f"cannot tell the format from {output.name!r}; pass --format {'|'.join(FORMATS)}"
                )
        else:
            fmt = "mermaid"
    if fmt == "png" and output is None and sys.stdout.isatty():
        raise click.UsageError("PNG is binary: pass -o FILE.png (or redirect stdout)")
    if dpi is not None and fmt == "mermaid":
        raise click.UsageError("--dpi applies to dot, svg and png; Mermaid takes --width/--scale")
    if output is not None and not output.is_dir() and not output.parent.is_dir():
        # before the (possibly slow, possibly impossible) rendering
        raise output_error(output, FileNotFoundError(), what="diagram")
    name = display_name(graph)
    config = load_config_text(read_text_arg(graph, what="stage graph"), name)
    for warning in config.warnings:
        click.echo(f"fsm-stage: warning: {warning}", err=True)
    if current is not None and (config.graph is None or config.graph.stage(current) is None):
        # depends on the file's content, not on the command line: exit 1, not a usage error
        names = ", ".join(st.name for st in config.graph.stages) if config.graph is not None else ""
        raise UserError(f"--stage: {current!r} is not a stage of {name}"
                        + (f" (its stages: {names})" if names else " (it has no stage graph)"))
    plan_active: bool | None = None
    pending: tuple[str, str] | None = None
    reviewing: tuple[str, str] | None = None
    if log is not None:
        from fsm_stage.cli.session_marks import session_marks

        marks = session_marks(log)
        for warning in marks.warnings:
            click.echo(f"fsm-stage: warning: {warning}", err=True)  # it names the log
        plan_active, pending, reviewing = marks.plan_active, marks.pending, marks.reviewing
        if marks.graph is not None and config.graph is not None:
            from fsm_stage.graph import fingerprint

            if marks.graph[1] != "sha256:" + fingerprint(config.graph):
                click.echo(f"fsm-stage: warning: the session runs another stage graph "
                           f"({visible(marks.graph[0])!r}, {visible(marks.graph[1])[:30]}) than {name}: "
                           "the highlighted stage and transitions may not be this graph's", err=True)
        current = marks.stage if marks.stage is not None else (
            config.graph.initial_stage if config.graph is not None else None
        )
        if current is not None and config.graph is not None and config.graph.stage(current) is None:
            click.echo(f"fsm-stage: warning: stage {current!r} from the log is not a stage of {name}",
                       err=True)
    # plan mode only: name it after the file (standard input: the default "plan mode")
    title = None if config.graph is not None or graph == "-" else Path(graph).stem
    size = SizeHints(width=width, scale=scale, dpi=dpi)
    text = (to_mermaid if fmt == "mermaid" else to_dot)(
        config.graph,
        config.plan_mode,
        title=title,
        current=current,
        expand_any=expand_any,
        plan_active=plan_active,
        pending=pending,
        size=size,
        reviewing=reviewing,
    )
    for warning in size_warnings(fmt, config.graph, text, expand_any=expand_any):
        click.echo(f"fsm-stage: warning: {warning}", err=True)
    for note in size_notes(fmt, config.graph):
        click.echo(f"fsm-stage: note: {note}", err=True)
    data = render(text, fmt) if fmt in ("svg", "png") else text.encode()
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        try:
            atomic_write(output, data)
        except OSError as err:
            raise output_error(output, err, what="diagram") from None


COMMANDS = [draw]
