"""Issue 15 items 5 (YAML part), 6 and 7: bounded YAML loading (alias bombs, depth, size),
no crash on huge integers or lone surrogates, explicit tags and ``handoff_dir: "."`` refused
at validation — on both the libyaml fast path and the pure-Python path."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

import fsm_stage._yaml.fast as fast_module
from fsm_stage._yaml.limits import MAX_DEPTH, MAX_DOCUMENT_CHARS
from fsm_stage.config import load_config_text
from fsm_stage.errors import ConfigError
from fsm_stage.graph import compile_graph

BASE = (
    "name: g\n"
    'section: "go << stage_targets >>"\n'
    "stages:\n"
    "  - name: a\n"
    "    instruction: do a\n"
    "    targets: [b]\n"
    "  - name: b\n"
    "    instruction: do b\n"
    "    targets: [a]\n"
)


def _bomb(key: str) -> str:
    lines = [f"{key}:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"  {name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.fixture(params=[True, False], ids=["libyaml", "pure"])
def parser(request: pytest.FixtureRequest) -> Iterator[bool]:
    saved = fast_module.USE_C_PARSER
    fast_module.USE_C_PARSER = request.param
    yield request.param
    fast_module.USE_C_PARSER = saved


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, "g.yaml")
    return info.value.problems


_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
import fsm_stage._yaml.fast as fast
from fsm_stage.config import load_config_text
from fsm_stage.errors import ConfigError
fast.USE_C_PARSER = sys.argv[1] == "1"
try:
    load_config_text(sys.stdin.read(), "g.yaml")
    print("ok")
except ConfigError as err:
    print(err.problems[0])
"""


def _load_in_child(text: str, c_parser: bool) -> str:
    """Load ``text`` in a child process (2 GB address space; 20 s is the hang guard, the time
    budget is bench/'s): its output line."""
    try:
        run = subprocess.run(
            [sys.executable, "-c", _CHILD, "1" if c_parser else "0"], input=text,
            capture_output=True, text=True, timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("loading a 700-byte alias bomb hung")
    assert run.returncode == 0, run.stderr[-300:]
    return run.stdout.strip()


def test_an_alias_bomb_under_an_extension_key_does_not_hang(parser: bool) -> None:
    assert _load_in_child(_bomb("x-b") + BASE, parser) == "ok"


def test_an_alias_bomb_elsewhere_is_one_positioned_problem(parser: bool) -> None:
    line = _load_in_child(_bomb("description") + BASE, parser)
    assert line.startswith("g.yaml:") and "expand the document by more than 10,000 nodes" in line


def test_small_aliases_still_work(parser: bool) -> None:
    text = "x-t: &t [b]\n" + BASE.replace("targets: [b]", "targets: *t")
    assert load_config_text(text).graph is not None


def test_a_recursive_alias_is_one_positioned_problem_not_a_silent_null(parser: bool) -> None:
    """``&a {x: *a}`` used to load as ``{x: None}`` and validate; under an ignored ``x-`` key it
    is never read, so it stays allowed there."""
    looping = "    instruction: do a\n    model_settings: &a {x: *a}\n"
    text = BASE.replace("    instruction: do a\n", looping, 1)
    (line,) = _problems(text)
    assert line.startswith("g.yaml:6:") and "stages[0].model_settings.x: is an alias (*a)" in line
    (looped,) = _problems(BASE.replace("  - name: a\n", "  - &s\n    name: a\n", 1).replace(
        "targets: [b]", "targets: [b, *s]", 1))
    assert "stages[0].targets[1]: is an alias (*s) of a mapping or list that contains it" in looped
    assert load_config_text("x-loop: &l {x: *l}\n" + BASE).graph is not None


def test_deep_nesting_is_one_positioned_problem(parser: bool) -> None:
    deep = MAX_DEPTH + 5
    (line,) = _problems(BASE + "description: " + "[" * deep + "]" * deep + "\n")
    assert line.startswith("g.yaml:10:") and f"nested more than {MAX_DEPTH} levels" in line


def test_a_huge_document_is_refused_at_once(parser: bool) -> None:
    text = BASE + "x-pad: " + "a" * MAX_DOCUMENT_CHARS + "\n"
    (line,) = _problems(text)
    assert line.startswith("g.yaml:1:1: (file): the document has")


def test_an_integer_beyond_float_range_is_no_traceback(parser: bool) -> None:
    loaded = load_config_text(BASE + "min_handoff_tokens: 1" + "0" * 400 + "\n")
    assert loaded.graph is not None
    (line,) = _problems(BASE + "min_handoff_tokens: -1" + "0" * 400 + "\n")
    assert "min_handoff_tokens: must be a non-negative finite number" in line


def test_a_lone_surrogate_is_refused_at_load_and_a_pair_is_one_character(parser: bool) -> None:
    (line,) = _problems(BASE.replace("do a", '"do \\ud800 a"'))
    assert line.startswith("g.yaml:5:18: stages[0].instruction: U+D800 (a lone surrogate) at character 3")
    graph = load_config_text(BASE.replace("do a", '"do \\ud83d\\ude00 a"')).graph
    assert graph is not None and graph.stages[0].instruction == "do \U0001f600 a"
    compile_graph(graph)  # the fingerprint encodes every string as UTF-8


@pytest.mark.parametrize(
    ("value", "tag"),
    [('!!int "4000"', "!!int"), ('!!float "4000"', "!!float"), ("!!str 4000", "!!str")],
)
def test_explicit_scalar_tags_are_refused(parser: bool, value: str, tag: str) -> None:
    (line,) = _problems(BASE + f"min_handoff_tokens: {value}\n")
    assert line == (
        f"g.yaml:10:21: min_handoff_tokens: has the YAML tag {tag}; fsm_stage knows no tags, remove it"
    )


@pytest.mark.parametrize(("value", "tag"), [("!!seq [b]", "!!seq"), ("!!map {to: b}", "!!map")])
def test_explicit_collection_tags_are_refused(parser: bool, value: str, tag: str) -> None:
    text = BASE.replace("targets: [b]", f"targets: {value}" if tag == "!!seq" else f"targets: [{value}]")
    (line,) = _problems(text)
    assert f"has the YAML tag {tag}" in line and line.startswith("g.yaml:6:")


@pytest.mark.parametrize("value", ['"."', '"./"', '"./."'])
def test_handoff_dir_naming_the_session_directory_is_refused_by_validate(value: str) -> None:
    (line,) = _problems(BASE + f"handoff_dir: {value}\n")
    assert line.startswith("g.yaml:10:14: handoff_dir:") and "names the session directory itself" in line


def test_one_alias_to_a_huge_anchor_is_refused(parser: bool) -> None:
    # the bomb is built under an extension key (not counted), then one alias outside it would
    # expand all of it: the anchor's size must not be capped at exactly the limit
    text = _bomb("x-b") + BASE.replace('section: "go << stage_targets >>"', 'section: "go"\ndescription: *h')
    line = _load_in_child(text, parser)
    assert "expand the document by more than 10,000 nodes" in line
