"""Surface fold (dsh-log-format §3) and the protected system head (stage-switch §1.13, S77, S80)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import is_session_log

from fsm_stage.errors import LogWriteError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event, MemoryLog, Replace, SessionHeader
from fsm_stage.log.surface import Surface, SurfaceOpError, fold_surface, shadow_range


def ev(
    seq: int, type: str = "user/message", op: object = "append", srcs: tuple[int, ...] | None = None
) -> Event:
    return Event(type, seq, 0, {}, op, srcs)  # type: ignore[arg-type]


def test_append_and_replace_by_positions() -> None:
    events = [
        ev(0),
        ev(1, "assistant/message"),
        ev(2, "turn/start", None),
        ev(3, "tool/result"),
        ev(4, op=Replace(1, 3), srcs=(1, 3)),
        ev(5),
    ]
    s = Surface()
    s.extend(events)
    assert s.nodes == [0, 4, 5] and s.replace_generation == 1


def test_boundaries_are_seqs_not_a_numeric_interval() -> None:
    """After an earlier replace, start can be numerically greater than end (§3)."""
    events = [ev(0), ev(1), ev(2, op=Replace(0, 0), srcs=(0,)), ev(3, op=Replace(2, 1), srcs=(1, 2))]
    assert fold_surface(events) == [3]


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (ev(2, op=Replace(7, 7), srcs=(1,)), "not both on the surface"),
        (ev(2, op=Replace(1, 0), srcs=(0, 1)), "comes after"),
        (ev(2, op=Replace(0, 1), srcs=(0,)), "must cite every shadowed node"),
        (ev(2, "turn/start", "append"), "not a surface type"),
        (ev(2, "turn/start", None, (0,)), "sourceEventSeqs"),
        (ev(2, srcs=(5,)), "earlier seq"),
    ],
)
def test_invalid_ops_are_refused(bad: Event, fragment: str) -> None:
    s = Surface()
    s.extend([ev(0), ev(1)])
    with pytest.raises(SurfaceOpError, match=fragment):
        s.apply(bad, validate_sources=True)
    assert s.nodes == [0, 1]


def test_readers_treat_source_seqs_as_informational() -> None:
    """§1.4: a hand-trimmed fixture may cite seqs past its end; folding still works."""
    s = Surface()
    s.extend([ev(0), ev(1, srcs=(9,)), ev(2, op=Replace(0, 1))])
    assert s.nodes == [2]


def test_protected_system_head_refuses_covering_replace() -> None:
    """S80's cause: a user-message replace over the protected head is refused by the log."""
    log = MemoryLog(SessionHeader(id="s"), clock=lambda: 0)
    log.append("system/message", {}, surface_op="append")
    log.append("user/message", {"content": []}, surface_op="append")
    with pytest.raises(SurfaceOpError, match="protected system head"):
        log.append("user/message", {"content": []}, surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    assert len(log) == 2 and isinstance(SurfaceOpError("x"), LogWriteError)
    # a system/message over exactly the head is allowed
    log.append("system/message", {}, surface_op=Replace(0, 0), source_event_seqs=[0])
    assert log.surface.nodes == [2, 1] and log.surface.head_is_system
    # replacing the non-head range is fine
    log.append("user/message", {"content": []}, surface_op=Replace(1, 1), source_event_seqs=[1])
    assert log.surface.nodes == [2, 3]


def test_head_rule_is_optional() -> None:
    s = Surface(protect_system_head=False)
    s.extend([ev(0, "system/message"), ev(1), ev(2, op=Replace(0, 1), srcs=(0, 1))])
    assert s.nodes == [2] and not s.head_is_system


def test_S77_shadow_range_shapes() -> None:
    """S77: [sys, u1, a2, t3] → s1..s3; [u0, u1] → u0..u1; empty → append (empty range)."""
    assert shadow_range([0, 1, 2, 3], head_is_system=True) == [1, 2, 3]
    assert shadow_range([0, 1], head_is_system=False) == [0, 1]
    assert shadow_range([], head_is_system=False) == []
    assert shadow_range([0], head_is_system=True) == []  # S76: only the head → append


def test_corpus_surfaces_fold_including_replacements(dsh_dir: Path) -> None:
    """All 172 logs fold; compaction-recovery's seq 21 replaces node 4 (§3 'In the fixtures')."""
    replaced = {}
    for p in sorted(dsh_dir.iterdir()):
        if not is_session_log(p):
            continue
        events = read_log(p).events
        s = Surface()
        s.extend(events)
        for e in events:
            if isinstance(e.surface_op, Replace):
                replaced[p.name] = (e.seq, e.surface_op)
    names = {n.split("__")[-2]: v for n, v in replaced.items()}
    assert names["compaction-recovery"] == (21, Replace(4, 4))
    assert len(replaced) == 2
