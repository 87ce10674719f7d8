"""Many sessions on many workers (extra ``[fleet]``): the session log stays the truth, DBOS
durable workflows schedule, lease, wake and recover (docs/fleet.md).

``drive`` takes one session to its next wait point; ``Store`` names where logs (and the DBOS
database) live; ``fsm_stage.fleet.inputs.record_input`` (a durable input: what a drive answers)
and ``fsm_stage.fleet.listing.list_sessions`` work without DBOS; ``fsm_stage.fleet.workflows``
(imported on first use, needs ``dbos``) runs sessions as DBOS workflows, ``fsm_stage.fleet.worker``
is the ``fsm-stage worker`` process.
"""

from __future__ import annotations

from fsm_stage.fleet.drive import WAIT_POINTS, DriveResult, drive
from fsm_stage.fleet.fence import FencedLog
from fsm_stage.fleet.records import INPUT_KINDS, STATES, session_state
from fsm_stage.fleet.store import Store, check_session_id
from fsm_stage.fleet.tools import HostTool, host_tool, idempotency_key

__all__ = [
    "INPUT_KINDS",
    "STATES",
    "WAIT_POINTS",
    "DriveResult",
    "FencedLog",
    "HostTool",
    "Store",
    "check_session_id",
    "drive",
    "host_tool",
    "idempotency_key",
    "session_state",
]
