"""One per-session lock for both controllers (DESIGN.md §5 "serialise per session").

The lock is keyed by the session id, like the pending selections, so two ``Session`` wrappers
of one log share it, and plan mode and the stage switch share it too.
"""

from __future__ import annotations

import threading
from typing import Any

from fsm_stage.driver import session_lock
from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.agent import InboxAgent
from fsm_stage.runtime.session import Session

from .harness import Harness

# Upper bound on how long the second thread is given to run before the first is released.
# Not an assertion on timing: with the lock the second thread is blocked however long we wait.
GRACE = 0.3


class _GatedLog:
    """Delegates to a log; the first stage-record append waits for ``go`` (inside the lock)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.entered = threading.Event()
        self.go = threading.Event()
        self._gated = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if not self._gated:
            self._gated = True
            self.entered.set()
            assert self.go.wait(10), "the test never released the first append"
        return self._inner.append(*args, **kwargs)


def test_two_session_wrappers_of_one_log_cannot_both_apply_a_transition_S89() -> None:
    """Two ``Session`` wrappers of one log driven from two threads: the second ``set`` folds
    only after the first one's append, so exactly one stage record is written (S89 set)."""
    h = Harness()
    gated = _GatedLog(h.log)
    first = InboxAgent(Session(gated))
    second = InboxAgent(Session(h.log))
    outcomes: dict[str, str] = {}

    def run(name: str, agent: InboxAgent) -> None:
        outcomes[name] = h.controller.set(agent, "beta")

    a = threading.Thread(target=run, args=("a", first))
    a.start()
    assert gated.entered.wait(10)
    b = threading.Thread(target=run, args=("b", second))
    b.start()
    b.join(GRACE)
    gated.go.set()
    a.join(10)
    b.join(10)
    assert outcomes == {"a": "committed", "b": "noop"}
    assert h.summaries() == ["Current stage: beta"]  # one record, not two


def test_plan_mode_and_stage_switch_share_the_session_lock_B10() -> None:
    """While another holder has the session's lock, ``PlanModeController.set`` (B10) waits:
    plan mode serialises on the same per-session lock as the stage switch."""
    h = Harness()
    plan = PlanModeController({"section": "Plan first."})
    plan.attach(h.runtime)
    assert h.controller.session_lock(h.session) is session_lock(h.session.id)
    assert h.runtime.session_lock(h.session.id) is session_lock(h.session.id)
    done: list[str] = []
    holder = session_lock(h.session.id)
    with holder:
        t = threading.Thread(target=lambda: done.append(plan.set(h.agent, True)))
        t.start()
        t.join(GRACE)
        assert done == [], "plan mode appended while another holder had the session lock"
    t.join(10)
    assert done == ["committed"]
