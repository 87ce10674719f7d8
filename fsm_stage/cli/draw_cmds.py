"""``fsm-stage draw``: draw a stage-graph file as Mermaid, DOT, SVG or PNG (fsm_stage.diagram).

GRAPH is read with ``fileio.read_text_input`` (missing, a directory, binary, not UTF-8: one line
``fsm-stage: PATH: cannot read stage graph: …``, exit 1); ``-o`` is written with
``fileio.atomic_write`` (umask permissions, never half-written) and a refusal of the OS becomes
one line ``fsm-stage: PATH: cannot write diagram: …``, exit 1 (also ``-o`` naming GRAPH itself,
whatever ``--format``). ``--stage NAME`` not in the file is exit 1 too (it depends on the file's
content). Usage mistakes exit 2 (click).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from fsm_stage.config import load_config_text
from fsm_stage.diagram import (
    EXPAND_ANY_MAX_STAGES,
    FORMATS,
    Format,
    render,
    size_warnings,
    to_dot,
    to_mermaid,
)
from fsm_stage.errors import UserError
from fsm_stage.fileio import atomic_write, output_error, read_text_input

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
@click.argument("graph", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
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
    "--expand-any/--any-node",
    "expand_any",
    default=None,
    help="Omitted targets: one arrow per other stage, or one arrow to an 'any other stage' node "
    f"(default: expand up to {EXPAND_ANY_MAX_STAGES} stages).",
)
def draw(
    graph: Path, output: Path | None, fmt: Format | None, current: str | None, expand_any: bool | None
) -> None:
    """Draw the stage graph (and plan mode) of GRAPH.

    Mermaid and DOT are written by fsm_stage itself; SVG and PNG need the Graphviz `dot`
    program and the graphviz Python package (pip install 'fsm_stage[diagrams]'). Diagrams too
    large for their renderer get a warning on stderr.
    """
    if output is not None and _same_file(output, graph):  # before the format: the suffix is .yaml
        raise UserError(f"{output}: cannot write diagram: it is the input stage graph")
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
    config = load_config_text(read_text_input(graph, what="stage graph"), str(graph))
    for warning in config.warnings:
        click.echo(f"fsm-stage: warning: {warning}", err=True)
    if current is not None and (config.graph is None or config.graph.stage(current) is None):
        # depends on the file's content, not on the command line: exit 1, not a usage error
        names = ", ".join(st.name for st in config.graph.stages) if config.graph is not None else ""
        raise UserError(f"--stage: {current!r} is not a stage of {graph}"
                        + (f" (its stages: {names})" if names else " (it has no stage graph)"))
    title = None if config.graph is not None else graph.stem  # plan mode only: name it after the file
    text = (to_mermaid if fmt == "mermaid" else to_dot)(
        config.graph, config.plan_mode, title=title, current=current, expand_any=expand_any
    )
    for warning in size_warnings(fmt, config.graph, text, expand_any=expand_any):
        click.echo(f"fsm-stage: warning: {warning}", err=True)
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
