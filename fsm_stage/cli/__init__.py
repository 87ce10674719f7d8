"""The ``fsm-stage`` command line (click). Each concept registers its commands from its own
module: ``graph_cmds`` (validate, draw, schema), ``log_cmds`` (state), ``sim_cmds``
(simulate, scenario). A ``UserError`` prints one line on stderr and exits 1; usage errors exit 2.
"""

from __future__ import annotations

import importlib
import sys

import click

from fsm_stage.errors import UserError

_COMMAND_MODULES = ("graph_cmds", "draw_cmds", "log_cmds", "sim_cmds")


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except UserError as err:
            click.echo(f"fsm-stage: {err}" if "\n" not in str(err) else str(err), err=True)
            sys.exit(1)


@click.group(cls=_Group)
@click.version_option(package_name="fsm_stage")
def main() -> None:
    """fsm-stage: explicit, durable, reviewable stages for LLM agents."""


for _name in _COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"fsm_stage.cli.{_name}")
    except ModuleNotFoundError as _err:  # module not written yet
        if _err.name != f"fsm_stage.cli.{_name}":
            raise
        continue
    for _cmd in getattr(_mod, "COMMANDS", ()):
        main.add_command(_cmd)
