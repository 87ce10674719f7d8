"""The loader's libyaml fast path gives exactly what the pure round-trip path gives.

The stage-graph loader parses a native-form file with ruamel's C parser (libyaml events) when the
extension is installed and falls back to the pure-Python round-trip parser for everything the
fast path does not handle (syntax errors, duplicate keys, tags, anchors, merge keys, plugin
lists, ...). These tests hold the fast path to the pure one: same data, same positions, same
problems, on the repository's graphs, on every malformed graph of ``tests/data/bad_graphs`` and
on generated documents full of YAML corner cases.
``fsm_stage._yaml.fast.USE_C_PARSER = False`` forces the pure path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fsm_stage._yaml.fast as fast_module
from fsm_stage._yaml import Loc, ProblemReport, node_pos, parse_yaml, to_plain
from fsm_stage.config import ConfigError, ConfigFile, load_config_text
from fsm_stage.resources import data_dir

REPO = Path(__file__).resolve().parents[1]
BAD_GRAPH_DIR = Path(__file__).parent / "data" / "bad_graphs"

pytestmark = pytest.mark.skipif(
    fast_module.c_parser() is None, reason="ruamel's C extension (ruamel.yaml.clibz) is not installed"
)


def _typed(value: object) -> object:
    """``value`` with every scalar tagged by its exact type (``True`` != ``1``, ``1`` != ``1.0``)."""
    if isinstance(value, dict):
        return {"dict": [(_typed(k), _typed(v)) for k, v in value.items()]}
    if isinstance(value, list):
        return {"list": [_typed(v) for v in value]}
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    if isinstance(value, str):  # the pure path keeps ruamel's str subclasses for block-scalar keys
        return ("str", str(value))
    return (type(value).__qualname__, value)


def _pure_plain(text: str) -> tuple[list[str], object, dict[Any, Any]]:
    """(problems, plain data, positions) from the pure round-trip path (``to_plain``)."""
    report = ProblemReport("t.yaml")
    ok, tree = parse_yaml(text, report)
    if not ok:
        return [str(p) for p in report.errors], None, {}
    pos = node_pos(tree)
    report.locs[()] = Loc("", pos, pos)
    data = to_plain(tree, (), "", report)
    return [str(p) for p in report.errors], data, report.locs


def _outcome(text: str, *, c_parser: bool, strict: bool = False) -> tuple[Any, ...]:
    """What ``load_config_text`` gives, comparable across paths: the file or its problems."""
    saved = fast_module.USE_C_PARSER
    fast_module.USE_C_PARSER = c_parser
    try:
        loaded: ConfigFile = load_config_text(text, "graph.yaml", strict=strict)
    except ConfigError as err:
        return ("error", [attrs.astuple(p) for p in err.details])
    except Exception as err:  # a loader bug shows the same on both paths (compared, not hidden)
        return ("crash", type(err).__name__, str(err))
    finally:
        fast_module.USE_C_PARSER = saved
    return ("ok", loaded, [attrs.astuple(p) for p in loaded.warning_details])


def _assert_same(text: str, *, strict: bool = False) -> bool:
    """The fast path agrees with the pure path on ``text``; True when the fast path handled it."""
    fast = fast_module.fast_parse(text)
    unlocated = fast_module.fast_parse(text, locate=False)  # the loader's first try
    assert (unlocated is None) == (fast is None)
    if fast is not None:
        assert unlocated is not None and unlocated[1] == {}
        assert _typed(unlocated[0]) == _typed(fast[0])
        problems, data, locs = _pure_plain(text)
        assert problems == []
        assert _typed(fast[0]) == _typed(data)
        assert fast[1] == locs
    assert _outcome(text, c_parser=True, strict=strict) == _outcome(text, c_parser=False, strict=strict)
    return fast is not None


def _repo_yaml() -> list[Path]:
    files = sorted((REPO / "stage_graphs").rglob("*.yaml")) + sorted((REPO / "templates").rglob("*.yaml"))
    return [*files, *sorted((REPO / "tests" / "data").rglob("*.yaml"))]


@pytest.mark.parametrize("path", _repo_yaml(), ids=lambda p: str(p.relative_to(REPO)))
def test_repository_yaml_loads_the_same_on_both_paths(path: Path) -> None:
    """Every YAML file of the repository (graphs, scenarios, templates, the 64 bad graphs)
    loads to the same config, warnings or positioned problems with and without libyaml."""
    text = path.read_text(encoding="utf-8")
    _assert_same(text)
    _assert_same(text, strict=True)


def test_shipped_native_graphs_take_the_fast_path() -> None:
    """The fast path is really used for ordinary native graphs (else the tests above prove
    nothing about it)."""
    native = [p for p in sorted(data_dir("stage_graphs").glob("*.yaml")) if "seed" not in p.name]
    assert native
    for path in native:
        assert fast_module.fast_parse(path.read_text(encoding="utf-8")) is not None, path


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        "- id: stage-switch\n  config: {}\n",
        "a: 1\na: 2\n",
        "x: &a {b: 1}\ny: *a\n",
        "x-d: &d {instruction: hi}\nstages:\n  - <<: *d\n    name: a\n",
        "name: !!str 5\n",
        "name: !custom x\n",
        "%YAML 1.1\n---\nname: yes\n",
        "name: a\n---\nname: b\n",
        "stages:\n\t- a\n",
        "name: 'unclosed\n",
        "[1, 2\n",
        "1: a\n",
        "? [a]\n: b\n",
        "when: 2024-01-01\n",
        "scalar\n",
    ],
)
def test_documents_the_fast_path_leaves_to_the_pure_one(text: str) -> None:
    """Syntax errors, duplicate keys, anchors and merges, tags, directives, several documents,
    non-string keys, timestamps, plugin lists and files that declare nothing are not handled
    by the fast path; the pure path reports them with its messages and positions."""
    assert fast_module.fast_parse(text) is None
    _assert_same(text)


def test_file_of_extension_keys_only_is_reported_as_on_the_pure_path() -> None:
    """A file with only ``x-`` keys parses on the fast path but declares nothing: the problem
    comes from the pure path, identical."""
    assert fast_module.fast_parse("x-only: 1\n") is not None
    _assert_same("x-only: 1\n")


def test_warnings_and_errors_of_a_valid_yaml_file_are_positioned_the_same() -> None:
    """The fast path positions a file only when it reports something (a second pass): an
    unreachable stage (warning, or error under ``strict``) and a schema error deep in a stage
    get the pure path's positions."""
    unreachable = (
        "name: g\nsection: s\nstages:\n  - name: a\n    instruction: x\n    targets: []\n"
        "  - name: b\n    instruction: y\n"
    )
    assert _assert_same(unreachable)
    assert _assert_same(unreachable, strict=True)
    outcome = _outcome(unreachable, c_parser=True)
    assert outcome[0] == "ok" and outcome[2][0][1:3] == (7, 11)
    bad = unreachable.replace("targets: []", "targets: [{to: b, guards: [1x]}]")
    assert _assert_same(bad)
    assert _outcome(bad, c_parser=True)[0] == "error"


def test_forced_pure_path_is_the_pure_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fsm_stage._yaml.fast.USE_C_PARSER = False`` disables the fast path (how the other
    tests compare paths)."""
    text = "name: g\nsection: s\nstages:\n  - {name: a, instruction: x}\n"
    assert fast_module.fast_parse(text) is not None
    monkeypatch.setattr(fast_module, "USE_C_PARSER", False)
    assert fast_module.fast_parse(text) is None
    assert load_config_text(text).graph is not None


# --------------------------------------------------------------------------- generated documents

_PLAIN = st.sampled_from(
    [
        "a", "plan", "build it", "x-y", "é", "日本", "a:b", "a #b", "a# b", "-a", "?a", "a - b",
        "0", "-1", "+7", "0o17", "017", "0x1F", "0b101", "1_000", "1:30", "1.5", "-.5", ".5e3",
        "1e3", "1E+3", ".inf", "-.Inf", ".nan", "NaN", "true", "False", "TRUE", "yes", "No", "on",
        "null", "Null", "~", "=", "<<", "2024-01-01", "12:30:45", "0.", "+.inf", "1__0",
        "a\tb", "last ",
    ]
)  # fmt: skip
_QUOTED = st.sampled_from(
    [
        '""', "''", '"a b"', "'it''s'", '"tab\\tnew\\nline"', '"\\x41\\u263A\\U0001F600"',
        '"\\/ \\  \\_ \\N \\L \\P"', '"multi\n  line"', "'multi\n\n  para'", '"esc\\\n  aped"',
        '"# not a comment"', "'-'", '"\u2028"', '"tab\there"',
    ]
)  # fmt: skip
_BLOCK = st.sampled_from(
    [
        "|\n  line one\n  line two\n",
        "|-\n  kept\n\n",
        "|+\n  trailing\n\n",
        ">\n  folded\n  text\n\n  para\n",
        ">-\n  a\n   more indented\n  b\n",
        "|2\n    indented\n",
        "|\n  \u2028odd\n",
        "|\n\n  leading blank\n",
        ">\n  \ttab start\n",
        "| # comment\n  body\n",
    ]
)  # fmt: skip
_KEYS = st.sampled_from(
    [
        "name", "section", "stages", "instruction", "targets", "to", "guards", "initial",
        "handoff_dir", "min_handoff_tokens", "language", "description", "plan_mode", "x-extra",
        '"quoted key"', "'single'", "unknownKey", "k", "1", "true", "null", "<<", '"<<"', "a b",
    ]
)  # fmt: skip
_COMMENT = st.sampled_from(["", "  # note", " #", "\t# tab comment"])


def _flow(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


@st.composite
def _documents(draw: st.DrawFn) -> str:
    """A native-ish document mixing block/flow collections and every kind of scalar."""

    def value(depth: int, indent: int) -> str:
        kind = draw(st.sampled_from(["plain", "quoted", "block", "flow", "map", "seq", "empty"]))
        if depth > 2 and kind in ("map", "seq"):
            kind = "plain"
        if kind == "plain":
            return " " + draw(_PLAIN) + draw(_COMMENT) + "\n"
        if kind == "quoted":
            return " " + draw(_QUOTED) + draw(_COMMENT) + "\n"
        if kind == "block":
            body = draw(_BLOCK)
            pad = " " * indent
            return " " + body.replace("\n  ", "\n" + pad + "  ").replace("\n    ", "\n" + pad + "    ")
        if kind == "flow":
            items = draw(st.lists(st.one_of(_PLAIN, _QUOTED), max_size=3))
            if draw(st.booleans()):
                return " " + _flow(items) + "\n"
            keys = draw(st.lists(_KEYS, max_size=3, unique=True))
            return " {" + ", ".join(f"{k}: {v}" for k, v in zip(keys, items, strict=False)) + "}\n"
        if kind == "empty":
            return draw(_COMMENT) + "\n"
        if kind == "map":
            return "\n" + mapping(depth + 1, indent + 2)
        return "\n" + sequence(depth + 1, indent + draw(st.sampled_from([0, 2])))

    def mapping(depth: int, indent: int) -> str:
        keys = draw(st.lists(_KEYS, min_size=1, max_size=4, unique=True))
        return "".join(" " * indent + k + ":" + value(depth, indent) for k in keys)

    def sequence(depth: int, indent: int) -> str:
        out = []
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()) and depth <= 2:
                body = mapping(depth + 1, indent + 2)
                out.append(" " * indent + "- " + body[indent + 2 :])
            else:
                out.append(" " * indent + "-" + value(depth + 1, indent + 2))
        return "".join(out)

    head = draw(st.sampled_from(["", "---\n", "# header\n", "\ufeff", "--- # c\n"]))
    tail = draw(st.sampled_from(["", "...\n", "# end\n", "\n\n"]))
    text = head + mapping(0, 0) + tail
    return text.replace("\n", "\r\n") if draw(st.booleans()) else text


_STRAY = st.sampled_from(
    [
        "\t", " ", "'", '"', ":", "-", "#", "[", "{", "}", ",", "?", "|", ">", "&", "*", "!", "%",
        "\n", "\r", "\r\n", "\x85", "\u2028", "\ufeff", "\x7f", "\x00", "\x1f", "\xa0", "\\",
        "\U0001F600", "\ud800",
    ]
)  # fmt: skip


@st.composite
def _damaged(draw: st.DrawFn) -> str:
    """A generated document with one character inserted or removed (syntax corner cases)."""
    text = draw(_documents())
    at = draw(st.integers(0, len(text)))
    if draw(st.booleans()) and text:
        return text[:at] + text[at + 1 :]
    return text[:at] + draw(_STRAY) + text[at:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents())
@example("name: g\nsection: s\nstages:\n  - name: a\n    instruction: x\n")
@example('name: "a\\u2028b"\nsection: |\n  << stage_current >>\nstages: []\n')
def test_generated_documents_load_the_same_on_both_paths(text: str) -> None:
    """Scalars of every style and resolution (numbers, booleans, nulls, escapes, folding,
    chomping), flow and block collections, comments, BOM and document markers: the fast path
    yields the same data, positions and problems as the pure round-trip path."""
    _assert_same(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_damaged())
def test_damaged_documents_load_the_same_on_both_paths(text: str) -> None:
    """One stray character (tab, quote, colon, bracket, line break) anywhere: whatever the
    fast path accepts, the pure path accepts the same way; the rest is reported by the pure
    path, so syntax errors keep their messages and positions."""
    _assert_same(text)


def test_fast_path_data_matches_pure_path_on_the_benchmark_graph() -> None:
    """The generated 1,000-stage benchmark graph (bench/bench_compile.py shape, smaller)."""
    lines = ["name: generated", "section: |", "  Current << stage_current >>.", "stages:"]
    for i in range(30):
        lines += [f"  - name: s{i:02d}", f"    instruction: Step {i}.", "    targets:"]
        lines += [
            f"      - to: s{(i + 1) % 30:02d}",
            "        guards: [ready]",
            f"      - s{(i + 2) % 30:02d}",
        ]
    text = "\n".join(lines) + "\n"
    assert _assert_same(text)


_TOKENS = st.sampled_from(
    [
        "a", "name", "1", "0x1", "true", "null", "~", ":", ": ", "- ", "-", "? ", "?", " ", "  ",
        "\n", "\n  ", "\n- ", "#", " #", "'", '"', "\\", "[", "]", "{", "}", ",", "|", ">", "|-",
        ">+", "|2", "&x", "*x", "!", "!!str", "%", "---", "...", "\r\n", "\r", "é", "\U0001f600",
        "<<", "=", "@", "`", "\x00", "\x7f", "\xa0",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, max_size=40).map("".join))
@example("? |#")
@example("? |")
def test_token_soup_loads_the_same_on_both_paths(text: str) -> None:
    """Arbitrary sequences of YAML indicators, scalars and breaks (mostly invalid YAML): the
    fast path never accepts what the pure path refuses, nor reads it differently."""
    _assert_same(text)
