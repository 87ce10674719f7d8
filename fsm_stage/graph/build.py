"""Compiling graphs: ``compile_graph`` (cached by fingerprint) and ``compile_plan_mode``.

``compile_graph(config)`` returns one shared ``CompiledGraph`` per fingerprint (a bounded
LRU of 64) in O(stages + explicit edges); stages with omitted targets get their transitions
built on first use (``fsm_stage.graph.machine``). ``compile_plan_mode()`` is the one
``default``/``plan`` machine of the process. ``clear_cache()`` forgets compiled graphs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from typing import Final

from fsm_stage.config import GraphConfig
from fsm_stage.graph.canonical import _FINGERPRINT_VERSION, fingerprint
from fsm_stage.graph.compiled import CompiledGraph
from fsm_stage.graph.conditions import _approved, _commit
from fsm_stage.graph.vocabulary import PLAN_DEFAULT, PLAN_ENTER, PLAN_EXIT, PLAN_LEAVE, PLAN_STATE

_CACHE_SIZE: Final = 64

_cache: OrderedDict[str, CompiledGraph] = OrderedDict()
_cache_lock = threading.Lock()
#: Fingerprints by config object identity (``id`` -> weak reference, fingerprint), so compiling
#: the same ``GraphConfig`` object again costs no fingerprint. Plain dict operations only (atomic
#: under the GIL): the weak reference's callback may run inside any lock.
_fingerprints: dict[int, tuple[weakref.ref[GraphConfig], str]] = {}


def _fingerprint_of(config: GraphConfig) -> str:
    """``fingerprint(config)``, computed once per config object (``GraphConfig`` is frozen)."""
    key = id(config)
    known = _fingerprints.get(key)
    if known is not None and known[0]() is config:
        return known[1]
    fp = fingerprint(config)

    def forget(ref: weakref.ref[GraphConfig]) -> None:
        entry = _fingerprints.get(key)
        if entry is not None and entry[0] is ref:
            _fingerprints.pop(key, None)

    _fingerprints[key] = (weakref.ref(config, forget), fp)
    return fp


def _build(config: GraphConfig, fp: str) -> CompiledGraph:
    # transitions are built on first lookup (machine._add_lazy_edges), none here
    edges = {s.name: s.targets for s in config.stages if s.targets is not None}
    any_sources = tuple(s.name for s in config.stages if s.targets is None)
    known = set(config.stage_names)
    if config.initial_stage not in known:
        raise ValueError(f"graph {config.name!r}: initial stage {config.initial_stage!r} is not configured")
    for source, out in edges.items():
        for edge in out:
            if edge.target not in known or edge.target == source:
                raise ValueError(
                    f"graph {config.name!r}: edge {source} -> {edge.target} does not lead to another "
                    "configured stage (was the config validated with load_config?)"
                )
    return CompiledGraph(
        states=config.stage_names,
        initial=config.initial_stage,
        transitions=[],
        fingerprint=fp,
        config=config,
        edges=edges,
        name=config.name,
        any_sources=any_sources,
    )


def compile_graph(config: GraphConfig) -> CompiledGraph:
    """Compile ``config`` into a shared :class:`CompiledGraph` (cached by fingerprint).

    The config must already be validated (``load_config``); an edge to an unknown stage or to
    its own stage, or an unknown ``initial``, raises ``ValueError`` (a programming error, not a
    user one: ``load_config`` reports those with positions). The same fingerprint returns the
    same object (a bounded LRU cache of 64 graphs); a changed graph compiles a new machine.
    Cost is O(stages + explicit edges) with no transition built: each transition is built on
    first use (``fire``/``can_fire``), and a stage with omitted targets (an edge to every other
    stage) costs O(1) here (``fsm_stage.graph.machine``). The
    fingerprint of a config object is computed once: compiling the same object again is a
    dictionary lookup (a frozen ``GraphConfig``'s nested mappings must not be mutated in place).
    """
    fp = _fingerprint_of(config)
    with _cache_lock:
        hit = _cache.get(fp)
        if hit is not None:
            _cache.move_to_end(fp)
            return hit
    compiled = _build(config, fp)
    with _cache_lock:
        existing = _cache.setdefault(fp, compiled)
        _cache.move_to_end(fp)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return existing


def clear_cache() -> None:
    """Forget every compiled graph (benchmarks, tests; sessions holding one keep it)."""
    with _cache_lock:
        _cache.clear()


@functools.cache
def compile_plan_mode() -> CompiledGraph:
    """The plan-mode machine (one per process): states ``default``/``plan``.

    Triggers: ``enter_plan`` (default→plan), ``leave_plan`` (plan→default, no guard: the user's
    ``/plan off``), ``exit_plan`` (plan→default, guard ``approved``: ctx ``approval ==
    "default"``, i.e. the reviewer approved leaving plan mode). All commit first.
    """
    commit = [_commit]
    transitions = [
        {"trigger": PLAN_ENTER, "source": PLAN_DEFAULT, "dest": PLAN_STATE, "before": commit},
        {"trigger": PLAN_LEAVE, "source": PLAN_STATE, "dest": PLAN_DEFAULT, "before": commit},
        {
            "trigger": PLAN_EXIT,
            "source": PLAN_STATE,
            "dest": PLAN_DEFAULT,
            "conditions": [_approved],
            "before": commit,
        },
    ]
    descriptor = json.dumps(transitions, default=lambda f: getattr(f, "__name__", "?"), sort_keys=True)
    fp = hashlib.sha256(f"{_FINGERPRINT_VERSION}\nplan_mode\n{descriptor}".encode()).hexdigest()
    return CompiledGraph(
        states=(PLAN_DEFAULT, PLAN_STATE),
        initial=PLAN_DEFAULT,
        transitions=transitions,
        fingerprint=fp,
        config=None,
        edges={},
        name="plan_mode",
    )
