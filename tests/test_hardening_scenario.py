"""Issue 15 item 7: ``fsm-stage scenario`` (replay from a log) writes only command lines
``simulate`` accepts; a recorded command it cannot hold is left out with a warning."""

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
