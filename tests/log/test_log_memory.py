"""``MemoryLog`` under threads and fork: its append lock is held only to check the end and write."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time
from typing import Any

import pytest

import fsm_stage.log.memory as memory
from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog


def test_a_memory_logs_clock_may_wait_for_another_thread_appending_elsewhere() -> None:
    """No caller's code runs under the lock that makes a ``MemoryLog`` append one step: a clock
    that waits for another thread's append to a different log returns, not deadlocks."""
    header = SessionHeader("clocked", cwd="/w")
    audit = MemoryLog(header)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        def clock() -> int:
            return pool.submit(lambda: (audit.append("fsm/tick", {}), 7)[1]).result(timeout=5)

        assert MemoryLog(header, clock=clock).append("fsm/x", {}).time == 7
    assert [e.type for e in audit.events] == ["fsm/tick"]


def test_a_child_forked_while_a_thread_appends_can_append() -> None:
    """A process forked while another thread holds the append lock starts with a free one."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this system")
    inside, real = threading.Event(), memory.prepare_batch

    def slow_once(*args: Any, **kwargs: Any) -> Any:
        if not inside.is_set():
            inside.set()
            time.sleep(1.0)  # the lock is held meanwhile
        return real(*args, **kwargs)

    header = SessionHeader("forked", cwd="/w")
    memory.prepare_batch = slow_once  # type: ignore[assignment]
    try:
        thread = threading.Thread(target=lambda: MemoryLog(header).append("fsm/x", {}))
        thread.start()
        inside.wait(5)
        pid = os.fork()
        if pid == 0:  # the child: one append, at most 5 s
            signal.alarm(5)
            MemoryLog(header).append("fsm/y", {})
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        thread.join()
    finally:
        memory.prepare_batch = real
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
