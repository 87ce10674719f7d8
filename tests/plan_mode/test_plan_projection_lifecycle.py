"""Disposal, the ``plan`` projection, the invariant and B114."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plan_helpers import PLAN, Harness, run

from fsm_stage.constants import (
    COMMAND_DONE,
    COMMAND_RUN,
    EXIT_PLAN_MODE,
    PLAN_MODE_EVENT,
    PLAN_POLICY_SECTION,
    PLAN_PROJECTION_STATE_VERSION,
    TURN_START,
)
from fsm_stage.errors import RecordShapeError
from fsm_stage.log.checkpoints import CheckpointStore, cold_fold
from fsm_stage.log.events import Event, MemoryLog, SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import PlanView
from fsm_stage.plan_mode import PLAN_PROJECTION_KEY, PLAN_SERVICE, PlanModeController
from fsm_stage.reviews import ScriptedReviewChannel
from fsm_stage.runtime.runtime import Runtime
from fsm_stage.runtime.session import Session

# --- disposal ------------------------------------------------------------------------------------


def test_close_unregisters_everything_at_once_B93() -> None:
    """B93: after close the service handle, exit tool, plan:policy and pre-step hook are gone."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    assert h.runtime.service(PLAN_SERVICE) is h.plan
    assert PLAN_POLICY_SECTION in h.runtime.section_names and EXIT_PLAN_MODE in h.runtime.tools
    h.plan.close()
    assert h.runtime.service(PLAN_SERVICE) is None
    assert EXIT_PLAN_MODE not in h.runtime.tools
    assert PLAN_POLICY_SECTION not in h.runtime.section_names
    assert h.runtime.assemble(h.agent).system == ""
    assert h.plan.closed is True
    h.plan.close()  # idempotent


def test_queued_selection_never_flushed_after_close_B94() -> None:
    """B94: a selection queued before close is never flushed by later pre-steps."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.plan.close()
    h.boundary()
    h.plan.on_pre_step(h.agent, [], False)  # even a direct call does nothing
    assert h.plan_events() == []


# --- projection ------------------------------------------------------------------------------------


def _view(h: Harness) -> dict[str, bool]:
    assert h.runtime.projections is not None
    result: dict[str, bool] = h.runtime.projections.view(h.session, PLAN_PROJECTION_KEY)
    return result


def test_projection_registered_only_with_a_registry_B95() -> None:
    """B95: without a projection registry nothing is registered and the controller works; with
    one, the unit is under key `plan`."""
    h = Harness(projections=False)
    assert h.runtime.projections is None
    assert h.plan.set(h.agent, True) == "committed"
    projections = Harness().runtime.projections
    assert projections is not None and projections.keys == (PLAN_PROJECTION_KEY,)


def test_empty_log_view_and_only_key_B96() -> None:
    """B96: empty log → {active: false, pending: false}; `plan` is the only key contributed."""
    h = Harness()
    assert h.runtime.projections is not None
    assert h.runtime.projections.snapshot(h.session) == {"plan": {"active": False, "pending": False}}


def _run(h: Harness, cid: str, args: str | None, name: str = "plan") -> None:
    data: dict[str, Any] = {"commandId": cid, "name": name, "source": {"kind": "user"}}
    if args is not None:
        data["args"] = args
    h.log.append(COMMAND_RUN, data)


def _done(h: Harness, cid: str, kind: str = "success") -> None:
    h.log.append(COMMAND_DONE, {"commandId": cid, "kind": kind, "text": "t"})


def test_selection_pending_until_recorded_B97() -> None:
    """B97: /plan run → pending; its success done → still pending; plan/mode → recorded."""
    h = Harness()
    _run(h, "c1", "")
    assert _view(h) == {"active": False, "pending": True}
    _done(h, "c1")
    assert _view(h) == {"active": False, "pending": True}
    h.open_turn()
    h.log.append(PLAN_MODE_EVENT, {"active": True})
    assert _view(h) == {"active": True, "pending": False}


def test_error_settled_command_drops_selection_B98() -> None:
    """B98: with plan mode on, /plan off run → pending; its error done → not pending."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    _run(h, "c1", "off")
    assert _view(h) == {"active": True, "pending": True}
    _done(h, "c1", "error")
    assert _view(h) == {"active": True, "pending": False}
    # through the real command: /plan off with images cannot leave a pending exit
    image = {"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png",
                                             "bytes": 1, "width": 1, "height": 1}}
    reply = run(h.runtime.run_command(h.agent, "/plan off", (image,)))
    assert reply is not None and reply.kind == "error"
    assert _view(h) == {"active": True, "pending": False}


def test_off_args_other_commands_and_matching_selection_B99() -> None:
    """B99: another command, an args-less /plan, ` off` (trimmed), plan/mode, then /plan off
    matching the logged state."""
    h = Harness(events=[(PLAN_MODE_EVENT, {"active": True})])
    _run(h, "c0", " x", name="compact")
    assert _view(h) == {"active": True, "pending": False}
    _run(h, "c1", None)
    assert _view(h) == {"active": True, "pending": False}
    _run(h, "c2", " off")
    assert _view(h) == {"active": True, "pending": True}
    h.log.append(PLAN_MODE_EVENT, {"active": False})
    assert _view(h) == {"active": False, "pending": False}
    _run(h, "c3", "off")
    assert _view(h) == {"active": False, "pending": False}


def test_message_argument_targets_plan_mode_B100() -> None:
    """B100: `/plan sketch the refactor first` targets active."""
    h = Harness()
    _run(h, "c1", " sketch the refactor first")
    assert _view(h) == {"active": False, "pending": True}


def test_close_drops_the_key_and_reattach_serves_fresh_view_B101() -> None:
    """B101: closing removes `plan` from snapshots; a later controller serves the default view."""
    h = Harness()
    assert h.runtime.projections is not None
    h.plan.close()
    assert "plan" not in h.runtime.projections.snapshot(h.session)
    PlanModeController({"section": "x"}).attach(h.runtime)
    assert h.runtime.projections.snapshot(h.session) == {"plan": {"active": False, "pending": False}}


def test_cold_replay_from_log_alone_B102() -> None:
    """B102: replaying only command/run, command/done and plan/mode events into a fresh
    registry gives the same view; no controller memory involved."""
    h = Harness()
    run(h.runtime.run_command(h.agent, "/plan"))  # idle: commits; view settles
    h2 = Harness()
    h2.open_turn()
    run(h2.runtime.run_command(h2.agent, "/plan"))  # open turn: lone /plan pending
    for source in (h, h2):
        kept = [e for e in source.log.events if e.type in (COMMAND_RUN, COMMAND_DONE, PLAN_MODE_EVENT)]
        fresh = Runtime()
        fresh.add_projection("plan", PlanView())
        replay = Session(MemoryLog(SessionHeader("replay")))
        for e in kept:
            replay.append(e.type, e.data)
        assert fresh.projections is not None
        assert fresh.projections.view(replay, "plan") == _view(source)
    assert _view(h2) == {"active": False, "pending": True}


def test_reducer_contract_and_checkpoint_version_B103(tmp_path: Path) -> None:
    """B103: R0–R5 return the same object for irrelevant events, the state is plain JSON, the
    version is 2, and a checkpoint row from another version is dropped and refolded."""
    unit = PlanView()
    assert unit.STATE_VERSION == PLAN_PROJECTION_STATE_VERSION == 2
    state = unit.init()
    irrelevant = (Event(TURN_START, 0, 0, {"turn": 1}),
                  Event(COMMAND_RUN, 1, 0, {"commandId": "c", "name": "plan"}),
                  Event(COMMAND_DONE, 2, 0, {"commandId": "zz", "kind": "success"}))
    for ev in irrelevant:
        assert unit.apply(state, ev) is state
    moved = unit.apply(state, Event(COMMAND_RUN, 3, 0, {"commandId": "c", "name": "plan", "args": ""}))
    assert json.loads(json.dumps(unit.dump(moved))) == unit.dump(moved)
    assert unit.load(unit.dump(moved)) == moved

    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=SessionHeader("cp", created_at=1)) as log:
        log.append(COMMAND_RUN, {"commandId": "c1", "name": "plan", "args": "", "source": {"kind": "user"}})
    store = CheckpointStore(tmp_path / "cp")
    first = cold_fold(path, [unit], store=store)
    assert cold_fold(path, [unit], store=store).resumed_from is not None  # a valid row is used
    ck_file = store.path_for(path)
    raw = json.loads(ck_file.read_text())
    raw["rows"]["plan"]["ver"] = 1
    ck_file.write_text(json.dumps(raw))
    again = cold_fold(path, [unit], store=store)
    assert again.resumed_from is None
    expected = {"active": False, "pending": True}
    assert unit.view(again.states["plan"]) == unit.view(first.states["plan"]) == expected


def test_direct_set_and_approved_exit_invisible_to_projection_B104() -> None:
    """B104: set() and an approved exit never show as pending; only the plan/mode does."""
    h = Harness(review=ScriptedReviewChannel().approve())
    h.open_turn()
    h.plan.set(h.agent, True)
    assert h.get == {"active": False, "pending": True}
    assert _view(h) == {"active": False, "pending": False}
    h.boundary()
    assert _view(h) == {"active": True, "pending": False}
    run(h.plan.exit_plan_mode({"plan": PLAN}, h.agent))
    assert h.get == {"active": True, "pending": False} and _view(h) == {"active": True, "pending": False}
    h.boundary()
    assert _view(h) == {"active": False, "pending": False}


# --- invariant -------------------------------------------------------------------------------------


def test_boolean_states_accepted_inside_a_turn_B105() -> None:
    """B105: plan/mode true and false are accepted, including inside a turn."""
    h = Harness()
    h.open_turn()
    h.session.append(PLAN_MODE_EVENT, {"active": True})
    h.session.append(PLAN_MODE_EVENT, {"active": False})
    assert h.plan_events() == [True, False]


def test_standalone_state_between_turns_accepted_B106() -> None:
    """B106: a plan/mode outside any turn (the idle commit) is accepted."""
    h = Harness()
    h.session.append(PLAN_MODE_EVENT, {"active": True})
    assert PlanModeController.check_event(h.log.events[-1]) is None


@pytest.mark.parametrize(("data", "shown"), [({"active": 42}, "42"), ({"active": "plan"}, '"plan"'),
                                             ({}, "undefined")])
def test_non_boolean_state_rejected_B107(data: dict[str, Any], shown: str) -> None:
    """B107: active 42, "plan" or missing is rejected, showing the value as JSON; the append is
    refused and the log unchanged."""
    h = Harness()
    n = len(h.log)
    with pytest.raises(RecordShapeError) as err:
        h.session.append(PLAN_MODE_EVENT, data)
    assert "boolean" in str(err.value) and str(err.value).endswith(shown)
    assert len(h.log) == n


def test_unrelated_events_ignored_B108() -> None:
    """B108: unrelated events (a tools-changed notice, turn/start) are ignored."""
    for ev in (Event("tools/changed", 0, 0, {"active": 42}), Event(TURN_START, 1, 0, {"turn": 1})):
        assert PlanModeController.check_event(ev) is None


def test_late_installation_rejects_invalid_existing_state_B109() -> None:
    """B109: installing over a session that already holds plan/mode{active: "plan"} fails with
    the boolean message and leaves nothing registered."""
    log = MemoryLog(SessionHeader("old"))
    log.append(PLAN_MODE_EVENT, {"active": "plan"})
    runtime = Runtime()
    session = Session(log)  # tracked weakly: the agent holds it in real use
    runtime.track(session)
    ctl = PlanModeController({"section": "x"})
    with pytest.raises(RecordShapeError, match="boolean"):
        ctl.attach(runtime)
    assert runtime.service(PLAN_SERVICE) is None and runtime.tools == {}
    assert runtime.commands is not None and runtime.commands.specs == []


@pytest.mark.parametrize("enclosed", [True, False])
def test_late_installation_over_valid_state_B110(enclosed: bool) -> None:
    """B110: late installation over valid existing plan/mode succeeds, inside a turn or not."""
    log = MemoryLog(SessionHeader("old"))
    if enclosed:
        log.append(TURN_START, {"turn": 1})
    log.append(PLAN_MODE_EVENT, {"active": True})
    if enclosed:
        log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    runtime = Runtime()
    session = Session(log)
    runtime.track(session)
    PlanModeController({"section": "x"}).attach(runtime)
    assert runtime.service(PLAN_SERVICE) is not None


def test_sessions_after_installation_scanned_and_appends_validated_B111() -> None:
    """B111: a session tracked after installation is scanned in full; every later append is
    validated."""
    runtime = Runtime()
    PlanModeController({"section": "x"}).attach(runtime)
    bad = MemoryLog(SessionHeader("bad"))
    bad.append(PLAN_MODE_EVENT, {"active": 1})
    with pytest.raises(RecordShapeError):
        runtime.track(Session(bad))
    good = Session(MemoryLog(SessionHeader("good")))
    runtime.track(good)
    good.append(PLAN_MODE_EVENT, {"active": False})
    with pytest.raises(RecordShapeError):
        good.append(PLAN_MODE_EVENT, {"active": None})
    assert len(good) == 1


def test_selection_after_last_pre_step_is_memory_only_B114() -> None:
    """B114: a selection made after a turn's last accepted pre-step lives only in memory: a
    new process (a fresh controller over the same log) has lost it."""
    h = Harness()
    h.open_turn()
    h.plan.set(h.agent, True)
    h.close_turn()
    assert h.get == {"active": False, "pending": True}
    h.plan.close()  # the process exits
    runtime = Runtime()
    restarted = PlanModeController({"section": "x"})
    restarted.attach(runtime)
    assert restarted.get(h.agent).to_json() == {"active": False}
    h.open_turn(2)
    runtime.pre_step(h.agent, [])
    assert h.plan_events() == []


def test_closed_controller_refuses_new_selections_and_reviews() -> None:
    """After close, set() raises (a selection could never be flushed) and a direct exit call
    fails with the reload error without asking anyone (B88 wording, B93)."""
    review = ScriptedReviewChannel().approve()
    h = Harness(review=review, events=[(PLAN_MODE_EVENT, {"active": True})])
    h.plan.close()
    with pytest.raises(RuntimeError, match="closed"):
        h.plan.set(h.agent, False)
    from fsm_stage.runtime.tools import ToolFailure

    with pytest.raises(ToolFailure):
        run(h.plan.exit_plan_mode({"plan": PLAN}, h.agent))
    assert review.requests == [] and h.plan_events() == [True]
