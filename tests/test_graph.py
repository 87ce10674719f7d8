"""Compiled stage graphs (fsm_stage.graph): one shared transitions machine, cursors, guards,
durable-first commits, user jumps, plan mode and fingerprints (docs/architecture.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest
import transitions
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig, normalised
from fsm_stage.graph import (
    PLAN_DEFAULT,
    PLAN_ENTER,
    PLAN_EXIT,
    PLAN_LEAVE,
    PLAN_STATE,
    CompiledGraph,
    Refusal,
    StageCursor,
    UnknownStageError,
    clear_cache,
    compile_graph,
    compile_plan_mode,
    fingerprint,
    goto,
)


def feature_work(**changes: object) -> GraphConfig:
    """explore -> implement (guard has_plan) -> verify; verify -> any (targets omitted)."""
    config = GraphConfig(
        name="feature-work",
        section="Stage << stage_current >>; next: << stage_targets >>",
        stages=(
            StageConfig("explore", "Explore.", (EdgeConfig("implement", ("has_plan",)),)),
            StageConfig("implement", "Implement.", (EdgeConfig("verify"), EdgeConfig("explore"))),
            StageConfig("verify", "Verify.", None),
        ),
    )
    return attrs.evolve(config, **changes)


def always(_: tuple[str, ...]) -> bool:
    return True


class Recorder:
    """A commit callable that records the cursor's state at the time it runs."""

    def __init__(self, cursor: StageCursor, fail: bool = False) -> None:
        self.cursor, self.fail, self.seen = cursor, fail, []

    def __call__(self) -> None:
        self.seen.append(self.cursor.state)
        if self.fail:
            raise OSError("disk full")


@pytest.fixture
def graph() -> CompiledGraph:
    return compile_graph(feature_work())


TESTED_TRANSITIONS = "0.9."
"""The ``transitions`` series ``fsm_stage.graph``'s wrappers are written and tested against."""

UPGRADE_HINT = (
    "fsm_stage.graph relies on transitions internals (Event.transitions is a defaultdict(list) of "
    "source -> [Transition] that _add_transitions fills and _GotoTransitions replaces; "
    "Transition.conditions; EventData.transition) and is tested against {tested}x only; "
    "installed: {installed}. Re-check graph._add_transitions/_GotoTransitions against the new "
    "release, then widen the pin in pyproject.toml and TESTED_TRANSITIONS here."
)


def test_pinned_transitions_version() -> None:
    """The wrappers are tested against transitions 0.9.x (pyproject pins >=0.9.3,<0.10): any
    other installed version fails here first, with a message saying what to re-check."""
    from importlib.metadata import version

    installed = version("transitions")
    hint = UPGRADE_HINT.format(tested=TESTED_TRANSITIONS, installed=installed)
    assert transitions.__version__.startswith(TESTED_TRANSITIONS), hint
    assert installed.startswith(TESTED_TRANSITIONS), hint


def test_transitions_internals_the_graph_relies_on(graph: CompiledGraph) -> None:
    """The shapes ``_add_transitions`` / ``_GotoTransitions`` assume, checked on a plain machine
    (what transitions builds itself) and on a compiled graph (what fsm_stage puts there)."""
    from collections import defaultdict

    from transitions import Machine
    from transitions.core import Condition, Event, EventData, Transition

    from fsm_stage.graph import _GotoTransitions

    hint = UPGRADE_HINT.format(tested=TESTED_TRANSITIONS, installed=transitions.__version__)
    plain = Machine(model=None, states=["a", "b"], initial="a", auto_transitions=False)
    plain.add_transition("go", "a", "b", conditions=[lambda **_: True])
    event = plain.events["go"]
    assert type(event.transitions) is defaultdict and event.transitions.default_factory is list, hint
    (made,) = event.transitions["a"]
    assert isinstance(made, Transition) and isinstance(made.conditions, list), hint
    assert all(isinstance(c, Condition) for c in made.conditions), hint
    assert "transition" in EventData(None, None, None, None, (), {}).__dict__, hint
    assert plain.event_cls is Event and plain.transition_cls is Transition, hint
    assert Transition.condition_cls is Condition, hint
    compiled = graph.machine.events[goto("explore")].transitions  # verify (targets omitted) -> explore
    assert isinstance(compiled, _GotoTransitions) and isinstance(compiled, defaultdict), hint


def test_machine_is_built_read_only_and_unattached(graph: CompiledGraph) -> None:
    m = graph.machine
    assert m.models == []
    assert m.auto_transitions is False
    assert m.send_event is True
    assert m.has_queue is False
    assert graph.states == ("explore", "implement", "verify")
    assert graph.initial == "explore"
    assert not any(name.startswith("to_") for name in m.events)


def test_model_edges_become_goto_triggers(graph: CompiledGraph) -> None:
    assert graph.triggers("explore") == (goto("implement"),)
    assert set(graph.triggers("implement")) == {goto("verify"), goto("explore")}
    # targets omitted: every other stage, in configured order
    assert graph.triggers("verify") == (goto("explore"), goto("implement"))
    assert [e.target for e in graph.edges_from("verify")] == ["explore", "implement"]


def test_fire_commits_before_the_state_changes(graph: CompiledGraph) -> None:
    """Durable first: commit() runs after the guards pass and sees the old state."""
    cursor = graph.new_cursor()
    commit = Recorder(cursor)
    assert graph.fire(cursor, goto("implement"), eligible=always, approval="implement", commit=commit)
    assert commit.seen == ["explore"]
    assert cursor.state == "implement"


def test_failed_commit_leaves_state_unchanged_and_propagates(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor("implement")
    commit = Recorder(cursor, fail=True)
    with pytest.raises(OSError, match="disk full"):
        graph.fire(cursor, goto("verify"), approval="verify", commit=commit)
    assert cursor.state == "implement"
    assert commit.seen == ["implement"]


def test_missing_commit_is_a_programming_error_with_state_unchanged(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor("implement")
    with pytest.raises(TypeError, match="commit="):
        graph.fire(cursor, goto("verify"), approval="verify")
    assert cursor.state == "implement"
    assert graph.fire(cursor, goto("verify"), approval="verify", commit=None)
    assert cursor.state == "verify"


def test_refused_guard_commits_nothing(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor("implement")
    commit = Recorder(cursor)
    assert not graph.fire(cursor, goto("verify"), approval="explore", commit=commit)
    assert not graph.fire(cursor, goto("verify"), approval=None, commit=commit)
    assert not graph.fire(cursor, goto("verify"), commit=commit)
    assert commit.seen == [] and cursor.state == "implement"


@pytest.mark.parametrize("answer", [1, "yes", [1], None, False, 0])
def test_guards_must_return_exactly_true(graph: CompiledGraph, answer: object) -> None:
    """A guard callable answering a truthy non-bool (or anything but True) refuses the edge."""
    cursor = graph.new_cursor()
    commit = Recorder(cursor)

    def eligible(_: tuple[str, ...]) -> object:
        return answer

    assert not graph.can_fire(
        cursor, goto("implement"), eligible=eligible, approval="implement", commit=commit
    )
    assert not graph.fire(cursor, goto("implement"), eligible=eligible, approval="implement", commit=commit)
    assert cursor.state == "explore" and commit.seen == []


def test_eligible_gets_the_edge_guards_and_is_skipped_without_guards(graph: CompiledGraph) -> None:
    calls: list[tuple[str, ...]] = []

    def eligible(guards: tuple[str, ...]) -> bool:
        calls.append(guards)
        return True

    cursor = graph.new_cursor()
    assert graph.fire(cursor, goto("implement"), eligible=eligible, approval="implement", commit=None)
    assert graph.fire(cursor, goto("verify"), eligible=eligible, approval="verify", commit=None)
    assert calls == [("has_plan",)]


def test_guarded_edge_without_eligible_callable_raises(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor()
    with pytest.raises(TypeError, match="eligible="):
        graph.fire(cursor, goto("implement"), approval="implement", commit=None)
    assert cursor.state == "explore"


def test_can_fire_has_no_side_effects(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor()
    commit = Recorder(cursor)
    assert graph.can_fire(cursor, goto("implement"), eligible=always, approval="implement", commit=commit)
    assert not graph.can_fire(cursor, goto("implement"), eligible=always, approval="verify", commit=commit)
    assert commit.seen == [] and cursor.state == "explore"


def test_no_edge_from_the_current_stage_is_false_not_an_error(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor()  # explore has no edge to verify
    assert not graph.can_fire(cursor, goto("verify"), approval="verify", commit=None)
    assert not graph.fire(cursor, goto("verify"), approval="verify", commit=None)
    assert cursor.state == "explore"


def test_unknown_trigger_and_unknown_stage_are_errors(graph: CompiledGraph) -> None:
    with pytest.raises(KeyError, match="goto:nowhere"):
        graph.fire(graph.new_cursor(), goto("nowhere"), commit=None)
    stale = StageCursor("removed-stage")  # e.g. folded from a log written with an older graph
    with pytest.raises(UnknownStageError, match="removed-stage"):
        graph.fire(stale, goto("verify"), approval="verify", commit=None)
    with pytest.raises(UnknownStageError):
        graph.new_cursor("removed-stage")
    # a user jump is the way out
    graph.jump(stale, "verify", commit=None)
    assert stale.state == "verify"


def test_cursors_never_get_bound_methods(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor()
    graph.fire(cursor, goto("implement"), eligible=always, approval="implement", commit=None)
    graph.jump(cursor, "verify", commit=None)
    assert StageCursor.__slots__ == ("state",)
    assert not hasattr(cursor, "__dict__")
    assert not any(name.startswith(("goto", "may_", "is_", "to_", "trigger")) for name in dir(cursor))
    with pytest.raises(AttributeError):
        loose: Any = cursor  # slots only: a new attribute must raise
        loose.extra = 1
    assert graph.machine.models == []


def test_one_machine_is_shared_by_many_cursors() -> None:
    config = feature_work()
    graph = compile_graph(config)
    assert compile_graph(feature_work()) is graph  # equal config, distinct object: same machine
    cursors = [graph.new_cursor(graph.states[i % 3]) for i in range(300)]
    for cursor in cursors[::2]:
        target = graph.edges_from(cursor.state)[0].target
        assert graph.fire(cursor, goto(target), eligible=always, approval=target, commit=None)
    expected = {
        "explore": "implement",
        "implement": "verify",
        "verify": "explore",
    }
    for i, cursor in enumerate(cursors):
        start = graph.states[i % 3]
        assert cursor.state == (expected[start] if i % 2 == 0 else start)
    assert graph.machine.models == []


def test_shared_machine_across_threads() -> None:
    """Many sessions, one machine, several threads: each cursor moves exactly by its own fires."""
    graph = compile_graph(feature_work())
    cursors = [graph.new_cursor("implement") for _ in range(200)]
    commits: list[int] = []
    lock = threading.Lock()

    def run(i: int) -> str:
        cursor = cursors[i]

        def commit() -> None:
            with lock:
                commits.append(i)

        graph.fire(cursor, goto("verify"), approval="verify", commit=commit)
        graph.fire(cursor, goto("explore"), approval="explore", commit=commit)
        return cursor.state

    with ThreadPoolExecutor(max_workers=4) as pool:
        states = list(pool.map(run, range(len(cursors))))
    assert states == ["explore"] * len(cursors)
    assert sorted(commits) == sorted(list(range(len(cursors))) * 2)


def test_jump_goes_anywhere_durable_first(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor()  # explore has no edge to verify: a user jump ignores edges
    commit = Recorder(cursor)
    graph.jump(cursor, "verify", commit=commit)
    assert commit.seen == ["explore"] and cursor.state == "verify"
    failing = Recorder(cursor, fail=True)
    with pytest.raises(OSError):
        graph.jump(cursor, "implement", commit=failing)
    assert cursor.state == "verify"


def test_jump_to_unknown_stage_fails_before_committing(graph: CompiledGraph) -> None:
    cursor = graph.new_cursor()
    commit = Recorder(cursor)
    with pytest.raises(UnknownStageError, match="nowhere"):
        graph.jump(cursor, "nowhere", commit=commit)
    assert commit.seen == [] and cursor.state == "explore"


def test_jumps_build_no_transitions() -> None:
    """A 200-stage linear graph has 199 transitions (not 200²) and still allows any jump."""
    names = [f"s{i}" for i in range(200)]
    stages = tuple(
        StageConfig(n, "x", (EdgeConfig(names[i + 1]),) if i + 1 < len(names) else ())
        for i, n in enumerate(names)
    )
    graph = compile_graph(GraphConfig(name="line", section="s", stages=stages))
    count = sum(len(ts) for ev in graph.machine.events.values() for ts in ev.transitions.values())
    assert count == 199
    cursor = graph.new_cursor()
    graph.jump(cursor, "s150", commit=None)
    assert cursor.state == "s150"


# --------------------------------------------------------------------------- explain_refusal


def test_explain_refusal_kinds(graph: CompiledGraph) -> None:
    explore = graph.new_cursor()
    assert graph.explain_refusal(explore, "nowhere") == Refusal("unknown_target", "explore", "nowhere")
    assert graph.explain_refusal(explore, "explore") == Refusal("current", "explore", "explore")
    refusal = graph.explain_refusal(explore, "verify")
    assert refusal == Refusal("not_an_edge", "explore", "verify", allowed=("implement",))
    assert "explore -> verify" in str(refusal) and "implement" in str(refusal)
    guard = graph.explain_refusal(explore, "implement", eligible=lambda g: False)
    assert guard == Refusal("guard", "explore", "implement", failing=("has_plan",))
    assert "has_plan" in str(guard)
    assert graph.explain_refusal(explore, "implement") is not None  # guarded, no evaluator
    assert graph.explain_refusal(explore, "implement", eligible=always) is None
    stale = StageCursor("removed")
    assert graph.explain_refusal(stale, "verify") == Refusal("unknown_current", "removed", "verify")


def test_explain_refusal_names_only_the_failing_guards() -> None:
    config = GraphConfig(
        name="g",
        section="s",
        stages=(
            StageConfig("a", "x", (EdgeConfig("b", ("tests_pass", "has_plan", "reviewed")),)),
            StageConfig("b", "y"),
        ),
    )
    graph = compile_graph(config)
    holding = {"has_plan"}
    refusal = graph.explain_refusal(
        graph.new_cursor(), "b", eligible=lambda gs: all(g in holding for g in gs)
    )
    assert refusal is not None and refusal.failing == ("tests_pass", "reviewed")


names = st.sampled_from(["a", "b-c", "d_e", "f", "g1"])


@st.composite
def graphs(draw: st.DrawFn) -> GraphConfig:
    stage_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    stages = []
    for n in stage_names:
        others = [o for o in stage_names if o != n]
        if draw(st.booleans()):
            targets = None
        else:
            chosen = draw(st.lists(st.sampled_from(others), unique=True)) if others else []
            targets = tuple(
                EdgeConfig(t, tuple(draw(st.lists(st.sampled_from(["p", "q"]), unique=True)))) for t in chosen
            )
        stages.append(StageConfig(n, "x", targets))
    return GraphConfig(name="h", section="s", stages=tuple(stages))


@settings(max_examples=60, deadline=None)
@given(graphs(), st.data())
def test_explain_refusal_agrees_with_can_fire_and_fire(config: GraphConfig, data: st.DataObject) -> None:
    """explain_refusal is None exactly when an approved fire would move the cursor."""
    graph = compile_graph(config)
    current = data.draw(st.sampled_from(graph.states))
    target = data.draw(st.sampled_from([*graph.states, "zzz"]))
    holding = data.draw(st.sets(st.sampled_from(["p", "q"])))

    def eligible(guards: tuple[str, ...]) -> bool:
        return all(g in holding for g in guards)

    cursor = graph.new_cursor(current)
    refusal = graph.explain_refusal(cursor, target, eligible=eligible)
    if goto(target) not in graph.machine.events:
        assert refusal is not None
        return
    allowed = graph.can_fire(cursor, goto(target), eligible=eligible, approval=target)
    assert allowed == (refusal is None)
    assert graph.fire(cursor, goto(target), eligible=eligible, approval=target, commit=None) == allowed
    assert cursor.state == (target if allowed else current)


# --------------------------------------------------------------------------- targets omitted


def all_to_all(n: int, **explicit: tuple[EdgeConfig, ...]) -> GraphConfig:
    """``n`` stages ``s000``… with ``targets`` omitted, except the stages named in ``explicit``."""
    names = [f"s{i:03d}" for i in range(n)]
    stages = tuple(StageConfig(name, "x", explicit.get(name)) for name in names)
    return GraphConfig(name=f"all-{n}", section="s", stages=stages)


def _condition_names(conditions: list[Any]) -> list[str]:
    """The names of the functions behind a transition's conditions."""
    return [c.func.__name__ for c in conditions]


class _Counter:
    """Counts constructor calls of a class while installed (monkeypatched ``__init__``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
        self.calls = 0
        original = cls.__dict__["__init__"]

        def counting(obj: object, *args: object, **kwargs: object) -> None:
            self.calls += 1
            original(obj, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)


def test_omitted_targets_cost_o_stages_to_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """`targets` omitted on every stage of an N-stage graph does not compile N·(N-1) transition
    objects (or expand N·(N-1) edges for the fingerprint): compiling builds no transition and at
    most one shared edge per stage; a transition (explicit edge or omitted targets) is built when
    a trigger first looks it up, and kept."""
    n = 300
    config = all_to_all(n, s001=(EdgeConfig("s002", ("ready",)), EdgeConfig("s000")), s002=())
    clear_cache()  # count a cold compile
    transitions_made = _Counter(monkeypatch, transitions.core.Transition)
    edges_made = _Counter(monkeypatch, EdgeConfig)
    graph = compile_graph(config)
    assert transitions_made.calls == 0  # nothing built up front, not even s001's two edges
    assert edges_made.calls <= n  # not n·(n-1)
    assert graph.built_transitions() == 0

    cursor = graph.new_cursor("s000")
    assert graph.fire(cursor, goto("s299"), approval="s299", commit=None) and cursor.state == "s299"
    assert transitions_made.calls == 1 and graph.built_transitions() == 1
    cursor = graph.new_cursor("s000")
    assert graph.fire(cursor, goto("s299"), approval="s299", commit=None)
    assert transitions_made.calls == 1  # built once, then reused
    guarded = graph.new_cursor("s001")
    assert not graph.fire(guarded, goto("s002"), approval="s002", eligible=lambda g: False, commit=None)
    assert transitions_made.calls == 2 and graph.built_transitions() == 2  # s001 -> s002 on first use
    built = graph.machine.events[goto("s299")].transitions["s000"]
    assert [(t.source, t.dest) for t in built] == [("s000", "s299")]
    # shaped like an explicit unguarded edge (s001 -> s000): same conditions, same before
    explicit = graph.machine.events[goto("s000")].transitions["s001"][0]
    assert _condition_names(built[0].conditions) == _condition_names(explicit.conditions) == [
        "eligible", "_approved"]
    assert built[0].before == explicit.before


def test_omitted_targets_behave_like_every_other_stage() -> None:
    """A stage with omitted targets may go to every other stage (no guards, review approval
    still required, durable first); explicit stages in the same graph keep their own edges."""
    config = all_to_all(40, s001=(EdgeConfig("s002", ("ready",)),), s002=())
    graph = compile_graph(config)
    names = config.stage_names
    for name in ("s000", "s017", "s039"):
        assert graph.triggers(name) == tuple(goto(o) for o in names if o != name)
        assert graph.edges_from(name) == config.edges_from(name)
        assert set(graph.machine.get_triggers(name)) == set(graph.triggers(name))
    assert graph.triggers("s001") == (goto("s002"),) and graph.triggers("s002") == ()
    assert graph.machine.get_triggers("s002") == []

    cursor = graph.new_cursor("s010")
    assert not graph.can_fire(cursor, goto("s020"))  # not approved
    assert not graph.fire(cursor, goto("s020"), approval="s021", commit=None)
    assert not graph.fire(cursor, goto("s010"), approval="s010", commit=None)  # no edge to itself
    assert graph.explain_refusal(cursor, "s020") is None
    assert graph.can_fire(cursor, goto("s020"), approval="s020")
    failing = Recorder(cursor, fail=True)
    with pytest.raises(OSError):
        graph.fire(cursor, goto("s020"), approval="s020", commit=failing)
    assert cursor.state == "s010" and failing.seen == ["s010"]
    commit = Recorder(cursor)
    assert graph.fire(cursor, goto("s002"), approval="s002", commit=commit)
    assert commit.seen == ["s010"] and cursor.state == "s002"
    # the terminal stage s002 (targets: []) has no way out for the model
    assert not graph.fire(cursor, goto("s000"), approval="s000", commit=commit) and cursor.state == "s002"
    assert graph.explain_refusal(cursor, "s000") == Refusal("not_an_edge", "s002", "s000")
    guarded = graph.new_cursor("s001")
    assert graph.explain_refusal(guarded, "s002", eligible=lambda g: False) == Refusal(
        "guard", "s001", "s002", failing=("ready",)
    )


def test_transitions_listing_api_sees_every_edge_of_omitted_targets() -> None:
    """transitions' own ``Machine.get_transitions`` lists every edge, built ones or not."""
    config = all_to_all(12, s003=(EdgeConfig("s004"),))
    graph = compile_graph(config)
    listed = {(t.source, t.dest) for t in graph.machine.get_transitions()}
    expected = {(s, e.target) for s in config.stage_names for e in config.edges_from(s)}
    assert listed == expected and len(expected) == 11 * 11 + 1
    into_s005 = graph.machine.get_transitions(trigger=goto("s005"))
    assert sorted(t.source for t in into_s005) == [n for n in config.stage_names if n not in ("s003", "s005")]
    fresh = compile_graph(all_to_all(13)).machine.events[goto("s000")].transitions
    assert fresh and not dict.__len__(fresh)  # truthy without building anything
    assert len(fresh) == 12 and dict.__len__(fresh) == 12  # len() lists (builds) them all


def test_lazy_transitions_are_built_once_under_concurrent_first_use() -> None:
    """Many threads firing the same never-used edge at once share one transition object."""
    graph = compile_graph(all_to_all(60))
    event = graph.machine.events[goto("s059")]

    def first_use(_: int) -> tuple[int, bool]:
        cursor = graph.new_cursor("s007")
        fired = graph.fire(cursor, goto("s059"), approval="s059", commit=None)
        return id(event.transitions["s007"][0]), fired and cursor.state == "s059"

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(first_use, range(64)))
    assert all(ok for _, ok in results)
    assert len({ident for ident, _ in results}) == 1
    assert len(event.transitions["s007"]) == 1


# --------------------------------------------------------------------------- plan mode


def test_plan_mode_machine() -> None:
    plan = compile_plan_mode()
    assert compile_plan_mode() is plan
    assert plan.states == (PLAN_DEFAULT, PLAN_STATE) and plan.initial == PLAN_DEFAULT
    assert plan.machine.models == [] and plan.machine.auto_transitions is False
    cursor = plan.new_cursor()
    commit = Recorder(cursor)
    assert not plan.fire(cursor, PLAN_LEAVE, commit=commit)  # not in plan mode
    assert plan.fire(cursor, PLAN_ENTER, commit=commit) and cursor.state == PLAN_STATE
    assert not plan.fire(cursor, PLAN_ENTER, commit=commit)
    assert not plan.can_fire(cursor, PLAN_EXIT)
    assert not plan.fire(cursor, PLAN_EXIT, approval=None, commit=commit)
    assert plan.can_fire(cursor, PLAN_EXIT, approval=PLAN_DEFAULT)
    assert plan.fire(cursor, PLAN_EXIT, approval=PLAN_DEFAULT, commit=commit) and cursor.state == PLAN_DEFAULT
    plan.fire(cursor, PLAN_ENTER, commit=commit)
    assert plan.fire(cursor, PLAN_LEAVE, commit=commit) and cursor.state == PLAN_DEFAULT
    assert commit.seen == ["default", "plan", "default", "plan"]


def test_plan_mode_commit_failure_keeps_mode() -> None:
    plan = compile_plan_mode()
    cursor = plan.new_cursor(PLAN_STATE)
    with pytest.raises(OSError):
        plan.fire(cursor, PLAN_EXIT, approval=PLAN_DEFAULT, commit=Recorder(cursor, fail=True))
    assert cursor.state == PLAN_STATE


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_stable_for_equal_configs() -> None:
    fp = fingerprint(feature_work())
    assert fp == fingerprint(feature_work())
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert compile_graph(feature_work()).fingerprint == fp


@pytest.mark.parametrize(
    "change",
    [
        lambda c: attrs.evolve(
            c, stages=(attrs.evolve(c.stages[0], instruction="Explore more."), *c.stages[1:])
        ),
        lambda c: attrs.evolve(
            c, stages=(attrs.evolve(c.stages[0], targets=(EdgeConfig("implement"),)), *c.stages[1:])
        ),
        lambda c: attrs.evolve(c, stages=(c.stages[1], c.stages[0], c.stages[2])),
        lambda c: attrs.evolve(c, section="other"),
        lambda c: attrs.evolve(c, initial="verify"),
        lambda c: attrs.evolve(c, min_handoff_tokens=10),
        lambda c: attrs.evolve(c, language="zh"),
    ],
    ids=["instruction", "guard", "order", "section", "initial", "threshold", "language"],
)
def test_fingerprint_changes_with_any_change(change: Callable[[GraphConfig], GraphConfig]) -> None:
    base = feature_work()
    changed = change(base)
    assert fingerprint(changed) != fingerprint(base)
    assert compile_graph(changed) is not compile_graph(base)


def test_review_rules_on_edges_to_every_other_stage_change_the_fingerprint() -> None:
    """An explicit edge list that reaches every other stage is written ``"*"`` only when its
    edges carry nothing of their own: review rules keep it explicit, so two graphs differing
    only in an edge's rules never share a compiled machine (and so its rules)."""
    from fsm_stage.config.review_rules import ReviewRulesConfig

    def every(review: ReviewRulesConfig | None) -> GraphConfig:
        edges = (EdgeConfig("b", review=review), EdgeConfig("c"))
        return GraphConfig(name="r", section="s", stages=(
            StageConfig("a", "A.", targets=edges), StageConfig("b", "B."), StageConfig("c", "C.")))

    loose, strict = every(None), every(ReviewRulesConfig(approvers=("alice",)))
    timed = every(ReviewRulesConfig(approvers=("alice",), deadline="1s"))
    assert len({fingerprint(loose), fingerprint(strict), fingerprint(timed)}) == 3
    assert compile_graph(timed).config.edges_from("a")[0].review == timed.stages[0].targets[0].review  # type: ignore[index]


def test_fingerprint_ignores_spelling_of_defaults_and_documentation() -> None:
    """Configs that behave the same share a fingerprint (normalised: defaults resolved,
    ``description`` left out)."""
    base = feature_work()
    explicit = attrs.evolve(
        base,
        initial="explore",
        description="docs only",
        stages=(
            *base.stages[:2],
            attrs.evolve(base.stages[2], targets=(EdgeConfig("explore"), EdgeConfig("implement"))),
        ),
    )
    assert fingerprint(explicit) == fingerprint(base)
    assert compile_graph(explicit) is compile_graph(base)


@st.composite
def respelled(draw: st.DrawFn, config: GraphConfig) -> GraphConfig:
    """``config`` with some stages' targets respelled (omitted <-> every other stage spelled
    out), reordered, or replaced: some variants behave the same, others do not."""
    names = config.stage_names
    stages = []
    for stage in config.stages:
        every_other = tuple(EdgeConfig(n) for n in names if n != stage.name)
        how = draw(st.sampled_from(["keep", "omit", "spell-out", "reverse", "drop-one"]))
        targets = stage.targets
        if how == "omit":
            targets = None
        elif how == "spell-out":
            targets = every_other
        elif how == "reverse":
            targets = tuple(reversed(stage.targets if stage.targets is not None else every_other))
        elif how == "drop-one":
            targets = (stage.targets if stage.targets is not None else every_other)[1:]
        stages.append(attrs.evolve(stage, targets=targets))
    return attrs.evolve(config, stages=tuple(stages))


@settings(max_examples=150, deadline=None)
@given(graphs(), st.data())
def test_fingerprint_is_equal_exactly_when_normalised_configs_are(
    config: GraphConfig, data: st.DataObject
) -> None:
    """The fingerprint never expands omitted targets (O(config), not O(stages²)) yet keeps the
    documented equivalence: two configs share a fingerprint iff ``normalised`` makes them equal
    (omitted targets == every other stage spelled out in configured order, without guards)."""
    other = data.draw(respelled(config))
    assert (fingerprint(config) == fingerprint(other)) == (normalised(config) == normalised(other))


def test_fingerprint_of_a_large_all_to_all_graph_does_not_expand_edges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fingerprint (computed on every ``compile_graph`` call, cache hits included) stays
    O(stages): it does not expand N·(N-1) edges."""
    config = all_to_all(400)
    edges_made = _Counter(monkeypatch, EdgeConfig)
    first = fingerprint(config)
    assert edges_made.calls == 0
    spelled = attrs.evolve(
        config,
        stages=(attrs.evolve(config.stages[0], targets=config.edges_from("s000")), *config.stages[1:]),
    )
    assert fingerprint(spelled) == first


def test_fingerprint_is_stable_across_processes() -> None:
    """Same config in a fresh interpreter with another hash seed gives the same fingerprint."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from test_graph import feature_work;"
        "from fsm_stage.graph import fingerprint; print(fingerprint(feature_work()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == fingerprint(feature_work())


def test_unvalidated_configs_are_refused_clearly() -> None:
    dangling = GraphConfig(name="d", section="s", stages=(StageConfig("a", "x", (EdgeConfig("ghost"),)),))
    with pytest.raises(ValueError, match="a -> ghost"):
        compile_graph(dangling)
    loop = GraphConfig(name="l", section="s", stages=(StageConfig("a", "x", (EdgeConfig("a"),)),))
    with pytest.raises(ValueError, match="a -> a"):
        compile_graph(loop)
    bad_initial = GraphConfig(name="i", section="s", initial="zz", stages=(StageConfig("a", "x"),))
    with pytest.raises(ValueError, match="initial"):
        compile_graph(bad_initial)


def test_shipped_example_graphs_compile() -> None:
    """Every example under stage_graphs/ compiles; its triggers are exactly its model edges."""
    from fsm_stage.config import load_config
    from fsm_stage.resources import data_dir

    compiled = 0
    for path in sorted(data_dir("stage_graphs").glob("*.yaml")):
        config = load_config(path).graph
        if config is None:
            continue
        graph = compile_graph(config)
        compiled += 1
        for name in config.stage_names:
            assert graph.triggers(name) == tuple(goto(e.target) for e in config.edges_from(name))
    assert compiled >= 1


def test_compiling_the_same_config_object_again_computes_no_fingerprint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cache hit on the same ``GraphConfig`` object is a lookup: its fingerprint was computed
    once; an equal config that is another object is fingerprinted (and shares the machine)."""
    import gc

    import fsm_stage.graph.build as build

    calls: list[int] = []
    real = build.fingerprint

    def counting(config: GraphConfig) -> str:
        calls.append(id(config))
        return real(config)

    monkeypatch.setattr(build, "fingerprint", counting)
    config = feature_work(name="fingerprinted-once")
    graph = compile_graph(config)
    assert compile_graph(config) is graph and compile_graph(config) is graph
    assert len(calls) == 1
    twin = feature_work(name="fingerprinted-once")
    assert compile_graph(twin) is graph and len(calls) == 2
    key = id(twin)
    del twin
    gc.collect()
    assert key not in build._fingerprints  # forgotten with the object (its id may be reused)
