"""The review fold's decision rules, each alone (docs/reviews.md tables): the first answer wins,
the first redemption wins, a redeemed review is neither open nor pending, a fork's unused reviews
are forked, an approval contradicting its request is none. Breaking any one rule in
``fsm_stage.reviews._fold`` fails its test."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from fsm_stage.log.events import Event
from fsm_stage.reviews._fold import REVIEW_FOLD, ReviewState, as_fork


def _fold(*events: tuple[str, dict[str, Any]]) -> ReviewState:
    state = REVIEW_FOLD.init()
    for seq, (kind, data) in enumerate(events):
        state = REVIEW_FOLD.apply(state, Event(type=f"fsm/review/{kind}", seq=seq, time=0, data=data))
    return state


def _request(rid: str = "rv_1", kind: str = "stage") -> tuple[str, dict[str, Any]]:
    return "request", {"id": rid, "callId": "c1", "kind": kind, "from": "explore", "target": "implement",
                       "options": ["Approve", "Keep current stage"], "payloadSha256": "ab"}


def _answer(outcome: str, rid: str = "rv_1", **more: Any) -> tuple[str, dict[str, Any]]:
    """An answer as ``answer_spec`` writes it (``more`` overrides its keys, as a hand edit would)."""
    option = {"approve": "Approve", "keep": "Keep current stage"}.get(outcome)
    return "answer", {"id": rid, "outcome": outcome, "option": option, "by": "api", **more}


def _redeemed(applied: bool, reason: str | None = None, rid: str = "rv_1") -> tuple[str, dict[str, Any]]:
    return "redeemed", {"id": rid, "applied": applied, "reason": reason}


def test_the_first_answer_wins() -> None:
    kept = _fold(_request(), _answer("keep"), _answer("approve"))
    assert kept.answered["rv_1"].outcome == "keep" and kept.pending("stage") is None
    approved = _fold(_request(), _answer("approve"), _answer("dismiss"))
    assert approved.answered["rv_1"].outcome == "approve" and approved.pending("stage") is not None


def test_the_first_redemption_wins() -> None:
    state = _fold(_request(), _answer("approve"), _redeemed(False, "stage-changed"), _redeemed(True))
    red = state.redeemed["rv_1"]
    assert (red.applied, red.reason, red.seq) == (False, "stage-changed", 2)
    state = _fold(_request(), _answer("approve"), _redeemed(True), _redeemed(False, "superseded"))
    assert state.redeemed["rv_1"].applied is True


def test_a_redeemed_review_is_neither_open_nor_pending() -> None:
    assert _fold(_request(), _redeemed(False, "forked")).open == ()
    assert _fold(_request(), _answer("approve"), _redeemed(True)).pending("stage") is None


def test_a_fork_closes_every_review_asked_before_its_seed_length() -> None:
    state = _fold(_request("rv_1"), _answer("approve", "rv_1"), _request("rv_2", "plan"),
                  _request("rv_3", "tool"))
    forked = as_fork(state, 3)  # rv_1 (approved) and rv_2 (open) are in the seed, rv_3 is not
    assert {k: (v.applied, v.reason) for k, v in forked.redeemed.items()} == {
        "rv_1": (False, "forked"), "rv_2": (False, "forked")}
    assert [r.id for r in forked.open] == ["rv_3"] and forked.pending("stage") is None
    assert as_fork(state, None) is state


def test_the_fold_appends_to_one_journal_and_old_states_never_change() -> None:
    from fsm_stage.reviews._fold import Indexed

    events = [_request(f"rv_{i}") for i in range(50)]
    state = _fold(*events)
    records = state.records
    assert isinstance(records, Indexed) and len(records) == 50
    assert len(records._journal.entries) == 50  # appended in place: no copy per review event
    older = _fold(*events[:10])
    branch = REVIEW_FOLD.apply(older, Event(type="fsm/review/request", seq=99, time=0,
                                            data={**_request("rv_x")[1]}))
    other = REVIEW_FOLD.apply(older, Event(type="fsm/review/request", seq=99, time=0,
                                           data={**_request("rv_y")[1]}))  # a second branch: copies
    assert list(older.records) == [f"rv_{i}" for i in range(10)]  # unchanged by either branch
    assert list(branch.records)[-1] == "rv_x" and len(branch.records) == 11 and "rv_y" not in branch.records
    assert list(other.records)[-1] == "rv_y" and "rv_x" not in other.records
    newest = state.by_call("c1")
    assert newest is not None and newest.id == "rv_49"  # the newest review of the call


def test_by_call_selects_by_kind_and_payload_newest_first() -> None:
    """``by_call`` (the budget gate's lookup too) finds the newest review of a call that has the
    kind and the payload asked for, without scanning other calls' reviews."""
    bound = [("request", {**_request(f"rv_{i}")[1], "payloadSha256": f"p{i % 2}"}) for i in range(6)]
    state = _fold(*bound, ("request", {**_request("rv_t", "tool")[1], "callId": "c2"}))
    assert state.by_call("c1", "stage", "p0").id == "rv_4"  # type: ignore[union-attr]
    assert state.by_call("c1", "stage", "p1").id == "rv_5"  # type: ignore[union-attr]
    assert state.by_call("c1", "stage", "p2") is None and state.by_call("c1", "tool") is None
    assert state.by_call("c2", "tool", "ab").id == "rv_t"  # type: ignore[union-attr]


class _PausingEntries(list[Any]):
    """A journal's entry list whose first ``len`` asked by thread ``first`` waits (at most
    ``wait`` seconds) for thread ``second`` to extend the same view: the interleaving that made
    two readers folding the same new events in parallel write into one journal."""

    def __init__(self, items: list[Any], started: threading.Event, done: threading.Event) -> None:
        super().__init__(items)
        self.started, self.done, self.armed = started, done, True

    def __len__(self) -> int:
        n = super().__len__()
        if self.armed and threading.current_thread().name == "first":
            self.armed = False
            self.started.set()
            self.done.wait(0.5)  # with the journal lock held, the second thread waits for us
        return n


def test_two_threads_extending_one_view_get_two_consistent_views() -> None:
    from fsm_stage.reviews._fold import Indexed

    base: Indexed[str] = Indexed.of({"r0": "zero"}, call_of=lambda v: "c0")
    started, done = threading.Event(), threading.Event()
    base._journal.entries = _PausingEntries(base._journal.entries, started, done)
    views: dict[str, Indexed[str]] = {}

    def extend(name: str) -> None:
        if name == "second":
            started.wait(5)
        try:
            views[name] = base.added("r1", name, "c1")
        finally:
            if name == "second":
                done.set()

    threads = [threading.Thread(target=extend, args=(n,), name=n) for n in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for name, view in views.items():
        assert list(view.items()) == [("r0", "zero"), ("r1", name)]
        assert list(view.by_call("c1")) == [name] and list(view.by_call("c0")) == ["zero"]
    assert set(views) == {"first", "second"} and list(base) == ["r0"]


def test_a_checkpointed_state_loads_equal_to_the_folded_one() -> None:
    """``dump`` → JSON → ``load`` gives the state the fold gave: the same records, answers
    (``reviewers`` a tuple again, not the JSON list), redemptions and live reviews."""
    import json

    from fsm_stage.reviews._fold import stage_payload_sha256

    full = _request("rv_1")
    full[1].update(shape="full", handoffPath="handoff/s/implement.md")
    approve = ("answer", {"id": "rv_1", "outcome": "approve", "option": "Approve", "by": "inbox",
                          "reviewers": ["al", "bo"], "edited": "# H",
                          "editedSha256": stage_payload_sha256("implement", "# H")})
    state = _fold(full, approve, _request("rv_2", "plan"), _answer("keep", "rv_2"),
                  _request("rv_3", "tool"), _redeemed(False, "forked", "rv_3"), _request("rv_4"))
    loaded = REVIEW_FOLD.load(json.loads(json.dumps(REVIEW_FOLD.dump(state))))
    for field in ("records", "answered", "redeemed"):
        assert dict(getattr(loaded, field)) == dict(getattr(state, field)), field
    assert loaded.answered["rv_1"].reviewers == ("al", "bo")
    assert hash(loaded.answered["rv_1"]) == hash(state.answered["rv_1"])
    assert loaded.live == state.live == ("rv_1", "rv_4")
    assert [r.id for r in loaded.open] == ["rv_4"] and loaded.pending("stage") == state.pending("stage")


@pytest.mark.parametrize(("changed", "why"), [
    ({"option": "Keep current stage"}, "is not an approve option"),
    ({"option": "Yes please"}, "is not an approve option"),
    ({"option": None}, "is not an approve option"),
    ({"shape": "huge"}, "is not the one its option makes"),
    ({"shape": "light"}, "is not the one its option makes"),  # the request asked a full switch
    ({"edited": "# Other", "editedSha256": "0" * 64}, "its editedSha256 does not match"),
    ({"edited": "# Other"}, "its editedSha256 does not match"),
    ({"editedSha256": "0" * 64}, "not an edited document this review can take"),
    ({"outcome": "Approve"}, "'Approve' is no review outcome"),
    ({"outcome": "approve ", "edited": "# Forged", "editedSha256": "0" * 64}, "is no review outcome"),
])
def test_an_approval_that_contradicts_its_request_is_no_approval(changed: dict[str, Any], why: str) -> None:
    """What no answer writer logs (a hand-edited or forged log) fails closed: the review is
    closed as not approved, and ``by`` says why."""
    request = _request()
    request[1].update(shape="full", handoffPath="handoff/s/implement.md")
    answer_event = _answer("approve")
    state = _fold(request, (answer_event[0], {**answer_event[1], **changed}))
    answer = state.answered["rv_1"]
    assert answer.outcome == "dismiss" and state.pending("stage") is None and not state.open
    assert answer.by.startswith("api (not an approval: ") and why in answer.by
    good = _fold(request, _answer("approve", shape="full"))
    assert good.pending("stage") is not None
    keep_conversation = _fold((request[0], {**request[1], "options": [
        "Approve", "Approve and keep the conversation", "Keep current stage"]}),
        _answer("approve", option="Approve and keep the conversation", shape="light"))
    assert keep_conversation.pending("stage") is not None
