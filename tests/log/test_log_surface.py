"""Surface fold (docs/session-log.md) and the protected system head (docs/contracts.md, S77, S80)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import is_session_log

from fsm_stage.errors import LogWriteError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event, MemoryLog, Replace, SessionHeader, SurfaceOp
from fsm_stage.log.surface import Surface, fold_surface, shadow_range


def ev(
    seq: int, type: str = "user/message", op: SurfaceOp | None = "append", srcs: tuple[int, ...] | None = None
) -> Event:
    return Event(type, seq, 0, {}, op, srcs)


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
    """After an earlier replace, start can be numerically greater than end."""
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
    with pytest.raises(LogWriteError, match=fragment):
        s.apply(bad, validate_sources=True)
    assert s.nodes == [0, 1]


def test_readers_treat_source_seqs_as_informational() -> None:
    """A hand-trimmed fixture may cite seqs past its end; folding still works."""
    s = Surface()
    s.extend([ev(0), ev(1, srcs=(9,)), ev(2, op=Replace(0, 1))])
    assert s.nodes == [2]


def test_protected_system_head_refuses_covering_replace() -> None:
    """S80's cause: a user-message replace over the protected head is refused by the log."""
    log = MemoryLog(SessionHeader(id="s"), clock=lambda: 0)
    log.append("system/message", {}, surface_op="append")
    log.append("user/message", {"content": []}, surface_op="append")
    with pytest.raises(LogWriteError, match="protected system head"):
        log.append("user/message", {"content": []}, surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    assert len(log) == 2 and isinstance(LogWriteError("x"), LogWriteError)
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
    """All 172 logs fold; compaction-recovery's seq 21 replaces node 4."""
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


class _CopySpy:
    """Counts ``Surface.copy`` calls and the nodes they copied, and ``_positions`` lookups."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.copies = 0
        self.nodes_copied = 0
        self.lookups = 0
        real_copy, real_positions = Surface.copy, Surface._positions

        def copy(surface: Surface) -> Surface:
            self.copies += 1
            self.nodes_copied += len(surface.nodes)
            return real_copy(surface)

        def positions(surface: Surface, seq: int, op: Replace) -> tuple[int, int]:
            self.lookups += 1
            return real_positions(surface, seq, op)

        monkeypatch.setattr(Surface, "copy", copy)
        monkeypatch.setattr(Surface, "_positions", positions)


def test_single_op_appends_never_copy_the_surface(monkeypatch: pytest.MonkeyPatch) -> None:
    """H1 (invariant 4, O(new events) per append): in a 10k-message session an append with a
    surface op is validated against the live surface without copying it — the nodes copied
    per append do not grow with the session (a copy spy, not a timing)."""
    from fsm_stage.runtime.session import Session

    log = MemoryLog(SessionHeader(id="s"))
    session = Session(log)
    for _ in range(10_000):
        log.append("user/message", {"content": []}, surface_op="append")
    assert len(session.surface()) == 10_000
    spy = _CopySpy(monkeypatch)
    for _ in range(100):
        session.append("user/message", {"content": []}, surface_op="append")
        session.surface()
    last = len(log) - 1
    session.append("user/message", {"content": []}, surface_op=Replace(last, last), source_event_seqs=[last])
    assert spy.copies == 0 and spy.nodes_copied == 0
    assert session.surface()[-1] == len(log) - 1 and len(session.surface()) == 10_100


def test_replace_looks_its_positions_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Applying a replace validates and splices with one position lookup."""
    s = Surface()
    s.extend([ev(0), ev(1), ev(2)])
    spy = _CopySpy(monkeypatch)
    s.apply(ev(3, op=Replace(1, 2), srcs=(1, 2)), validate_sources=True)
    assert s.nodes == [0, 3] and spy.lookups == 1


def test_batch_copies_only_from_its_second_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch with one surface op never copies; the second op of a batch is checked on one
    copy that already holds the first op's effect (so it may target the first's node)."""
    from fsm_stage.log.events import NewEvent

    log = MemoryLog(SessionHeader(id="s"))
    for _ in range(50):
        log.append("user/message", {"content": []}, surface_op="append")
    spy = _CopySpy(monkeypatch)
    log.append_many([NewEvent("fsm/a", {}), NewEvent("user/message", {"content": []}, "append")])
    assert spy.copies == 0
    log.append_many(
        [
            NewEvent("user/message", {"content": []}, "append"),  # seq 52
            NewEvent("user/message", {"content": []}, Replace(52, 52), [52]),  # needs the first
            NewEvent("user/message", {"content": []}, "append"),
        ]
    )
    assert spy.copies == 1 and log.surface.nodes[-2:] == [53, 54]
    before = list(log.surface.nodes)
    with pytest.raises(LogWriteError):
        log.append_many(
            [
                NewEvent("user/message", {"content": []}, Replace(0, 0), [0]),
                NewEvent("user/message", {"content": []}, Replace(0, 0), [0]),  # 0 was shadowed
            ]
        )
    assert log.surface.nodes == before and len(log) == 55
