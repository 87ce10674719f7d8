"""Graph fingerprints: the cache key of compiled machines.

``fingerprint(config)`` is the sha256 of the canonical JSON of ``normalised(config)`` with
each "every other stage" edge list written ``"*"``, so omitted targets are never expanded
and the cost stays O(size of the config).
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Iterable
from typing import Final

import attrs

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig
from fsm_stage.config.model import normalised_graph_part, normalised_stage_extras, normalised_stage_part

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


def _dumps(value: object) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 text as it is."""
    # a fresh tree of plain values: no cycle to look for (a RecursionError would end one anyway)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False)


#: the string encoder ``json.dumps(..., ensure_ascii=False)`` uses (C when available), so text
#: written by ``_stage_json`` is byte for byte what ``_dumps`` writes
_string: Final[Callable[[str], str]] = json.encoder.encode_basestring
_review_of: Final = operator.attrgetter("review")
#: the stage list's place in the graph part while the rest of it is written by ``_dumps``
_STAGES: Final = object()


def _strings(values: Iterable[str]) -> str:
    return "[" + ",".join(map(_string, values)) + "]"


def _stage_json(stage: StageConfig, every: bool) -> str:
    """``_dumps`` of the stage's ``normalised_stage_part`` (targets ``"*"`` when ``every``),
    written directly for a stage that sets nothing but its name, instruction and edges without
    review rules (almost all of them; ``_dumps`` of nested dicts costs more than the hashing),
    else through ``_dumps``. Same bytes either way; non-string values (``TypeError``) take
    ``_dumps`` too."""
    edges = () if every or stage.targets is None else stage.targets
    if not normalised_stage_extras(stage) and list(map(_review_of, edges)).count(None) == len(edges):
        try:
            targets = '"*"' if every else "[" + ",".join(
                [f'{{"guards":{"[]" if e.guards == () else _strings(e.guards)},"to":{_string(e.target)}}}'
                 for e in edges]) + "]"
            instruction = "null" if stage.instruction is None else _string(stage.instruction)
            return f'{{"instruction":{instruction},"name":{_string(stage.name)},"targets":{targets}}}'
        except TypeError:
            pass
    part = normalised_stage_part(stage, edges)
    if every:
        part["targets"] = "*"
    return _dumps(part)


def canonical_json(config: GraphConfig) -> str:
    """The canonical JSON the fingerprint hashes: ``_dumps(normalised(config))`` with every
    "every other stage" edge list written ``"*"`` (same equivalence as ``normalised``: omitted
    targets == the explicit list of every other stage, in order, without guards), in
    O(size of the config) instead of O(stages²)."""
    names = config.stage_names
    stages = "[" + ",".join([_stage_json(s, _every_other(s, names)) for s in config.stages]) + "]"
    graph = normalised_graph_part(config, _STAGES)
    return "{" + ",".join([f"{_string(key)}:{stages if value is _STAGES else _dumps(value)}"
                           for key, value in sorted(graph.items())]) + "}"


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
    return hashlib.sha256(f"{_FINGERPRINT_VERSION}\n{canonical_json(config)}".encode()).hexdigest()
