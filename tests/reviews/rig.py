"""A composed host for the durable-review tests: a runtime with the stage switch and plan mode
over any log, a local handoff store in a temporary cwd, and helpers to call and resume tools.

Also run as a script by the subprocess tests (``python rig.py MODE LOG CWD ...``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from fsm_stage.config import GraphConfig, StageConfig
from fsm_stage.constants import (
    EXIT_PLAN_MODE,
    GOTO_STAGE,
    PLAN_MODE_EVENT,
    STEP_START,
    TOOL_RESULT,
    TURN_START,
)
from fsm_stage.driver import open_session
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import EventLog
from fsm_stage.reviews import REVIEW_FOLD, ReviewChannel, ReviewState
from fsm_stage.runtime.tools import ToolCall, ToolResult, tool_result_message

T = TypeVar("T")


def graph(name: str = "reviewed", extra_stage: bool = False) -> GraphConfig:
    """explore -> implement -> verify (any-to-any edges); ``extra_stage`` adds ``ship`` (a
    different fingerprint)."""
    names = ["explore", "implement", "verify", *(["ship"] if extra_stage else [])]
    stages = tuple(StageConfig(n, f"Do the {n} work.", None) for n in names)
    return GraphConfig(name=name, stages=stages, section="Call goto_stage when done.", initial="explore",
                       handoff_dir="handoff")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion."""
    return asyncio.run(coro)


class Rig:
    """Runtime + StageController + PlanModeController over ``log`` (see module docstring)."""

    def __init__(self, log: EventLog, review: ReviewChannel | None, *, accept_graph_change: bool = False,
                 graph_config: GraphConfig | None = None) -> None:
        self.host = open_session(graph_config or graph(), log, review=review,
                                 plan_mode={"section": "Plan first."}, guidance=False, repair=False,
                                 accept_graph_change=accept_graph_change)
        self.runtime, self.agent, self.session = self.host.runtime, self.host.agent, self.host.session
        self.stage, self.plan = self.host.stage, self.host.plan
        self.log = log

    def close(self) -> None:
        """Close the log (what a process exit does to a ``JsonlLog``: its file lock is released)."""
        closer = getattr(self.log, "close", None)
        assert closer is not None, "this log cannot be closed"
        closer()

    # -- log shaping --------------------------------------------------------------------------
    def open_turn(self) -> None:
        self.session.append(TURN_START, {"turn": self.session.last_turn + 1})

    def step(self, n: int = 1) -> None:
        """An accepted pre-step (flush) then ``step/start``."""
        for m in self.runtime.pre_step(self.agent, []):
            self.session.append_message(m)
        self.session.append(STEP_START, {"turn": self.session.last_turn, "step": n})

    def enter_plan(self) -> None:
        self.session.append(PLAN_MODE_EVENT, {"active": True})

    # -- tools --------------------------------------------------------------------------------
    def goto_call(self, stage: str, handoff: str | None = "# Handoff\nwhat was done", *,
                  call_id: str = "call_goto") -> ToolCall:
        args: dict[str, Any] = {"stage": stage}
        if handoff is not None:
            args["handoff"] = handoff
        return ToolCall.of(GOTO_STAGE, args, id=call_id)

    def exit_call(self, plan: str = "# Plan\n1. do it", *, call_id: str = "call_exit") -> ToolCall:
        return ToolCall.of(EXIT_PLAN_MODE, {"plan": plan}, id=call_id)

    async def call(self, call: ToolCall) -> ToolResult:
        """Log ``tool/call``, run the tool, log ``tool/result`` (ReviewPending leaves it open)."""
        return await self.runtime.call_tool(self.agent, call)

    async def resume(self, call: ToolCall) -> ToolResult:
        """Re-run an open call (its ``tool/call`` is logged already) and log its ``tool/result``."""
        result = await self.runtime.call_tool(self.agent, call, log=False)
        self.session.append(TOOL_RESULT, {"message": tool_result_message(call, result.text, result.is_error)},
                            surface_op="append")
        return result

    def suspend(self, kind: str = "stage", *, target: str = "implement",
                handoff: str | None = "# Handoff\nwhat was done", plan: str = "# Plan\n1. do it") -> str:
        """Open a turn and a step and make a ``goto_stage`` (``kind="stage"``, to ``target`` with
        ``handoff``) or ``exit_plan_mode`` (``"plan"``, entering plan mode first) call wait for its
        review; returns the review id. ``AssertionError`` when no review was asked."""
        if kind == "plan":
            self.enter_plan()
        self.open_turn()
        self.step()
        call = self.exit_call(plan) if kind == "plan" else self.goto_call(target, handoff)
        try:
            run(self.call(call))
        except ReviewPending as pending:
            assert pending.kind == kind, pending.kind
            return pending.review_id
        raise AssertionError(f"no {kind} review was asked")

    # -- reads --------------------------------------------------------------------------------
    def reviews(self) -> ReviewState:
        return self.session.read(REVIEW_FOLD)

    def types(self, prefix: str = "fsm/") -> list[str]:
        return [e.type for e in self.session.events if e.type.startswith(prefix)]

    def stage_records(self) -> int:
        """How many stage-entry messages the log holds after the first (the applied switches)."""
        def summary(data: Any) -> str:
            source = data.get("source") if isinstance(data, dict) else None
            return str(source.get("summary", "")) if isinstance(source, dict) else ""

        return sum(1 for e in self.session.events
                   if e.type == "user/message" and summary(e.data).startswith("Stage switched to "))


def _full(log: Any, kill_after: int) -> int:
    """A whole reviewed transition (turn, step 1 with an approved goto_stage, step 2 applying
    it, turn end); SIGKILL right after the ``kill_after``-th append. Prints the append count."""
    import os
    import signal

    from fsm_stage.constants import STEP_END, TURN_END
    from fsm_stage.reviews import Answer, ScriptedReviewChannel

    appended = [0]
    original = log.append_many

    def counting(specs: Any, **kw: Any) -> Any:
        out = original(specs, **kw)
        appended[0] += 1
        if appended[0] == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    log.append_many = counting
    rig = Rig(log, ScriptedReviewChannel(default=lambda q: [Answer(q[0].id, ("Approve",))]))
    rig.open_turn()
    rig.step(1)
    run(rig.call(rig.goto_call("implement")))
    rig.session.append(STEP_END, {"turn": 1, "step": 1})
    rig.step(2)
    rig.session.append(STEP_END, {"turn": 1, "step": 2})
    rig.session.append(TURN_END, {"turn": 1, "reason": {"kind": "completed"}})
    print(appended[0])
    return 0


def _main(argv: list[str]) -> int:
    """Subprocess entry: ``MODE LOG CWD [N]``. Modes: ``suspend`` (open a turn, call goto_stage
    with a suspending channel, exit leaving the call open), ``resume`` (reopen, resume the open
    call, end the step, run the next step: prints JSON ``{text, is_error, current}``), ``full``
    (see ``_full``)."""
    from fsm_stage.log.events import SessionHeader
    from fsm_stage.log.jsonl import JsonlLog
    from fsm_stage.reviews import SuspendingReviewChannel

    mode, path, cwd = argv[0], argv[1], argv[2]
    log = JsonlLog(path, header=SessionHeader(id="s-1", cwd=cwd), lock_timeout=10.0)
    if mode == "full":
        return _full(log, int(argv[3]))
    rig = Rig(log, SuspendingReviewChannel())
    try:
        if mode == "suspend":
            rig.open_turn()
            rig.step()
            try:
                run(rig.call(rig.goto_call("implement")))
            except ReviewPending as pending:
                print(json.dumps({"review_id": pending.review_id, "call_id": pending.call_id}))
                return 0
            return 1
        if mode == "resume":
            result = run(rig.resume(rig.goto_call("implement")))
            rig.step(2)
            print(json.dumps({"text": result.text, "is_error": result.is_error,
                              "current": rig.stage.current(rig.session)}))
            return 0
    finally:
        log.close()
    return 2


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(_main(sys.argv[1:]))
