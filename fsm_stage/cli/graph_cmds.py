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

from fsm_stage.config import ConfigFile, InvalidConfigError, Problem, load_config
from fsm_stage.schema import schema_text


def _summary(cfg: ConfigFile) -> str:
    """``PATH: ok (stage graph 'x' with 3 stages, plan mode)``."""
    parts = []
    if cfg.graph is not None:
        n = len(cfg.graph.stages)
        parts.append(f"stage graph {cfg.graph.name!r} with {n} stage{'s' if n != 1 else ''}")
    if cfg.plan_mode is not None:
        parts.append("plan mode")
    return f"{cfg.path}: ok ({', '.join(parts)})"


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
            click.echo(_summary(cfg), err=True)
    if as_json:
        click.echo(json.dumps([p.to_json() for p in problems], indent=2, ensure_ascii=False))
    if failed:
        sys.exit(1)


@click.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of stage-graph YAML files."""
    click.echo(schema_text(), nl=False)


COMMANDS = [validate, schema]
