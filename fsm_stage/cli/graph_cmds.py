"""``fsm-stage validate`` and ``fsm-stage schema``: check stage-graph files, print their schema.

``validate PATH... [--strict] [--json]`` reads each file (``-`` is standard input) with
``fileio.read_text_input`` and loads it with ``load_config_text``. Text output: each problem
as one line ``PATH:LINE:COLUMN: [warning: ]KEY: message`` on stdout and ``PATH: ok (…)`` on
stderr per valid file; an unreadable file is one ``fsm-stage: PATH: cannot read stage graph:
reason`` line and the other files are still checked. ``--json`` prints ``{"format_version",
"ok", "problems": [{path, line, column, key, message, severity}]}``. Exit 0 when every file is
valid (warnings allowed unless ``--strict``), 1 otherwise, 2 for usage errors.

``schema`` prints the JSON Schema (draft 2020-12) of stage-graph files (``fsm_stage.schema``).
See docs/cli.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from fsm_stage.cli import JSON_FORMAT_VERSION
from fsm_stage.cli.inputs import display_name, read_text_arg
from fsm_stage.config import ConfigError, ConfigFile, Problem, load_config_text
from fsm_stage.fileio import InputFileError
from fsm_stage.schema import schema_text
from fsm_stage.text import visible


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _summary(cfg: ConfigFile) -> str:
    """``PATH: ok (stage graph 'x' with 3 stages, plan mode; 1 warning)``."""
    parts = []
    if cfg.graph is not None:
        parts.append(f"stage graph {cfg.graph.name!r} with {_plural(len(cfg.graph.stages), 'stage')}")
    if cfg.plan_mode is not None:
        parts.append("plan mode")
    warned = f"; {_plural(len(cfg.warning_details), 'warning')}" if cfg.warning_details else ""
    return f"{cfg.path}: ok ({', '.join(parts)}{warned})"


def warning_line(problem: Problem) -> str:
    """A warning as ``PATH:LINE:COLUMN: warning: KEY: message``."""
    p = problem
    return visible(f"{p.path}:{p.line}:{p.column}: warning: {p.key}: {p.message}")


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(allow_dash=True))
@click.option("--strict", is_flag=True, help="Treat warnings (unreachable stages, ...) as errors.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object {format_version, ok, problems} instead of lines.",
)
@click.option(
    "--tools",
    "tool_names",
    multiple=True,
    metavar="NAMES",
    help="The host's tool catalog (comma-separated, repeatable): tool names of `tools` policies "
    "it lacks are errors instead of warnings.",
)
def validate(paths: tuple[str, ...], strict: bool, as_json: bool, tool_names: tuple[str, ...]) -> None:
    """Check stage-graph YAML files (native or plugin-list form).

    Prints every error as PATH:LINE:COLUMN: KEY: message and every warning as
    PATH:LINE:COLUMN: warning: KEY: message. PATH '-' reads standard input. Exit 0 when
    every file is valid, 1 when any is invalid or cannot be read, 2 for a usage error.
    """
    problems: list[Problem] = []
    failed = False
    catalog = [n.strip() for v in tool_names for n in v.split(",") if n.strip()] if tool_names else None
    for arg in paths:
        path = display_name(arg)
        try:
            text = read_text_arg(arg, what="stage graph")
        except InputFileError as err:
            failed = True
            message = str(err).removeprefix(f"{Path(path)}: ")
            problems.append(Problem(path, 1, 1, "(file)", message))
            if not as_json:
                click.echo(f"fsm-stage: {err}", err=True)
            continue
        try:
            cfg = load_config_text(text, path, strict=strict, tools=catalog)
        except ConfigError as err:
            positioned = [p for p in err.details if isinstance(p, Problem)]
            if len(positioned) != len(err.details):
                raise  # not a positioned problem of the file: the CLI's one-line error
            failed = True
            problems.extend(positioned)
            if not as_json:
                for line in err.problems:
                    click.echo(line)
            continue
        problems.extend(cfg.warning_details)
        if not as_json:
            for warning in cfg.warning_details:
                click.echo(warning_line(warning))
            click.echo(_summary(cfg), err=True)
    if as_json:
        report = {
            "format_version": JSON_FORMAT_VERSION,
            "ok": not failed,
            "problems": [p.to_json() for p in problems],
        }
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    if failed:
        sys.exit(1)


@click.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of stage-graph YAML files."""
    click.echo(schema_text(), nl=False)


COMMANDS = [validate, schema]
