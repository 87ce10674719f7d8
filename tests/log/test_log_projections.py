"""Projections and folds: plan mode (plan-mode-spec §2.B, §2.K, §2.L), stage records and the
stage projection (stage-switch-spec section B, §1.5), open turn, told state, cursors."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from log_helpers import DSH_DIR, PLAN_REVIEW

from fsm_stage.constants import STAGE_SOURCE_KINDS, STAGE_SUMMARY_RE
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Event, MemoryLog, Replace, SessionHeader
from fsm_stage.log.projections import (
    OpenTurn,
    PlanModeFold,
    PlanState,
    PlanView,
    ProjectionCursor,
    RunningSelection,
    StageProjection,
    StageRecord,
    ToldProjection,
    current_stage,
    fold,
    fold_plan_mode,
    fold_stage,
    fold_stage_records,
    plan_mode_problem,
    stage_from_event,
    standard_projections,
)


class Log:
    """Tiny event builder: ``Log().add(type, data, **kw)`` with contiguous seqs."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, type: str, data: Any = None, **kw: Any) -> Log:
        self.events.append(
            Event(type, len(self.events), 1000 + len(self.events), data if data is not None else {}, **kw)
        )
        return self


def plan(active: Any) -> tuple[str, Any]:
    return ("plan/mode", {"active": active})


def run(cid: str, args: str | None = None, name: str = "plan") -> tuple[str, Any]:
    d: dict[str, Any] = {"commandId": cid, "name": name, "source": {"kind": "user"}}
    if args is not None:
        d["args"] = args
    return ("command/run", d)


def done(cid: str, kind: str = "success") -> tuple[str, Any]:
    return ("command/done", {"commandId": cid, "kind": kind, "text": "ok"})


def notice(
    summary: Any, kind: str = "stage-switch", form: str = "notice", text: str | None = None, **extra: Any
) -> tuple[str, Any]:
    source: dict[str, Any] = {"kind": kind, "form": form, **extra}
    if summary is not None:
        source["summary"] = summary
    body = text if text is not None else (summary if isinstance(summary, str) else "x")
    return (
        "user/message",
        {"id": "m", "role": "user", "content": [{"type": "text", "text": body}], "source": source},
    )


def build(*items: tuple[str, Any]) -> list[Event]:
    log = Log()
    for t, d in items:
        log.add(t, d)
    return log.events


# --- plan mode fold (§2.B) -----------------------------------------------------------------------


def test_B6_empty_log_folds_inactive() -> None:
    assert fold_plan_mode([]) is False
    assert fold(PlanModeFold(), []) is False


def test_B7_last_plan_mode_wins_and_other_types_are_ignored() -> None:
    evs = build(plan(True), ("turn/start", {"turn": 1}), plan(False), ("user/message", {}), plan(True))
    assert fold_plan_mode(evs) is True
    assert fold(PlanModeFold(), evs) is True


def test_B8_fold_honours_the_prefix_end() -> None:
    evs = build(plan(True), plan(False))
    assert fold_plan_mode(evs, 1) is True
    assert fold_plan_mode(evs, 0) is False
    assert fold_plan_mode(evs) is False
    assert fold(PlanModeFold(), evs, 1) is True


# --- plan projection unit (§2.K) -----------------------------------------------------------------


def views(*items: tuple[str, Any]) -> list[dict[str, bool]]:
    p = PlanView()
    state = p.init()
    out = []
    for ev in build(*items):
        state = p.apply(state, ev)
        out.append(p.view(state))
    return out


def test_B96_empty_log_views_inactive_not_pending() -> None:
    p = PlanView()
    assert p.view(p.init()) == {"active": False, "pending": False}
    assert p.key == "plan" and p.STATE_VERSION == 2


def test_B97_logged_selection_reads_pending_until_plan_mode_records_it() -> None:
    assert views(run("c1", ""), done("c1"), ("turn/start", {"turn": 1}), plan(True)) == [
        {"active": False, "pending": True},
        {"active": False, "pending": True},
        {"active": False, "pending": True},
        {"active": True, "pending": False},
    ]


def test_B98_error_settled_command_drops_the_selection() -> None:
    assert views(plan(True), run("c1", "off"), done("c1", "error"))[1:] == [
        {"active": True, "pending": True},
        {"active": True, "pending": False},
    ]


def test_B99_off_args_non_plan_commands_and_matching_selection() -> None:
    assert views(
        plan(True),
        run("x", " now", name="compact"),
        run("c0"),
        run("c1", " off"),
        plan(False),
        run("c2", "off"),
    ) == [
        {"active": True, "pending": False},
        {"active": True, "pending": False},
        {"active": True, "pending": False},
        {"active": True, "pending": True},
        {"active": False, "pending": False},
        {"active": False, "pending": False},
    ]


def test_B100_message_argument_targets_plan_mode() -> None:
    assert views(run("c1", " sketch the refactor first")) == [{"active": False, "pending": True}]


def test_B102_cold_replay_of_command_events_recovers_pending() -> None:
    """A fresh fold over only command/run, command/done and plan/mode reproduces the view."""
    full = build(("turn/start", {"turn": 1}), run("c1", ""), ("user/message", {}), ("turn/end", {}))
    only = [e for e in full if e.type in {"command/run", "command/done", "plan/mode"}]
    p = PlanView()
    assert p.view(fold(p, full)) == p.view(fold(p, only)) == {"active": False, "pending": True}


def test_B103_rules_same_object_for_irrelevant_events_and_json_state() -> None:
    """R0–R5, same-object return, plain-JSON state (dump/load round trip) and version 2."""
    p = PlanView()
    s0 = p.init()
    assert s0 == PlanState(False, None, None)  # R0
    for irrelevant in build(
        run("c", None), run("c", "x", name="goal"), done("other"), ("turn/start", {}), ("user/message", {})
    ):
        assert p.apply(s0, irrelevant) is s0  # R1, R5
    s1 = p.apply(s0, build(run("c1", " off"))[0])
    assert s1 == PlanState(False, None, RunningSelection("c1", False))  # R2
    s2 = p.apply(s1, build(done("c1"))[0])
    assert s2 == PlanState(False, None, None)  # R3: running.wanted == active -> wanted None
    s3 = p.apply(PlanState(False, None, RunningSelection("c2", True)), build(done("c2"))[0])
    assert s3 == PlanState(False, True, None)  # R3 success and differs
    s4 = p.apply(PlanState(False, True, RunningSelection("c3", True)), build(plan(True))[0])
    assert s4 == PlanState(True, None, RunningSelection("c3", True))  # R4 keeps running
    for s in (s0, s1, s3, s4):
        raw = json.loads(json.dumps(p.dump(s)))
        assert p.load(raw) == s
    with pytest.raises(ValueError):
        p.load({"active": "yes", "wanted": None, "running": None})


def test_B104_direct_plan_mode_without_command_never_shows_pending() -> None:
    assert views(plan(True), plan(False)) == [
        {"active": True, "pending": False},
        {"active": False, "pending": False},
    ]


# --- plan-mode invariant (§2.L) -----------------------------------------------------------------


def test_B105_B106_boolean_plan_mode_accepted_inside_or_outside_turns() -> None:
    evs = build(plan(True), ("turn/start", {"turn": 1}), plan(False), ("turn/end", {}))
    assert [plan_mode_problem(e) for e in evs] == [None, None, None, None]


@pytest.mark.parametrize(
    ("data", "shown"), [({"active": 42}, "42"), ({"active": "plan"}, '"plan"'), ({}, "undefined")]
)
def test_B107_non_boolean_plan_mode_rejected_with_value_as_json(data: dict[str, Any], shown: str) -> None:
    problem = plan_mode_problem(build(("plan/mode", data))[0])
    assert problem is not None and problem.endswith(shown)
    # the folds ignore the invalid record instead of adopting it
    assert fold_plan_mode(build(plan(True), ("plan/mode", data))) is True


def test_B108_unrelated_events_are_ignored_by_the_invariant() -> None:
    assert plan_mode_problem(build(("turn/start", {"turn": 1}))[0]) is None
    assert plan_mode_problem(build(("tools/changed", {"active": 42}))[0]) is None


# --- §10 verification table (plan-review), after every line ------------------------------------

# (line, expected unit state after, expected view after); lines 5–22 and 26–39 are "unchanged".
TABLE: dict[int, tuple[tuple[bool, bool | None, tuple[str, bool] | None], dict[str, bool]]] = {
    1: ((False, None, None), {"active": False, "pending": False}),
    2: ((False, None, ("cmd-228a60ef-1", True)), {"active": False, "pending": True}),
    3: ((True, None, ("cmd-228a60ef-1", True)), {"active": True, "pending": False}),
    4: ((True, None, None), {"active": True, "pending": False}),
    **{ln: ((True, None, None), {"active": True, "pending": False}) for ln in range(5, 25)},
    **{ln: ((False, None, None), {"active": False, "pending": False}) for ln in range(25, 40)},
}


@pytest.fixture(scope="module")
def plan_review_lines() -> list[list[Event]]:
    """Events per physical line of plan-review (index 0 = the header line, no events)."""
    path = DSH_DIR / PLAN_REVIEW
    if not path.is_file():
        pytest.skip(f"DSH corpus not found at {DSH_DIR}")
    res = read_log(path)
    by_line: dict[int, list[Event]] = {}
    for ev, off in zip(res.events, res.line_offsets, strict=True):
        by_line.setdefault(off, []).append(ev)
    return [[], *(by_line[o] for o in sorted(by_line))]


@pytest.mark.parametrize("line", sorted(TABLE))
def test_plan_review_table_after_every_line(line: int, plan_review_lines: list[list[Event]]) -> None:
    """dsh-log-format §10: unit state and view after each line; foldPlanMode equals active (B97, B103)."""
    assert len(plan_review_lines) == 39
    events = [e for evs in plan_review_lines[:line] for e in evs]
    p = PlanView()
    state = fold(p, events)
    (active, wanted, running), view = TABLE[line]
    assert (state.active, state.wanted) == (active, wanted)
    assert (None if state.running is None else (state.running.command_id, state.running.wanted)) == running
    assert p.view(state) == view
    assert fold_plan_mode(events) is active
    if line == 39:
        assert len(events) == 343 and fold(OpenTurn(), events).open is False


def test_plan_review_told_state_follows_request_headers(plan_review_lines: list[list[Event]]) -> None:
    """The `change` header at seq 291 is the first one after plan/mode{false} (§10 line 26–39)."""
    events = [e for evs in plan_review_lines for e in evs]
    told = ToldProjection()
    first_header = next(e.seq for e in events if e.type == "request/header")
    assert told.view(fold(told, events, first_header + 1)) == {
        "seq": first_header,
        "reason": "initial",
        "planActive": True,
        "stage": None,
    }
    last = told.view(fold(told, events))
    assert last is not None and last["reason"] == "change" and last["planActive"] is False
    assert told.view(told.init()) is None


# --- stage records (section B) --------------------------------------------------------------------


def test_S13_empty_log_folds_to_none() -> None:
    assert fold_stage([]) is None
    assert fold(StageProjection(), []).stage is None


def test_S14_fold_honours_end_prefix() -> None:
    evs = build(notice("Current stage: alpha"), notice("Current stage: beta"))
    assert fold_stage(evs, end=1) == "alpha"
    assert fold(StageProjection(), evs, 1).stage == "alpha"


def test_S15_last_record_wins() -> None:
    assert fold_stage(build(notice("Current stage: alpha"), notice("Current stage: beta"))) == "beta"


def test_S16_migrated_plugin_kind_is_read() -> None:
    assert fold_stage(build(notice("Current stage: gamma", kind="plugin:stage-switch"))) == "gamma"


def test_S17_handoff_summary_is_a_record() -> None:
    assert fold_stage(build(notice("Current stage: alpha"), notice("Stage switched to gamma"))) == "gamma"


def test_S18_foreign_plain_and_malformed_messages_fold_to_none() -> None:
    evs = build(
        ("user/message", {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}),
        notice("Current stage: ghost", kind="other-plugin"),
        notice("Stage switched to NOT A STAGE"),
    )
    assert fold_stage(evs) is None
    assert fold(StageProjection(), evs).stage is None


def test_S19_record_test_details() -> None:
    # (a) a malformed own-kind notice does not reset the value
    assert fold_stage(build(notice("Current stage: alpha"), notice("Current stage: Bad!"))) == "alpha"
    # (b) form prompt, missing or non-string summary
    assert stage_from_event(build(notice("Current stage: alpha", form="prompt"))[0]) is None
    assert stage_from_event(build(notice(None))[0]) is None
    assert stage_from_event(build(notice(7))[0]) is None
    # (c) trailing newline / extra text: fullmatch, not match
    assert stage_from_event(build(notice("Current stage: alpha\n"))[0]) is None
    assert stage_from_event(build(notice("Current stage: alpha "))[0]) is None
    # (d) the retired wrapper is not a record
    assert (
        stage_from_event(build(notice("Current stage: route", kind="plugin", plugin="stage-switch"))[0])
        is None
    )
    # (e) non-user/message events never count
    assert stage_from_event(Event("assistant/message", 0, 0, notice("Current stage: alpha")[1])) is None
    # JSON event dicts are accepted too
    assert stage_from_event({"type": "user/message", "data": notice("Current stage: alpha")[1]}) == "alpha"


def test_S20_client_fold_returns_both_producer_kinds() -> None:
    t = 5_000
    entries = [
        {"type": "event", "event": Event("user/message", 1, t + 1, notice("Current stage: route")[1])},
        {
            "type": "event",
            "event": {
                "type": "user/message",
                "seq": 2,
                "time": t + 2,
                "data": notice("Stage switched to design", kind="plugin:stage-switch")[1],
            },
        },
    ]
    assert fold_stage_records(entries) == [
        StageRecord("route", 1, t + 1, False),
        StageRecord("design", 2, t + 2, True),
    ]
    assert fold_stage_records(entries)[1].to_json() == {
        "stage": "design",
        "seq": 2,
        "time": t + 2,
        "switched": True,
    }


def test_S21_client_fold_ignores_humans_wrappers_other_producers_transients() -> None:
    entries = [
        {"type": "event", "event": Event("user/message", 0, 0, {"content": [], "source": {"kind": "user"}})},
        {
            "type": "event",
            "event": Event(
                "user/message", 1, 0, notice("Current stage: route", kind="plugin", plugin="stage-switch")[1]
            ),
        },
        {
            "type": "event",
            "event": Event(
                "user/message", 2, 0, notice("Current stage: route", kind="compact-checkpoint")[1]
            ),
        },
        {"type": "transient", "chunk": {"type": "text-delta"}},
        {"type": "event", "event": Event("turn/start", 3, 0, {"turn": 1})},
    ]
    assert fold_stage_records(entries) == []


def test_S22_client_fold_ignores_contract_breaking_summaries() -> None:
    entries = [
        {"type": "event", "event": Event("user/message", i, 0, data)}
        for i, (_, data) in enumerate(
            [
                notice("bogus"),
                notice("Current stage: Not A Stage!"),
                notice("Current stage: a", form="prompt"),
                notice(None),
            ]
        )
    ]
    assert fold_stage_records(entries) == []


def test_S23_host_and_client_share_one_contract() -> None:
    """Both folds use the same constants: one kind set, one regex source, no flags."""
    assert sorted(STAGE_SOURCE_KINDS) == ["plugin:stage-switch", "stage-switch"]
    assert STAGE_SUMMARY_RE.flags == re.UNICODE  # Python's default for str patterns: no extra flags
    evs = build(notice("Current stage: alpha"), notice("Stage switched to beta", kind="plugin:stage-switch"))
    host = [stage_from_event(e) for e in evs]
    client = [r.stage for r in fold_stage_records({"type": "event", "event": e} for e in evs)]
    assert host == client == ["alpha", "beta"]


# --- stage projection (§1.5) --------------------------------------------------------------------


def test_stage_projection_fields_follow_section_1_5() -> None:
    """S13–S19 fields plus §1.5: header snapshot, open turn, sticky prompt, system head."""
    p = StageProjection()
    log = Log()
    log.add("system/message", {"content": [{"type": "text", "text": "sys"}]}, surface_op="append")
    log.add("turn/start", {"turn": 1})
    log.add("request/header", {"header": {}, "reason": "initial"})
    log.add(*notice("Current stage: alpha", text="Current stage: alpha\ndo it"), surface_op="append")
    log.add("request/header", {"header": {}, "reason": "change"})
    log.add(
        *notice("Stage switched to beta", text="handoff\n\nCurrent stage: beta"),
        surface_op=Replace(3, 3),
        source_event_seqs=[3],
    )
    log.add("turn/end", {"turn": 1})
    states = [fold(p, log.events, n) for n in range(len(log.events) + 1)]
    assert [s.stage for s in states] == [None, None, None, None, "alpha", "alpha", "beta", "beta"]
    assert [s.stage_at_last_header for s in states] == [
        None,
        None,
        None,
        None,
        None,
        "alpha",
        "alpha",
        "alpha",
    ]
    assert [s.open_turn for s in states] == [False, False, True, True, True, True, True, False]
    assert [s.has_stage_prompt for s in states] == [False] * 4 + [True] * 4
    assert [(s.head_seq, s.head_is_system) for s in states][1:] == [(0, True)] * 7
    assert current_stage(states[0], "route") == "route" and current_stage(states[-1], "route") == "beta"
    raw = json.loads(json.dumps(p.dump(states[-1])))
    assert p.load(raw) == states[-1]


def test_stage_projection_head_moves_on_replace_of_head() -> None:
    p = StageProjection()
    log = Log()
    log.add("user/message", {}, surface_op="append")
    log.add("user/message", {}, surface_op="append")
    log.add(*notice("Stage switched to b"), surface_op=Replace(0, 1), source_event_seqs=[0, 1])
    s = fold(p, log.events)
    assert (s.head_seq, s.head_is_system, s.stage) == (2, False, "b")


def test_has_stage_prompt_ignores_form_but_needs_the_marker() -> None:
    p = StageProjection()
    prompt_form = build(notice("Current stage: a", form="prompt", text="Current stage: a"))
    assert fold(p, prompt_form).has_stage_prompt is True and fold(p, prompt_form).stage is None
    no_marker = build(notice("Current stage: a", text="nothing here"))
    assert fold(p, no_marker).has_stage_prompt is False


# --- turn, cursor, generic ------------------------------------------------------------------------


def test_open_turn_follows_the_last_boundary() -> None:
    t = OpenTurn()
    evs = build(("command/run", {}), ("turn/start", {"turn": 3}), ("step/start", {}), ("turn/end", {}))
    assert [t.view(fold(t, evs, n)) for n in range(5)] == [
        {"open": False, "turn": None},
        {"open": False, "turn": None},
        {"open": True, "turn": 3},
        {"open": True, "turn": 3},
        {"open": False, "turn": None},
    ]


class CountingPlan(PlanView):
    def __init__(self) -> None:
        self.calls = 0

    def apply(self, state: PlanState, event: Event) -> PlanState:
        self.calls += 1
        return super().apply(state, event)


def test_cursor_read_costs_only_new_events() -> None:
    """DESIGN §4.4: reads are O(new events) — counted in apply calls, not timed."""
    log = MemoryLog(SessionHeader(id="s"), clock=lambda: 0)
    for i in range(500):
        log.append("step/start", {"turn": 1, "step": i})
    proj = CountingPlan()
    cur = ProjectionCursor(proj, log)
    cur.read()
    assert proj.calls == 500 and cur.watermark == 499
    log.append("plan/mode", {"active": True})
    assert cur.view() == {"active": True, "pending": False}
    assert proj.calls == 501
    cur.read()
    assert proj.calls == 501


def test_cursor_seeded_from_checkpoint_and_refolds_when_log_shrinks() -> None:
    evs = build(plan(True), plan(False), plan(True))
    cur = ProjectionCursor(PlanModeFold(), evs[:3], state=False, watermark=1)
    assert cur.read() is True and cur.watermark == 2
    short = ProjectionCursor(PlanModeFold(), evs[:1], state=False, watermark=5)
    assert short.read() is True and short.watermark == 0


def test_every_projection_returns_same_object_for_irrelevant_events() -> None:
    irrelevant = build(("assistant/chunk", {"chunk": {}}), ("future/thing", {}), ("tool/call", {"name": "x"}))
    for p in standard_projections():
        s = p.init()
        for ev in irrelevant:
            assert p.apply(s, ev) is s, p.key


@pytest.mark.parametrize("name", ["apps__web__tests__snapshots__steering__session.jsonl", PLAN_REVIEW])
def test_incremental_equals_refold_on_real_logs(name: str) -> None:
    path = DSH_DIR / name
    if not path.is_file():
        pytest.skip("corpus absent")
    events = read_log(path).events
    for p in standard_projections():
        grown: list[Event] = []
        cur = ProjectionCursor(p, grown)
        for ev in events:
            grown.append(ev)
            assert cur.read() == fold(p, grown)


def test_standard_projection_keys() -> None:
    assert {p.key for p in standard_projections()} == {"plan-mode", "plan", "turn", "stage", "told"}


def test_every_projection_state_survives_json_and_rejects_garbage() -> None:
    """Checkpoint rows are plain JSON; a row that does not load is refused (refold instead)."""
    evs = build(
        run("c1", ""),
        plan(True),
        ("turn/start", {"turn": 2}),
        notice("Current stage: alpha"),
        ("request/header", {"header": {}, "reason": "initial"}),
    )
    for p in standard_projections():
        for n in range(len(evs) + 1):
            state = fold(p, evs, n)
            assert p.load(json.loads(json.dumps(p.dump(state)))) == state
        for garbage in (None, 3, "x", [], {"unexpected": 1}):
            with pytest.raises(ValueError):
                p.load(garbage)


class _CountFold:
    """A deliberately non-idempotent fold: the number of events applied."""

    key = "count"
    STATE_VERSION = 1

    def init(self) -> int:
        return 0

    def apply(self, state: int, event: Event) -> int:
        return state + 1

    def view(self, state: int) -> int:
        return state

    def dump(self, state: int) -> int:
        return state

    def load(self, raw: Any) -> int:
        return int(raw)


def test_concurrent_cursor_reads_never_apply_an_event_twice() -> None:
    """A ``ProjectionCursor`` shared by reader threads while another thread appends
    keeps its state and watermark consistent: a non-idempotent count never exceeds the events
    committed, and ends equal to them."""
    import sys
    import threading

    from fsm_stage.log.projections import ProjectionCursor

    log = MemoryLog(SessionHeader(id="s"))
    cursor = ProjectionCursor(_CountFold(), log)
    done = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        while not done.is_set():
            count = cursor.read()
            committed = len(log)
            if count > committed:
                errors.append(f"folded {count} events with {committed} committed")
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in range(3000):
            log.append("fsm/tick", {})
        done.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert cursor.read() == len(log) == 3000 and cursor.watermark == 2999


def test_cursor_snapshot_pairs_state_and_watermark_and_refolds_a_shorter_log() -> None:
    """``snapshot`` is the (state, watermark) pair; a cursor seeded past the end of its
    log refolds from ``init`` instead of trusting the seed."""
    from fsm_stage.log.projections import ProjectionCursor

    log = MemoryLog(SessionHeader(id="s"))
    for _ in range(3):
        log.append("fsm/tick", {})
    cursor = ProjectionCursor(_CountFold(), log)
    assert cursor.snapshot == (0, -1)
    assert cursor.read() == 3 and cursor.snapshot == (3, 2)
    seeded = ProjectionCursor(_CountFold(), log, state=100, watermark=9)
    assert seeded.read() == 3 and seeded.snapshot == (3, 2)


# --- one fold per question ------------------------------------------------------------------------


def test_runtime_turn_fold_is_the_log_turn_fold() -> None:
    """``Session``'s turn fold is ``OpenTurn``: for a ``turn/start`` without ``data.turn``
    the runtime (``last_turn``) and ``fsm-stage log state`` (``OpenTurn`` view) report the same
    number (one past the last), and headers are counted by the same fold."""
    from fsm_stage.runtime.session import TURN_FOLD, Session, TurnFold, TurnState

    assert isinstance(TURN_FOLD, OpenTurn) and issubclass(TurnFold, OpenTurn)
    mem = MemoryLog(SessionHeader(id="s"))
    session = Session(mem)
    mem.append("turn/start", {"turn": 4})
    mem.append("request/header", {"reason": "initial"})
    mem.append("turn/end", {"turn": 4})
    mem.append("turn/start", {})  # no number: the next one
    state = session.read(TURN_FOLD)
    assert isinstance(state, TurnState)
    assert session.is_turn_open and session.last_turn == 5 and session.has_request_header
    assert OpenTurn().view(fold(OpenTurn(), mem.events)) == {"open": True, "turn": session.last_turn}
    mem.append("turn/end", {})
    assert OpenTurn().view(fold(OpenTurn(), mem.events)) == {"open": False, "turn": None}
    assert session.last_turn == 5 and not session.is_turn_open
    t = OpenTurn()
    assert t.load(json.loads(json.dumps(t.dump(fold(t, mem.events))))) == fold(t, mem.events)


def test_told_and_stage_at_last_header_are_the_controllers_header_relative(
    plan_review_lines: list[list[Event]],
) -> None:
    """"what the model was last told" has one implementation, ``HeaderRelative``:
    ``pending.HeaderRelative`` (plan mode's) is the projections one, and after every prefix of
    a real plan-review log plus stage records, ``ToldProjection`` (the CLI's ``lastHeader``)
    agrees with ``told(HeaderRelative(PlanModeFold()))`` (plan mode) and with
    ``StageProjection.stage_at_last_header`` (the stage controller)."""
    from fsm_stage.driver import _pending as pending
    from fsm_stage.log.projections import HeaderRelative, told

    assert pending.HeaderRelative is HeaderRelative and pending.told is told
    log = Log()
    for evs in plan_review_lines:
        for e in evs:
            log.add(e.type, e.data)
    log.add(*notice("Stage switched to alpha"))
    log.add("request/header", {"reason": "change"})
    log.add(*notice("Stage switched to beta"))
    events = log.events
    plan_at, stage_p, told_p = HeaderRelative(PlanModeFold()), StageProjection(), ToldProjection()
    for n in range(0, len(events) + 1, 7):
        view = told_p.view(fold(told_p, events, n))
        plan_told = told(fold(plan_at, events, n))
        stage_told = fold(stage_p, events, n).stage_at_last_header
        if view is None:
            assert plan_told is None and stage_told is None
        else:
            assert view["planActive"] is plan_told and view["stage"] == stage_told
    final = told_p.view(fold(told_p, events))
    assert final is not None and final["stage"] == "alpha" and final["reason"] == "change"
    assert fold(stage_p, events).stage == "beta"
