"""What a simulation run produces: ``SimulationResult`` with its ``Failure`` and ``Note`` entries,
and ``SimulationError`` (the scenario cannot be run as written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from fsm_stage.errors import SimulationError as SimulationError
from fsm_stage.log.events import EventLog
from fsm_stage.simulate.report import RequestRecord

# --- running a scenario -----------------------------------------------------------------------------


@attrs.frozen
class Failure:
    """An expectation that did not hold: where (scenario position), what, expected, actual."""

    where: str
    check: str
    expected: str
    actual: str

    def line(self) -> str:
        """``FILE:LINE:COL: expect CHECK: expected X, got Y`` (one line)."""
        return f"{self.where}: expect {self.check}: expected {self.expected}, got {self.actual}"


@attrs.frozen
class Note:
    """Something the scenario did between requests, shown in the human view.

    ``kind``: ``user`` | ``command`` | ``tool`` | ``review`` | ``eligible`` | ``turn`` | ``expect`` |
    ``warning``;
    ``text``: one readable line (or a few); ``after``: requests recorded before it.
    """

    kind: str
    text: str
    after: int


@attrs.frozen
class SimulationResult:
    """What ``simulate`` produced: the per-request ``records``, the ``notes`` timeline, the
    expectation ``failures`` (empty = every ``expect:`` held), the ``graph`` path used and the
    session ``log`` (an ``EventLog``: ``MemoryLog`` or the ``--log`` ``JsonlLog``), the number of
    ``checks`` made, the ``scenario`` path and ``warnings``: one line per scenario entry that had
    no effect (a scripted review nobody asked for); warnings do not make ``ok`` false."""

    records: tuple[RequestRecord, ...]
    notes: tuple[Note, ...]
    failures: tuple[Failure, ...]
    graph: Path
    log: EventLog
    checks: int = 0
    scenario: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every expectation held."""
        return not self.failures

    def stage_spend(self) -> list[dict[str, Any]]:
        """Per stage visit, in order: ``{"stage", "plan_mode", "model", "requests", "tokens",
        "reused"}`` — the model its requests went to (``default``: the host's own), how many
        requests, the estimated tokens sent and how many a prompt cache could reuse. A new entry
        starts when the stage, plan mode or model changes (a model switch reuses no prefix)."""
        out: list[dict[str, Any]] = []
        for r in self.records:
            model = (r.model or {}).get("model", "default")
            key = (r.stage, r.plan_mode, model)
            if not out or (out[-1]["stage"], out[-1]["plan_mode"], out[-1]["model"]) != key:
                out.append({"stage": r.stage, "plan_mode": r.plan_mode, "model": model,
                            "requests": 0, "tokens": 0, "reused": 0})
            out[-1]["requests"] += 1
            out[-1]["tokens"] += r.tokens
            out[-1]["reused"] += r.prefix.reused_tokens
        return out
