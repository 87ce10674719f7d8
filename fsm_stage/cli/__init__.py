"""The ``fsm-stage`` command line (click).

Each concept keeps its commands in its own module (``graph_cmds``: validate, schema;
``draw_cmds``: draw; ``log_cmds``: state, repair; ``sim_cmds``: simulate, scenario), each exposing
``COMMANDS``. The group loads a module only when one of its commands runs, so
``fsm-stage validate`` never imports the simulator.

Every command follows one convention: exit 0 on success; exit 1 for invalid input, printed on
stderr without a traceback (a ``ConfigError`` as its positioned lines
``PATH:LINE:COLUMN: KEY: message``, any other ``UserError`` — and a ``LogWriteError`` caused
by the OS, e.g. a full disk — as ``fsm-stage: <message>``; control characters escaped); exit
2 only for click usage errors; exit 75 (``EX_TEMPFAIL``) for a transient failure, e.g. the
PostgreSQL server unreachable or restarting (a ``DatabaseError`` with ``transient`` set: retry
later); exit 130 on Ctrl-C. ``-h`` is ``--help``; an input argument ``-`` is standard input
(``fsm_stage.cli.inputs``); JSON output starts with ``"format_version": JSON_FORMAT_VERSION``.
docs/cli.md describes every command, flag and JSON key."""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import NoReturn

import click

from fsm_stage.errors import ConfigError, LogWriteError, UserError
from fsm_stage.text import visible

#: ``format_version`` of every JSON object the commands print; bumped on incompatible changes.
JSON_FORMAT_VERSION = 1
#: Exit status of a transient failure (the database is unreachable: retry later), sysexits' EX_TEMPFAIL.
EX_TEMPFAIL = 75
#: Exit status after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}

#: command name -> module under ``fsm_stage.cli`` that defines it (in ``--help`` order).
COMMAND_MODULES: dict[str, str] = {
    "simulate": "sim_cmds",
    "scenario": "sim_cmds",
    "validate": "graph_cmds",
    "schema": "graph_cmds",
    "draw": "draw_cmds",
    "state": "log_cmds",
    "repair": "log_cmds",
    "mcp": "mcp_cmds",
    "db": "db_cmds",
    "export": "db_cmds",
    "import": "db_cmds",
    "review": "review_cmds", "fork": "review_cmds",
    "trace": "trace_cmds",
    "inbox": "inbox_cmds",
    "worker": "fleet_cmds", "sessions": "fleet_cmds", "send": "fleet_cmds", "answer": "fleet_cmds",
}

#: command name -> its short help (the docstring's first sentence), so ``fsm-stage --help``
#: lists the commands without importing their modules (``tests/test_cli_inputs.py`` checks
#: every entry against the command's own ``get_short_help_str``).
COMMAND_HELP: dict[str, str] = {
    "simulate": "Run SCENARIO (or several) and show what the model sees at every request.",
    "scenario": "Turn a recorded session LOG into a scenario (stdout, or --output).",
    "validate": "Check stage-graph YAML files (native or plugin-list form).",
    "schema": "Print the JSON Schema (draft 2020-12) of stage-graph YAML files.",
    "draw": "Draw the stage graph (and plan mode) of GRAPH ('-': standard input).",
    "state": "Fold a session log and print its state (header, turn, plan mode, stage, surface).",
    "mcp": "Serve goto_stage / exit_plan_mode / get_stage with human review through the MCP client.",
    "db": "The PostgreSQL session store's database (schema set-up).",
    "export": "Write the session at LOCATION (postgresql://…?session=ID) to a JSONL file, byte for byte.",
    "import": "Store the JSONL session log FILE at LOCATION (postgresql://…[?session=ID]), byte for byte.",
    "repair": "Make LOG writable again after a damaged line, losing no intact line.",
    "review": "List the open reviews of LOG, or answer one (--approve / --keep / --dismiss ID).",
    "fork": "Fork LOG after event SEQ into NEW (open reviews and unused approvals are not inherited).",
    "trace": "Rebuild the session LOG as one trace (turns, steps, tool calls, reviews, transitions).",
    "inbox": "The review inbox: every open review of a store's sessions (a web page, a list, bulk approval).",
    "worker": "Run a fleet worker: drive the store's sessions as DBOS workflows until stopped.",
    "sessions": "List the sessions of STORE (folder or postgresql:// URL) and their state.",
    "send": "Record TEXT as a durable input of SESSION in STORE and wake its workflow.",
    "answer": "Answer REVIEW of SESSION in STORE and wake the session's workflow.",
}


def _interrupted() -> NoReturn:
    """Leave after Ctrl-C: a newline on stderr (the ``^C`` stays on its own line), exit 130."""
    with contextlib.suppress(Exception):  # stderr may be gone; the exit status still says it
        click.echo(err=True)
    sys.exit(EXIT_INTERRUPTED)


class _LazyGroup(click.Group):
    """A click group that imports a command's module on first use and turns ``UserError`` into exit 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMAND_MODULES)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` from ``COMMAND_HELP``: no command module is imported."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))  # as click.Group.format_commands
        rows = []
        for name in names:
            help_text = COMMAND_HELP.get(name)
            if help_text is None:  # a command missing from the table: ask the command itself
                command = self.get_command(ctx, name)
                rows.append((name, command.get_short_help_str(limit) if command is not None else ""))
            else:
                rows.append((name, click.Command(name, help=help_text).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(f"fsm_stage.cli.{module_name}")
        for command in getattr(module, "COMMANDS", ()):
            if command.name == cmd_name:
                return command  # type: ignore[no-any-return]
        raise LookupError(f"fsm_stage.cli.{module_name} does not define the {cmd_name!r} command")

    def main(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        """Run the command line; Ctrl-C anywhere (also while parsing) exits 130 quietly."""
        try:
            return super().main(*args, **kwargs)  # type: ignore[call-overload]
        except KeyboardInterrupt:
            _interrupted()

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()
        except ConfigError as err:
            for line in err.problems:
                click.echo(visible(line), err=True)
            sys.exit(1)
        except UserError as err:
            _print_error(str(err))
            sys.exit(EX_TEMPFAIL if getattr(err, "transient", False) else 1)
        except LogWriteError as err:
            if not _caused_by_os(err):
                raise  # e.g. an event that is not JSON: a bug, keep its traceback
            _print_error(str(err))
            sys.exit(1)


def _caused_by_os(err: BaseException) -> bool:
    """Whether ``err`` was caused (directly or down its chain) by an ``OSError``: a write the
    system refused (full disk, quota, read-only file system, I/O error)."""
    seen: set[int] = set()
    cause: BaseException | None = err.__cause__ or err.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _print_error(text: str) -> None:
    """Print a ``UserError`` message on stderr: one line ``fsm-stage: …`` (or its own lines when
    it has several), every control character shown as an escape (``text.visible``)."""
    lines = [visible(line) for line in text.split("\n")]
    click.echo(f"fsm-stage: {lines[0]}" if len(lines) == 1 else "\n".join(lines), err=True)


@click.group(cls=_LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="fsm_stage")
def main() -> None:
    """fsm-stage: explicit, durable, reviewable stages for LLM agents."""
