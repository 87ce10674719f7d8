"""``compile_graph`` builds the same ``transitions`` machine as ``Machine(transitions=...)``.

``fsm_stage.graph`` populates the machine through transitions' extension points
(``event_cls``, ``transition_cls``, ``Condition``) instead of ``Machine.add_transitions``, for
speed on large graphs (issue 7 row 5). These tests rebuild each compiled graph through the
public API and compare the machines: events in the same order, the same transitions per
source, the same callbacks and conditions.
"""

from __future__ import annotations

from typing import Any

import pytest
from transitions import Machine

from fsm_stage.config import GraphConfig, load_config, load_config_text
from fsm_stage.graph import (
    _add_transitions,
    _approved,
    _commit,
    _eligible_condition,
    clear_cache,
    compile_graph,
    compile_plan_mode,
    goto,
)
from fsm_stage.resources import data_dir


def _ring(stages: int, fanout: int) -> GraphConfig:
    lines = ["name: ring", "section: s", "stages:"]
    for i in range(stages):
        lines += [f"  - name: s{i:03d}", "    instruction: x", "    targets:"]
        for k in range(1, fanout + 1):
            target = f"s{(i + k) % stages:03d}"
            lines.append(f"      - {{to: {target}, guards: [g{k % 3}]}}" if k % 2 else f"      - {target}")
    graph = load_config_text("\n".join(lines) + "\n").graph
    assert graph is not None
    return graph


def _graphs() -> list[GraphConfig]:
    shipped = [load_config(p).graph for p in sorted(data_dir("stage_graphs").glob("*.yaml"))]
    return [g for g in shipped if g is not None] + [_ring(40, 5)]


def _condition(c: Any) -> tuple[Any, ...]:
    func = c.func
    return (type(c), getattr(func, "func", func), getattr(func, "args", None), func.__name__, c.target)


def _transition(t: Any) -> tuple[Any, ...]:
    return (type(t), t.source, t.dest, t.prepare, t.before, t.after, [_condition(c) for c in t.conditions])


def _shape(machine: Machine) -> list[Any]:
    """Everything a trigger reads from the machine, comparable across machines: per event and
    source, the transitions in order (the order of events and of sources is not read)."""
    events = {
        name: (
            type(event),
            event.name,
            event.machine is machine,
            {source: [_transition(t) for t in ts] for source, ts in event.transitions.items()},
        )
        for name, event in machine.events.items()
    }
    return [events, list(machine.states), machine.initial, machine.models, machine.auto_transitions]


@pytest.mark.parametrize("graph", _graphs(), ids=lambda g: g.name)
def test_compiled_machine_equals_the_public_api_build(graph: GraphConfig) -> None:
    clear_cache()
    compiled = compile_graph(graph)
    commit = [_commit]
    specs = [
        {
            "trigger": goto(edge.target),
            "source": stage.name,
            "dest": edge.target,
            "conditions": [_eligible_condition(edge.guards), _approved],
            "before": commit,
        }
        for stage in graph.stages
        for edge in graph.edges_from(stage.name)
    ]
    reference = Machine(
        model=None,
        states=list(graph.stage_names),
        initial=graph.initial_stage,
        transitions=specs,
        auto_transitions=False,
        send_event=True,
        queued=False,
        ignore_invalid_triggers=False,
        name=graph.name,
    )
    assert _shape(compiled.machine) == _shape(reference)
    # the order transitions' own listings follow (``get_triggers``, ``get_transitions``)
    assert list(compiled.machine.events) == list(reference.events)
    for state in graph.stage_names:
        assert compiled.machine.get_triggers(state) == reference.get_triggers(state)


@pytest.mark.parametrize("graph", _graphs(), ids=lambda g: g.name)
def test_compiled_graph_survives_pickle_and_copies(graph: GraphConfig) -> None:
    """A compiled graph pickles and deep-copies as the lazy graph it is (not as empty
    ``defaultdict(list)``s), and a shallow copy of an event's transitions still builds them."""
    import copy
    import pickle

    clear_cache()
    compiled = compile_graph(graph)
    source = graph.stage_names[0]
    edge = graph.edges_from(source)[0]
    trigger = goto(edge.target)
    for other in (pickle.loads(pickle.dumps(compiled)), copy.deepcopy(compiled)):
        cursor = other.new_cursor(source)
        assert other.can_fire(cursor, trigger, approval=edge.target, eligible=lambda g: True)
        assert other.fire(cursor, trigger, approval=edge.target, eligible=lambda g: True, commit=None)
        assert cursor.state == edge.target
        assert {(t.source, t.dest) for t in other.machine.get_transitions()} == {
            (t.source, t.dest) for t in compiled.machine.get_transitions()}
    shallow = copy.copy(compiled.machine.events[trigger].transitions)
    assert source in shallow and [t.dest for t in shallow[source]] == [edge.target]


def test_plan_mode_machine_equals_the_public_api_build() -> None:
    plan = compile_plan_mode()
    commit = [_commit]
    reference = Machine(
        model=None,
        states=["default", "plan"],
        initial="default",
        transitions=[
            {"trigger": "enter_plan", "source": "default", "dest": "plan", "before": commit},
            {"trigger": "leave_plan", "source": "plan", "dest": "default", "before": commit},
            {
                "trigger": "exit_plan",
                "source": "plan",
                "dest": "default",
                "conditions": [_approved],
                "before": commit,
            },
        ],
        auto_transitions=False,
        send_event=True,
    )
    assert _shape(plan.machine) == _shape(reference)


def test_add_transitions_refuses_keys_it_does_not_build() -> None:
    """``unless`` / ``after`` / ``prepare`` / wildcards are not supported: a loud error, not a
    silently different machine."""
    machine = Machine(model=None, states=["a", "b"], initial="a", auto_transitions=False)
    with pytest.raises(ValueError, match="unsupported transition keys"):
        _add_transitions(machine, [{"trigger": "t", "source": "a", "dest": "b", "after": [_commit]}])
    with pytest.raises(ValueError, match="wildcard"):
        _add_transitions(machine, [{"trigger": "t", "source": "*", "dest": "b"}])
