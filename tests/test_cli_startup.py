"""``fsm-stage --help`` lists the commands from a static table (issue 17): no command module loads."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from fsm_stage.cli import COMMAND_HELP, COMMAND_MODULES, _LazyGroup, main


@pytest.mark.parametrize("name", list(COMMAND_MODULES))
def test_static_help_matches_the_command(name: str) -> None:
    command = _LazyGroup.get_command(main, click.Context(main), name)  # type: ignore[arg-type]
    assert command is not None
    ours = click.Command(name, help=COMMAND_HELP[name]).get_short_help_str(10_000)
    assert ours == command.get_short_help_str(10_000)


def test_help_imports_no_command_module() -> None:
    code = ("import sys\nfrom fsm_stage.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in sys.modules if m.startswith('fsm_stage.') and 'cmds' in m))\n"
            "print('jinja2' in sys.modules, 'transitions' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[-2:] == ["[]", "False False"], out
    assert "Commands:" in out and "simulate" in out
