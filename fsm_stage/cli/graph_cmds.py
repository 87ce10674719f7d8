"""``fsm-stage validate`` and ``fsm-stage schema`` (stage-graph files; issue: stage graphs).

``validate PATH... [--strict] [--json]`` loads every file with ``load_config`` and prints
every problem as one line ``PATH:LINE:COLUMN: KEY: message`` (errors and warnings) on stdout,
or with ``--json`` one JSON array of ``{path, line, column, key, message, severity}``.
Exit status: 0 every file valid, 1 some file invalid (or unreadable), 2 usage error (click).
A bad file never prints a traceback.

``schema`` prints the JSON Schema (draft 2020-12) of stage-graph files (``fsm_stage.schema``).
"""

from __future__ import annotations

import json
import sys

import click

from fsm_stage.config import InvalidConfigError, Problem, load_config
from fsm_stage.schema import schema_text


def _summary(path: str, cfg_graph: str | None, stages: int, plan_mode: bool) -> str:
    parts = []
    if cfg_graph is not None:
        parts.append(f"stage graph {cfg_graph!r} with {stages} stage{'s' if stages != 1 else ''}")
    if plan_mode:
        parts.append("plan mode")
    return f"{path}: ok ({', '.join(parts)})"


@click.command()
@click.argument("paths", nargs=-1, required=True, type=str)
@click.option("--strict", is_flag=True, help="Treat warnings (unreachable stages) as errors.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array of problems instead of lines.")
def validate(paths: tuple[str, ...], strict: bool, as_json: bool) -> None:
    """Check stage-graph YAML files (native or plugin-list form).

    Prints every problem as PATH:LINE:COLUMN: KEY: message. Exit 0 when every file is valid,
    1 when any is not.
    """
    problems: list[Problem] = []
    failed = False
    for path in paths:
        try:
            cfg = load_config(path, strict=strict)
        except InvalidConfigError as err:
            failed = True
            problems.extend(err.details)
            if not as_json:
                for line in err.problems:
                    click.echo(line)
            continue
        problems.extend(cfg.warning_details)
        if not as_json:
            for line in cfg.warnings:
                click.echo(line)
            graph = cfg.graph
            click.echo(
                _summary(
                    path,
                    graph.name if graph else None,
                    len(graph.stages) if graph else 0,
                    cfg.plan_mode is not None,
                ),
                err=True,
            )
    if as_json:
        click.echo(json.dumps([p.to_json() for p in problems], indent=2, ensure_ascii=False))
    if failed:
        sys.exit(1)


@click.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of stage-graph YAML files."""
    click.echo(schema_text(), nl=False)


COMMANDS = [validate, schema]
