"""Issue 15 items 7 and 9: ``fsm-stage scenario`` (replay from a log) writes only command lines
``simulate`` accepts (a recorded command it cannot hold is left out with a warning); the
plugin form judges ``{{ x.y }}`` like ``{{ x }}``."""

from __future__ import annotations

import pytest

from fsm_stage.constants import COMMAND_RUN
from fsm_stage.log.events import Event
from fsm_stage.runtime.commands import parse_command
from fsm_stage.scenario import replay_events
from fsm_stage.scenario.model import Command


@pytest.mark.parametrize(("name", "args"), [("", " read-only"), ("two words", ""), ("a/b", " x")])
def test_a_recorded_command_simulate_would_refuse_is_left_out_with_a_warning(name: str, args: str) -> None:
    events = [
        Event(COMMAND_RUN, 0, 0, {"name": name, "args": args}, None, None, False),
        Event(COMMAND_RUN, 1, 0, {"name": "plan", "args": " Plan it"}, None, None, False),
    ]
    replay = replay_events(events)
    commands = [s for s in replay.steps if isinstance(s, Command)]
    assert [c.line for c in commands] == ["/plan Plan it"]
    assert all(parse_command(c.line) is not None for c in commands)
    assert any("left out" in w for w in replay.warnings)


# -- issue 15 item 9: `{{ x.y }}` in the plugin form is judged like `{{ x }}` ------------------

_PLUGIN = (
    "- id: stage-switch\n  config:\n    section: 'go {{ %s }} {{ stage_targets }}'\n"
    "    stages:\n      - name: a\n        instruction: x\n"
)


@pytest.mark.parametrize("expr", ["x", "x.y", "x[0]", "x . y"])
def test_plugin_form_unknown_variables_are_errors_with_attribute_access_too(expr: str) -> None:
    from fsm_stage.config import load_config_text
    from fsm_stage.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_config_text(_PLUGIN % expr)
    (line,) = info.value.problems
    assert line.startswith("<string>:3:14: [0].config.section: template uses unknown variable(s) x")
