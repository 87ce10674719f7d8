"""The simulator: run a scenario and record exactly what the model sees at every request.

``simulate(scenario)`` drives a scenario (``fsm_stage.scenario``) through the reference loop
with the graph's plan-mode and stage-switch controllers, a scripted model and a scripted review
channel, and returns a ``SimulationResult`` with one ``RequestRecord`` per model request.
``report`` holds the request views and the prefix / prompt-cache report, ``views`` and
``history`` the views one run's requests share, ``result`` the run's outcome types, ``engine``
the scenario driver, ``run`` ``simulate`` and its ``--log`` target, ``render`` the human view.
Import every public name from here.
"""

from __future__ import annotations

from fsm_stage.simulate.engine import GUIDANCE
from fsm_stage.simulate.render import render_human, render_request
from fsm_stage.simulate.report import (
    MessageView,
    PrefixReport,
    RequestRecord,
    SectionView,
    ToolView,
    message_view,
    prefix_report,
    section_views,
    tool_views,
)
from fsm_stage.simulate.result import Failure, Note, SimulationError, SimulationResult
from fsm_stage.simulate.run import LogTarget, prepare, simulate, simulate_async

simulate_scenario = simulate
"""``simulate`` under the name the top-level ``fsm_stage`` exports (there ``fsm_stage.simulate`` is
this package, so the function cannot keep its own name)."""

__all__ = [
    "GUIDANCE",
    "Failure",
    "LogTarget",
    "MessageView",
    "Note",
    "PrefixReport",
    "RequestRecord",
    "SectionView",
    "SimulationError",
    "SimulationResult",
    "ToolView",
    "message_view",
    "prefix_report",
    "prepare",
    "render_human",
    "render_request",
    "section_views",
    "simulate",
    "simulate_async",
    "simulate_scenario",
    "tool_views",
]
