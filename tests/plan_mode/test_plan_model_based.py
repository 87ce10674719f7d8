"""Model-based check: random operation sequences against the spec's rules (B10–B28, Q3)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from plan_helpers import Harness

OPS = st.lists(st.sampled_from(["on", "off", "open", "close", "header", "boundary"]), max_size=30)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_random_sequences_follow_the_spec_rules_B10_B28(ops: list[str]) -> None:
    """B10–B16 (set outcomes), B17–B19 (idle narration), B22–B28 (boundary flush and narration,
    Q3): the controller agrees with a direct transcription of the spec at every step, the log
    never records a redundant plan/mode and get() always reflects the log."""
    h = Harness()
    logged, record, is_open, told = False, None, False, None  # record: (target, narrate) | None
    idle_notices = 0
    turn = 0
    for op in ops:
        if op in ("on", "off"):
            x = op == "on"
            target = record[0] if record is not None else logged
            if x == target:
                expected = "noop"
            elif is_open:
                record = (x, True)
                expected = "cancelled" if x == logged else "queued"
            elif x == logged:
                record, expected = None, "cancelled"
            else:
                logged, record, expected = x, None, "committed"
                idle_notices += told is not None and told != x
            assert h.plan.set(h.agent, x) == expected
        elif op == "open" and not is_open:
            turn += 1
            h.open_turn(turn)
            is_open = True
        elif op == "close" and is_open:
            h.close_turn(turn)
            is_open = False
        elif op == "header":
            h.header()
            told = logged
        elif op == "boundary" and is_open:
            before = len(h.boundary([]))
            expected_notice = False
            if record is not None:
                if record[0] != logged:
                    expected_notice = record[1] and told is not None and told != record[0]
                    logged = record[0]
                record = None
            assert before == int(expected_notice)
        status = h.get
        assert status["active"] == logged == h.plan.logged(h.session)
        assert status.get("pending") == (record[0] if record is not None else None)
    events = h.plan_events()
    assert all(a != b for a, b in zip([False, *events], events, strict=False))  # never redundant
    assert len(h.injected()) == idle_notices and h.agent.wants_turn is False
