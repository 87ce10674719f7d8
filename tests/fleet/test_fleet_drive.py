"""``fsm_stage.fleet.drive`` in one process: wait points, fencing, durable inputs, host tools
honest about at-least-once, and a crash after every single append of a whole run (the log cut
there, driven again) ending as the uninterrupted run does."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm_stage import MemoryLog, SessionHeader
from fsm_stage.constants import STEP_END, TOOL_CALL, TOOL_RESULT, TURN_END, USER_MESSAGE
from fsm_stage.errors import ClaimLostError, UserError
from fsm_stage.fleet import FencedLog, Store, check_session_id, drive, session_state
from fsm_stage.fleet.inputs import record_answer, record_input
from fsm_stage.fleet.records import CLAIM, END, fold
from fsm_stage.log.events import NewEvent

HERE = Path(__file__).resolve().parent
GRAPH = HERE / "fleet-graph.yaml"
sys.path.insert(0, str(HERE))
import fleet_model  # noqa: E402


def _log(sid: str = "s1") -> MemoryLog:
    return MemoryLog(SessionHeader(sid, cwd="/tmp"))


def _drive(log: Any) -> Any:
    return asyncio.run(drive(log, graph=GRAPH, model=fleet_model.model(), tools=fleet_model.tools()))


def _run_to_end(log: Any, effects: list[str] | None = None, limit: int = 20) -> Any:
    """Drive, approving every review, until the session stops at something else."""
    result = _drive(log)
    for _ in range(limit):
        if result.state != "waiting-review":
            return result
        record_answer(log, result.review_id, "approve")
        result = _drive(log)
    raise AssertionError("the session never settled")


def _copy(events: Any, upto: int) -> MemoryLog:
    log = _log()
    for ev in events[:upto]:
        seqs = list(ev.source_event_seqs) if ev.source_event_seqs else None
        log.append_many([NewEvent(ev.type, ev.data, ev.surface_op, seqs, ev.ignorable)])
    return log


#: Why a crash after any append of the uninterrupted run may close a review unapplied
#: (``_summary``'s ``closed``): the approval was used by the batch the crash cut.
CRASH_CLOSED = frozenset({"already-current"})


def _summary(log: Any) -> dict[str, Any]:
    """What must not depend on crashes: the end state, the user messages (each input once),
    the approved reviews (each applied once), and one result per dispatched call."""
    from fsm_stage.reviews import review_state

    events = log.events
    users = [e.data["id"] for e in events
             if e.type == USER_MESSAGE and e.data.get("source", {}).get("kind") == "user"]
    calls = [e.data["callId"] for e in events if e.type == TOOL_CALL]
    results = [e.data["message"]["source"]["callId"] for e in events if e.type == TOOL_RESULT]
    state = review_state(log)
    # an approval is used when its redemption applied it, or found the log already at its target
    # (``already-current``: a crash cut the redemption off the batch that moved the stage); any
    # other review closed unapplied (``closed``: its reasons) changed nothing
    closed = sorted({red.reason or "" for red in state.redeemed.values() if not red.applied})
    used = [rid for rid, red in state.redeemed.items() if red.applied or red.reason == "already-current"]
    assert len(results) == len(set(results)), "a tool call has two results"
    assert len(calls) == len(set(calls)) and set(calls) <= set(results), "a dispatched call has no result"
    entered = [m.group(1) for e in events if e.type == USER_MESSAGE
               for m in [re.match(r"Current stage: (\w+)", e.data["content"][0].get("text", ""))] if m]
    return {"state": session_state(events)[0], "users": users, "redeemed": len(used), "closed": closed,
            "entered": entered, "final": [e.data for e in events if e.type == END]}


def test_idle_session_needs_input_and_nothing_is_written() -> None:
    log = _log()
    result = _drive(log)
    assert result.state == "needs-input" and result.epoch == 0
    assert len(log.events) == 0


def test_a_message_runs_to_its_reviews_then_completes() -> None:
    log = _log()
    record_input(log, "message", "task: 7", input_id="in-1")
    first = _drive(log)
    assert first.state == "waiting-review" and first.review_id
    assert _drive(log).state == "waiting-review"  # unanswered: nothing written
    assert [e.type for e in log.events].count(CLAIM) == 1
    done = _run_to_end(log)
    assert done.state == "complete"
    assert session_state(log.events) == ("complete", None)
    users = [e for e in log.events if e.type == USER_MESSAGE and e.data.get("id") == "in-1"]
    assert len(users) == 1 and users[0].data["content"][0]["text"] == "task: 7"


def test_an_input_is_recorded_once_per_id() -> None:
    log = _log()
    a = record_input(log, "message", "task: 1", input_id="x")
    b = record_input(log, "message", "task: 1", input_id="x")
    assert a == b and len(log.events) == 1
    assert [i.id for i in fold(log.events).pending] == ["x"]
    with pytest.raises(UserError):
        record_input(log, "shout", "hi")
    with pytest.raises(UserError):
        record_input(log, "message", "a\x00b")


def test_a_driver_that_lost_its_claim_cannot_write() -> None:
    log = _log()
    old, new = FencedLog(log, "old"), FencedLog(log, "new")
    assert old.claim() == 1
    old.append("fsm/note", {"n": 1})
    assert new.claim() == 2
    before = len(log.events)
    with pytest.raises(ClaimLostError):
        old.append("fsm/note", {"n": 2})
    assert len(log.events) == before
    # caught and tried again (a loop closing its turn after the error): still refused, though
    # the newer claim was already scanned (the chaos run on PostgreSQL let the second one through)
    for _ in range(2):
        with pytest.raises(ClaimLostError, match="superseded by claim 2"):
            old.append_many([NewEvent("fsm/note", {"n": 2})], expect_last_seq=len(log.events) - 1)
    assert len(log.events) == before
    new.append("fsm/note", {"n": 3})  # the newer claim goes on, after anyone's inputs too
    record_input(log, "message", "hello")
    new.append("fsm/note", {"n": 4})
    with pytest.raises(ClaimLostError):
        FencedLog(log, "unclaimed").append("fsm/note", {})


class _ClaimAfterScan:
    """A log whose next read of ``events`` (armed by ``arm``) hands out the events as they were,
    then lets a newer driver's claim land: what another thread's refresh does between a fence's
    scan for claims and its append."""

    def __init__(self, log: MemoryLog) -> None:
        self.log, self.armed = log, False

    def arm(self) -> None:
        self.armed = True

    @property
    def events(self) -> Any:
        seen = list(self.log.events)
        if self.armed:
            self.armed = False
            self.log.append("fsm/fleet/claim", {"epoch": 99, "worker": "other"})
        return seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)

    def __len__(self) -> int:
        return len(self.log)


@pytest.mark.parametrize("conditional", [False, True])
def test_a_claim_landing_between_the_fences_scan_and_its_append_stops_the_driver(conditional: bool) -> None:
    """The fence's append is conditional on the end it checked for claims (not on the log's
    end read afterwards), so a claim that lands after the scan makes it conflict; the retry
    scans that claim and refuses. A caller's own ``expect_last_seq`` past the checked end is
    checked first."""
    log = _log()
    racing = _ClaimAfterScan(log)
    fence = FencedLog(racing, "old")
    assert fence.claim() == 1
    racing.arm()
    with pytest.raises(ClaimLostError, match="superseded by claim 99"):
        if conditional:
            fence.append_many([NewEvent("fsm/note", {"n": 1})], expect_last_seq=len(log.events))
        else:
            fence.append("fsm/note", {"n": 1})
    assert [e.type for e in log.events][-1] == "fsm/fleet/claim"  # nothing written after it


def test_a_scan_by_another_thread_between_the_check_and_the_append_lets_nothing_through() -> None:
    """The append is conditional on the end this call's own scan reached, not on the fence's
    shared scan position, which another thread's ``superseded()`` may have moved past a newer
    claim in between."""
    log = _log()

    class Interleaved(FencedLog):  # the other thread runs inside this one's check
        armed = False

        def _newest_claim(self) -> tuple[int, int]:
            seen = super()._newest_claim()
            if self.armed:
                self.armed = False
                log.append("fsm/fleet/claim", {"epoch": 99, "worker": "other"})
                assert self.superseded()
            return seen

    fence = Interleaved(log, "old")
    fence.claim()
    fence.armed = True
    with pytest.raises(ClaimLostError, match="superseded by claim 99"):
        fence.append("fsm/note", {"n": 1})
    assert [e.type for e in log.events][-1] == "fsm/fleet/claim"


def test_a_claim_landing_while_the_fence_claims_is_outbid_not_skipped() -> None:
    """``claim()`` appends conditionally on the end it scanned for the highest epoch: a claim
    landing after the scan makes it conflict, and the retry claims above it."""
    log = _log()
    racing = _ClaimAfterScan(log)
    racing.arm()
    fence = FencedLog(racing, "new")
    assert fence.claim() == 100
    fence.append("fsm/note", {"n": 1})
    assert [e.data.get("epoch") for e in log.events if e.type == "fsm/fleet/claim"] == [99, 100]


def _finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: int) -> tuple[MemoryLog, Path]:
    """A session given ``task: N`` (input ``in-N``) and driven to its end, every review approved;
    the host tool's effects are recorded in ``tmp_path/effects.jsonl`` (returned too)."""
    effects = tmp_path / "effects.jsonl"
    monkeypatch.setenv("FLEET_EFFECTS", str(effects))
    log = _log()
    record_input(log, "message", f"task: {task}", input_id=f"in-{task}")
    _run_to_end(log)
    return log, effects


def test_a_dispatched_host_call_cut_short_is_outcome_unknown(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    log, effects = _finished(tmp_path, monkeypatch, 9)
    events = log.events
    call_seq = next(e.seq for e in events if e.type == TOOL_CALL and e.data["name"] == "apply")
    crashed = _copy(events, call_seq + 1)  # the tool ran, its result was never written
    _run_to_end(crashed)
    unknown = [e for e in crashed.events if e.type == TOOL_RESULT and e.data.get("error", {}).get("code")
               == "TOOL_OUTCOME_UNKNOWN"]
    assert len(unknown) == 1
    assert unknown[0].data["message"]["source"]["callId"] == events[call_seq].data["callId"]
    assert not [e for e in crashed.events if e.type == TOOL_RESULT
                and e.data.get("error", {}).get("code") == "TOOL_NOT_STARTED"]
    keys = [json.loads(line)["key"] for line in effects.read_text().splitlines()]
    assert keys[0] == f"s1/{events[call_seq].data['callId']}"
    assert all(k.startswith("s1/") for k in keys)
    assert session_state(crashed.events)[0] == "complete"


def test_a_crash_after_any_append_ends_as_the_uninterrupted_run(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    log, effects = _finished(tmp_path, monkeypatch, 5)
    want = _summary(log)
    assert want["state"] == "complete" and want["users"] == ["in-5"] and want["redeemed"] == 2
    assert want["entered"] == ["plan", "build", "done"]  # each approved transition once
    assert want.pop("closed") == []
    for cut in range(1, len(log.events)):
        crashed = _copy(log.events, cut)
        _run_to_end(crashed)
        got = _summary(crashed)
        assert set(got.pop("closed")) <= CRASH_CLOSED, f"crash after event {cut - 1}"
        assert got == want, f"crash after event {cut - 1}"
    tasks = {json.loads(line)["task"] for line in effects.read_text().splitlines()}
    assert tasks == {"5"}  # no turn ran without its task (a turn cut before any work is not continued)


def test_session_ids_are_checked() -> None:
    assert check_session_id("a-b.c_1") == "a-b.c_1"
    for bad in ("", ".hidden", "a/b", "x" * 129, "nul\x00", 7):
        with pytest.raises(UserError):
            check_session_id(bad)


def test_listing_a_folder_uses_its_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsm_stage.fleet.listing import list_sessions
    from fsm_stage.log import locations

    store = Store(tmp_path)
    for sid, text in (("a", "task: 1"), ("b", None)):
        log = store.open(sid, create=SessionHeader(sid, cwd=str(tmp_path)))
        if text:
            record_input(log, "message", text)
            asyncio.run(drive(log, graph=GRAPH, model=fleet_model.model(), tools=fleet_model.tools()))
        log.close()
    infos = {i.id: i for i in list_sessions(tmp_path)}
    assert infos["a"].state == "waiting-review" and infos["a"].review_id
    assert infos["b"].state == "needs-input"
    assert [i.id for i in list_sessions(tmp_path, states=["waiting-review"])] == ["a"]
    reads: list[object] = []
    real = locations.read_location
    monkeypatch.setattr(locations, "read_location", lambda *a, **k: reads.append(a) or real(*a, **k))
    assert [i.to_json() for i in list_sessions(tmp_path)] == [i.to_json() for i in infos.values()]
    assert reads == []  # nothing changed: the checkpoint answered
    with pytest.raises(UserError):
        list_sessions(tmp_path, states=["sleeping"])


def test_a_turn_cancelled_under_its_driver_is_continued_like_a_crashed_one() -> None:
    log = _log()
    record_input(log, "message", "task: 3", input_id="in-3")
    FencedLog(log, "w").claim()
    log.append("turn/start", {"turn": 1})
    log.append("step/start", {"turn": 1, "step": 1})
    text = [{"type": "text", "text": "task: 3"}]
    log.append("user/message", {"id": "in-3", "role": "user", "content": text, "source": {"kind": "user"}},
               surface_op="append")
    log.append("step/end", {"turn": 1, "step": 1})
    log.append("turn/end", {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "cancelled"}}})
    assert session_state(log.events) == ("queued", None)
    assert _run_to_end(log).state == "complete"


class _WorkerDied(BaseException):
    """Raised inside a model call; the log is then cut back to what a worker SIGKILLed there
    leaves (the loop's own ``step/end`` + ``turn/end {kind: error}`` dropped)."""


class _DyingModel(fleet_model.FleetModel):
    async def complete(self, request: Any, *, signal: Any) -> Any:
        raise _WorkerDied


@pytest.mark.parametrize("limit", [1, 2, 4])
def test_a_run_fails_after_max_interrupted_crashed_turns_in_a_row(limit: int) -> None:
    """A turn that kills every worker driving it is repaired as ``interrupted`` and driven
    again until ``max_interrupted`` turns in a row ended so; then the run ends ``failed``,
    saying why, and stays failed."""
    log = _log()
    record_input(log, "message", "task: 5", input_id="in-5")
    crashes = 0
    while True:
        try:
            result = asyncio.run(drive(log, graph=GRAPH, model=_DyingModel(), max_interrupted=limit))
        except _WorkerDied:
            crashes += 1
            assert [e.type for e in log.events[-2:]] == [STEP_END, TURN_END]
            log = _copy(log.events, len(log.events) - 2)
            continue
        break
    assert crashes == limit
    assert result.state == "failed" and result.message == f"{limit} turns in a row were interrupted or failed"
    assert session_state(log.events)[0] == "failed"
    assert [e.data["reason"]["kind"] for e in log.events if e.type == TURN_END] == ["interrupted"] * limit


def test_the_worker_cli_default_is_the_library_default() -> None:
    from fsm_stage.cli.fleet_cmds import worker
    from fsm_stage.fleet.drive import MAX_INTERRUPTED
    option = next(p for p in worker.params if p.name == "max_interrupted")
    assert option.default == MAX_INTERRUPTED


class _FlakyModel(fleet_model.FleetModel):
    """Fails its first ``fails`` requests the way a dropped database or API connection does."""

    def __init__(self, fails: int) -> None:
        self.fails = fails

    async def complete(self, request: Any, *, signal: Any) -> Any:
        if self.fails:
            self.fails -= 1
            raise ConnectionError("the server closed the connection")
        return await super().complete(request, signal=signal)


def test_a_turn_an_exception_ended_is_continued_not_left_waiting_for_input() -> None:
    """An exception escaping a turn after it started work ends it ``error`` (the loop never
    leaves a turn open); the next drive owes it a continuation, as after a crash, instead of
    reporting ``needs-input`` with the user's task half done."""
    log = _log()
    record_input(log, "message", "task: 5", input_id="in-5")
    model = _FlakyModel(1)
    with pytest.raises(ConnectionError):
        asyncio.run(drive(log, graph=GRAPH, model=model, tools=fleet_model.tools()))
    assert [e.data["reason"]["kind"] for e in log.events if e.type == TURN_END] == ["error"]
    assert session_state(log.events)[0] == "queued"
    result = asyncio.run(drive(log, graph=GRAPH, model=model, tools=fleet_model.tools()))
    assert result.state == "waiting-review"
    for _ in range(4):
        if result.state != "waiting-review":
            break
        record_answer(log, result.review_id, "approve")
        result = asyncio.run(drive(log, graph=GRAPH, model=model, tools=fleet_model.tools()))
    assert result.state == "complete"
    assert _summary(log)["users"] == ["in-5"] and _summary(log)["entered"] == ["plan", "build", "done"]


def test_listing_a_folder_that_does_not_exist_says_so(tmp_path: Path) -> None:
    from fsm_stage.fleet.listing import list_sessions

    with pytest.raises(UserError, match="no such folder"):
        list_sessions(tmp_path / "nowhere")


def test_the_worker_refuses_a_graph_guard_without_a_value(tmp_path: Path) -> None:
    """`fsm-stage worker` on a graph with guards needs `--guard NAME=true|false` for each: a
    guard without a value would close its edge silently in every session."""
    from click.testing import CliRunner

    from fsm_stage.cli import main
    from fsm_stage.resources import data_dir

    pytest.importorskip("dbos")
    graph = str(data_dir("stage_graphs") / "feature-work.yaml")
    base = ["worker", "--graph", graph, "--store", str(tmp_path / "s"), "--model", "fleet_model:model"]
    missing = CliRunner().invoke(main, base)
    assert missing.exit_code == 1 and "--guard tests_written=true|false" in missing.stderr
    bad = CliRunner().invoke(main, [*base, "--guard", "tests_written=maybe"])
    assert bad.exit_code == 2 and "expected NAME=true or NAME=false" in bad.stderr
    assert not (tmp_path / "s").exists()  # refused before anything was created


def test_cli_usage_mistakes_are_usage_errors() -> None:
    from click.testing import CliRunner

    from fsm_stage.cli import main
    from fsm_stage.cli.fleet_cmds import STATE_NAMES
    from fsm_stage.fleet.records import STATES

    assert (*STATES, "damaged") == STATE_NAMES  # damaged: a listing state, no fold state
    assert CliRunner().invoke(main, ["sessions", ".", "--state", "waiting"]).exit_code == 2
    assert CliRunner().invoke(main, ["answer", ".", "s1", "rv_x"]).exit_code == 2


def test_a_second_drive_in_the_process_of_a_live_turn_is_busy_not_a_spin() -> None:
    """Driver A of this process awaits its model with the turn open; driver B (same process,
    newer claim) cannot close A's live turn: it returns control as busy at once instead of
    looping without ever yielding the event loop (which stopped A and every other session)."""
    from fsm_stage.errors import LogLockedError

    log = _log()
    record_input(log, "message", "task: 1", input_id="in-1")
    gate: asyncio.Event | None = None

    class Slow(fleet_model.FleetModel):  # type: ignore[misc]
        async def complete(self, request: Any, *, signal: Any) -> Any:
            assert gate is not None
            await gate.wait()
            return await super().complete(request, signal=signal)

    async def both() -> tuple[BaseException | None, object]:
        nonlocal gate
        gate = asyncio.Event()
        a = asyncio.create_task(drive(log, graph=GRAPH, model=Slow(), tools=fleet_model.tools(), worker="A"))
        for _ in range(50):
            await asyncio.sleep(0)
        busy: BaseException | None = None
        try:
            await asyncio.wait_for(drive(log, graph=GRAPH, model=fleet_model.model(),
                                         tools=fleet_model.tools(), worker="B"), 10)
        except LogLockedError as exc:
            busy = exc
        gate.set()
        return busy, (await asyncio.gather(a, return_exceptions=True))[0]

    busy, first = asyncio.run(both())
    assert busy is not None and "being run by another loop of this process" in str(busy)
    assert isinstance(first, ClaimLostError)  # A's next append met B's claim
    assert _run_to_end(log).state == "complete"  # the next drive closes A's turn and goes on


def test_a_superseded_driver_tripping_on_the_newer_ones_events_reports_the_lost_claim(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver whose own checks fail on the newer driver's events (before any append of its
    own is refused) ends with ``ClaimLostError``, not a session error the workflow would count
    toward failing the run; an error with no newer claim stays what it was."""
    log = _log()
    record_input(log, "message", "task: 2", input_id="in-2")

    class Tripping(fleet_model.FleetModel):  # type: ignore[misc]
        async def complete(self, request: Any, *, signal: Any) -> Any:
            FencedLog(log, "newer").claim()
            raise ValueError("the step already has a reply")

    with pytest.raises(ClaimLostError, match=r"superseded \(ValueError: the step already has a reply\)"):
        asyncio.run(drive(log, graph=GRAPH, model=Tripping(), tools=fleet_model.tools(), worker="old"))

    class Failing(fleet_model.FleetModel):  # type: ignore[misc]
        async def complete(self, request: Any, *, signal: Any) -> Any:
            raise ValueError("model down")

    other = _log("s2")
    record_input(other, "message", "task: 3", input_id="in-3")
    with pytest.raises(ValueError, match="model down"):  # no newer claim: the error stands
        asyncio.run(drive(other, graph=GRAPH, model=Failing(), tools=fleet_model.tools()))


def test_failing_a_run_claims_first_so_a_running_driver_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fsm/fleet/end {failed}`` is written under a claim of its own: a driver still mid-turn
    is refused at its next append instead of writing on after the end."""
    pytest.importorskip("dbos")
    from fsm_stage.fleet import workflows

    log = _log()
    running = FencedLog(log, "B")
    running.claim()
    running.append("turn/start", {"turn": 1})

    class App:
        worker = "failer"

        class store:
            @staticmethod
            def open(_session: str) -> MemoryLog:
                return log

    monkeypatch.setattr(workflows, "_app", lambda: App)
    step = getattr(workflows._fail_step, "__wrapped__", workflows._fail_step)
    assert asyncio.run(step("s1", "8 errors in a row")) is True
    assert [e.type for e in log.events][-2:] == [CLAIM, END]
    with pytest.raises(ClaimLostError):
        running.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def test_a_crash_after_any_append_of_a_stage_command_still_switches_the_stage() -> None:
    """A `/stage` input applies once its command finished (``command/done``): a worker killed
    after ``command/run`` but before the stage moved no longer drops the input (the command
    runs again; a second ``/stage`` to the current stage changes nothing)."""
    from fsm_stage.integrations._host import StageHost

    def stage(log: Any) -> str | None:
        host = StageHost.open(log, graph=GRAPH, plan_mode=False)
        try:
            return host.current_stage()
        finally:
            assert host.stage is not None
            host.stage.close()

    full = _log()
    record_input(full, "stage", "build", input_id="st")
    _drive(full)
    assert stage(full) == "build" and not fold(full.events).pending
    for cut in range(2, len(full.events)):
        crashed = _copy(full.events, cut)
        _drive(crashed)
        assert stage(crashed) == "build", f"crash after {full.events[cut - 1].type}"
        assert not fold(crashed.events).pending
