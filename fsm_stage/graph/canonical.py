"""Graph fingerprints: the cache key of compiled machines.

``fingerprint(config)`` is the sha256 of the canonical JSON of ``normalised(config)`` with
each "every other stage" edge list written ``"*"``, so omitted targets are never expanded
and the cost stays O(size of the config).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import attrs

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig, normalised

_FINGERPRINT_VERSION: Final = "fsm_stage.graph/2"
#: What an edge holds besides its target when nothing was configured on it (field -> default).
_PLAIN_EDGE: Final = {f.name: f.default for f in attrs.fields(EdgeConfig) if f.name != "target"}


def _plain(edge: EdgeConfig) -> bool:
    """Whether ``edge`` configures nothing but its target (every other field at its default)."""
    return all(getattr(edge, name) == default for name, default in _PLAIN_EDGE.items())


def _every_other(stage: StageConfig, names: tuple[str, ...]) -> bool:
    """Whether ``stage`` may go to every other stage over plain edges (nothing configured on
    them but the target: no guards, no review rules, nor any field added later), in configured
    order (``targets`` omitted, or spelled out exactly so): O(stages) only when the lengths
    match. An edge with anything of its own keeps the list explicit, so what it configures is
    part of the fingerprint (a ``"*"`` would drop it, and two graphs differing only there would
    share one compiled machine)."""
    targets = stage.targets
    if targets is None:
        return True
    if len(targets) != len(names) - 1 or not all(map(_plain, targets)):
        return False
    return [e.target for e in targets] == [n for n in names if n != stage.name]


def _canonical(config: GraphConfig) -> dict[str, Any]:
    """``normalised(config)`` with every "every other stage" edge list written ``"*"``.

    Same equivalence as ``normalised`` (omitted targets == the explicit list of every other
    stage, in order, without guards) in O(size of the config) instead of O(stages²).
    """
    names = config.stage_names
    every = [i for i, stage in enumerate(config.stages) if _every_other(stage, names)]
    if not every:
        return normalised(config)
    stages = list(config.stages)
    for i in every:
        stages[i] = attrs.evolve(stages[i], targets=())
    data = normalised(attrs.evolve(config, stages=tuple(stages)))
    for i in every:
        data["stages"][i]["targets"] = "*"
    return data


def fingerprint(config: GraphConfig) -> str:
    """Stable fingerprint of a graph: ``sha256`` hex of the canonical JSON (sorted keys, no
    whitespace) of ``fsm_stage.config.normalised(config)`` (with each "every other stage" edge
    list written ``"*"``, so omitted targets are never expanded), prefixed with a format version.

    Equal configs give equal fingerprints in every process; any change to a stage, an edge, a
    guard, an instruction or a template gives a different one. Configs that behave the same
    share one (defaults resolved: ``targets`` omitted equals the explicit list of every other
    stage, ``initial`` omitted equals the first stage; ``description`` is left out): two configs
    share a fingerprint exactly when ``normalised`` makes them equal. Cost O(size of config).
    """
    # a fresh tree of plain values: no cycle to look for (a RecursionError would end one anyway)
    canonical = json.dumps(_canonical(config), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           check_circular=False)
    return hashlib.sha256(f"{_FINGERPRINT_VERSION}\n{canonical}".encode()).hexdigest()
