"""Row 13: what observability costs a session that does not use it.

``Session.append`` hands every committed event to ``fsm_stage.observe.appended`` (the log records
and OpenTelemetry spans of docs/observability.md). With logging at WARNING and no OpenTelemetry
loaded, that hook must cost nothing measurable: this bench appends a step-shaped mix of events
(half of them types the hook reads) through ``Session.append`` with the hook as shipped and with
the hook replaced by a no-op, interleaved, and reports the median ratio. The details add the same
with ``opentelemetry.trace`` imported but no tracer provider configured (the proxy provider).
Run it in a fresh interpreter (``bench/run.py`` does): a provider set by someone else would be
measured too.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from typing import Any

from fsm_stage.log.events import SessionHeader
from fsm_stage.log.memory import MemoryLog
from fsm_stage.runtime import session as session_module
from fsm_stage.runtime.session import Session

#: one step's worth of events: (type, data, ignorable); step/start, step/end and tool/call are watched
_MIX: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("step/start", {"turn": 1, "step": 1}, False),
    ("fsm/bench/note", {"n": 1}, True),
    ("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "read", "arguments": "{}"}, False),
    ("fsm/bench/note", {"n": 2}, True),
    ("fsm/bench/note", {"n": 3}, True),
    ("step/end", {"turn": 1, "step": 1}, False),
)


def _appends(n: int) -> float:
    """Seconds for ``n`` appends of the mix through a fresh ``Session``."""
    session = Session(MemoryLog(SessionHeader("bench")))
    mix = _MIX
    k = len(mix)
    t0 = time.perf_counter()
    for i in range(n):
        kind, data, ignorable = mix[i % k]
        session.append(kind, data, ignorable=ignorable)
    return time.perf_counter() - t0


def _ratio(n: int, rounds: int) -> dict[str, float]:
    """Interleaved rounds of the shipped hook vs a no-op hook: medians and the median ratio."""
    shipped = session_module.appended

    def off(_session: Any, _events: Any) -> None:
        return None

    on_s, off_s, ratios = [], [], []
    for _ in range(rounds):
        session_module.appended = off  # type: ignore[assignment]
        try:
            base = _appends(n)
        finally:
            session_module.appended = shipped
        ours = _appends(n)
        on_s.append(ours / n)
        off_s.append(base / n)
        ratios.append(ours / base)
    return {"on_s": statistics.median(on_s), "off_s": statistics.median(off_s),
            "ratio": statistics.median(ratios)}


def run(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Row 13's numbers: per-append seconds with the hook (``on_s``) and without (``off_s``),
    their median ratio, and the same with ``opentelemetry.trace`` loaded (``proxy_*``)."""
    n, rounds = (2_000, 3) if smoke else (20_000, 7) if quick else (60_000, 11)
    logging.getLogger("fsm_stage").setLevel(logging.WARNING)
    if "opentelemetry.trace" in sys.modules:
        raise RuntimeError("opentelemetry.trace is already loaded: run this bench in a fresh interpreter")
    _appends(n)  # warm up
    out: dict[str, Any] = {"n": n, "rounds": rounds, **_ratio(n, rounds)}
    try:
        import opentelemetry.trace  # noqa: F401 - loaded, but no provider configured
    except ImportError:
        out["proxy"] = "opentelemetry-api not installed"
        return out
    proxy = _ratio(n, rounds)
    out.update({f"proxy_{k}": v for k, v in proxy.items()})
    return out


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv))
