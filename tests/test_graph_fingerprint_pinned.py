"""Graph fingerprints are stable across versions: a session log records its graph's
fingerprint and refuses another one on resume (``GraphChangedError``), so a faster
``normalised`` or ``fingerprint`` must give every existing graph the same value."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm_stage.config import EdgeConfig, GraphConfig, StageConfig, load_config, load_config_text, normalised
from fsm_stage.config.review_rules import ReviewRulesConfig
from fsm_stage.graph import fingerprint
from fsm_stage.graph.canonical import _every_other, canonical_json

REPO = Path(__file__).resolve().parents[1]

#: Values computed by fsm_stage 0.2.0 (fingerprint format ``fsm_stage.graph/2``).
PINNED = {
    "stage_graphs/feature-work.yaml": "14fb0b775b8ccb397443715e81a4342fe0751e179c1344f2c6b0563f32d3a022",
    "stage_graphs/model-per-stage.yaml": "d46bfc705067e71ea236da1c49d880788caf40f137673bb99196637acc1815b6",
    "stage_graphs/release-train.yaml": "6e25deee97fc6ce0ac8154331775adf1d652059f7e1efeec5e6112b5d1c337fb",
    "stage_graphs/seed-stage-switch.yaml": "530030369f6977d919e6d3efe845cf1375fcc5cc5803b2cec3dc68e12a0ccfba",
    # every key `normalised` reads: tool groups, model aliases, graph and edge review rules,
    # a stage policy, model, effort, settings, budget and on_budget, omitted targets
    "tests/data/fingerprints/every-key.yaml":
        "b402bb40c6e48cba32e985516f66fea4e1ca9e52e471ed2459e17f9d580b8e8f",
}


@pytest.mark.parametrize("path", sorted(PINNED))
def test_fingerprints_of_existing_graphs_do_not_change(path: str) -> None:
    graph = load_config(REPO / path).graph
    assert graph is not None
    assert fingerprint(graph) == PINNED[path]


def test_fingerprints_of_generated_graphs_do_not_change() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import bench_compile
    finally:
        sys.path.remove(str(REPO / "bench"))
    ring = load_config_text(bench_compile.generate_yaml(), "g.yaml").graph
    every_other = load_config_text(bench_compile.generate_yaml(50, None), "g.yaml").graph
    assert ring is not None and every_other is not None
    assert fingerprint(ring) == "2d2f40579ad2239c0daffd4467faf2a85c76796a5686afb2abcff0430f13ef5e"
    assert fingerprint(every_other) == "fdeea86a9780702280d96f4f649eab22baa6348d3329b0648e7e996548239f5a"


def _reference_json(config: GraphConfig) -> str:
    """The canonical JSON as ``json.dumps`` writes it: ``normalised(config)`` with every
    "every other stage" edge list written ``"*"`` (the definition ``canonical_json`` must keep)."""
    names = config.stage_names
    every = [i for i, stage in enumerate(config.stages) if _every_other(stage, names)]
    stages = list(config.stages)
    for i in every:
        stages[i] = attrs.evolve(stages[i], targets=())
    data = normalised(attrs.evolve(config, stages=tuple(stages)))
    for i in every:
        data["stages"][i]["targets"] = "*"
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("path", sorted(PINNED))
def test_canonical_json_is_json_dumps_of_normalised(path: str) -> None:
    graph = load_config(REPO / path).graph
    assert graph is not None
    assert canonical_json(graph) == _reference_json(graph)


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)  # quotes, backslashes, controls, non-ASCII


@settings(max_examples=150, deadline=None)
@given(instructions=st.lists(_TEXT, min_size=3, max_size=3),
       guards=st.lists(st.lists(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), max_size=3, unique=True),
                       min_size=3, max_size=3),
       reviewed=st.lists(st.booleans(), min_size=3, max_size=3),
       modelled=st.booleans(), omitted=st.booleans())
def test_canonical_json_writes_what_json_dumps_writes(
    instructions: list[str], guards: list[list[str]], reviewed: list[bool], modelled: bool, omitted: bool
) -> None:
    """The stage list is written directly (not through ``json.dumps``) for stages without
    policy, model keys or edge review rules: the bytes must stay ``json.dumps``'s for any text,
    and stages with those keys (written through ``json.dumps``) may sit beside them."""
    names = ("a", "b", "c")
    rules = [ReviewRulesConfig(quorum=2) if r else None for r in reviewed]
    stages = []
    for i, name in enumerate(names):
        edges = tuple(EdgeConfig(t, tuple(guards[j]), review=rules[j])
                      for j, t in enumerate(n for n in names if n != name))
        stages.append(StageConfig(name, instructions[i], None if omitted and i == 2 else edges,
                                  model="openai:gpt-4o" if modelled and i == 1 else None))
    graph = GraphConfig(name="g", section=instructions[0] or "s", stages=tuple(stages))
    assert canonical_json(graph) == _reference_json(graph)


@pytest.mark.parametrize("edge", [
    EdgeConfig("b", guards=None),  # type: ignore[arg-type]
    EdgeConfig("b", guards=0),  # type: ignore[arg-type]
    EdgeConfig("b", guards=[]),  # type: ignore[arg-type]
    EdgeConfig("b", review={}),  # type: ignore[arg-type]
    EdgeConfig("b", review=""),  # type: ignore[arg-type]
])
def test_edges_built_oddly_in_code_get_what_json_dumps_gives(edge: EdgeConfig) -> None:
    """Edges built in code with values the loader never makes (a None or falsy guards or review)
    are not taken for plain ones: the fingerprint raises where ``json.dumps`` of ``normalised``
    does, and is equal where it is not."""
    stages = (StageConfig("a", "x", (edge,)), StageConfig("b", "y", ()))
    graph = GraphConfig(name="g", section="s", stages=stages)
    try:
        expected: object = _reference_json(graph)
    except Exception as exc:  # the reference's own failure is the expectation
        with pytest.raises(type(exc)):
            canonical_json(graph)
    else:
        assert canonical_json(graph) == expected
