"""The malformed stage graphs in ``tests/data/bad_graphs/``: each gives exactly the problem(s)
its header announces, positioned at the announced line and column.

Every file starts with comment lines:

    # <what is wrong>
    # expect: LINE:COL KEY | message fragment      (one line per expected problem)
    # schema: refuse | cannot judge: <why>          (used by tests/test_schema.py)
    # args: --strict                                (optional extra CLI/loader options)

The positions were chosen by the author of each file (where a user should look), not read
back from the loader. This module also exports ``BAD_GRAPHS`` for the CLI and schema tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from fsm_stage.config import ConfigError, load_config

BAD_GRAPH_DIR = Path(__file__).parent / "data" / "bad_graphs"


@attrs.frozen
class Expected:
    line: int
    column: int
    key: str
    fragment: str


@attrs.frozen
class BadGraph:
    path: Path
    what: str
    expected: tuple[Expected, ...]
    schema_refuses: bool
    strict: bool

    @property
    def id(self) -> str:
        return self.path.stem


_EXPECT = re.compile(r"^# expect: (\d+):(\d+) (\S+) \| (.+)$")


def _parse(path: Path) -> BadGraph:
    lines = path.read_text(encoding="utf-8").splitlines()
    expected = tuple(
        Expected(int(m.group(1)), int(m.group(2)), m.group(3), m.group(4))
        for m in map(_EXPECT.match, lines)
        if m
    )
    schema = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("# schema:"))
    return BadGraph(
        path=path,
        what=lines[0].lstrip("# "),
        expected=expected,
        schema_refuses=schema == "refuse",
        strict=any(line.strip() == "# args: --strict" for line in lines),
    )


BAD_GRAPHS: list[BadGraph] = [_parse(p) for p in sorted(BAD_GRAPH_DIR.glob("*.yaml"))]


def test_bad_graph_collection_covers_every_mistake_kind() -> None:
    """At least 25 files, each announcing at least one expected problem (issue: stage graphs)."""
    assert len(BAD_GRAPHS) >= 25
    assert all(g.expected for g in BAD_GRAPHS)
    names = {g.id.split("-", 1)[1] for g in BAD_GRAPHS}
    for kind in (
        "syntax-tab",
        "syntax-unclosed-quote",
        "syntax-duplicate-key",
        "unknown-top-key",
        "unknown-stage-key",
        "unknown-edge-key",
        "unknown-plan-mode-key",
        "plugin-unknown-config-key",
        "plugin-unknown-stage-key",
        "plugin-unknown-entry-key",
    ):
        assert kind in names


@pytest.mark.parametrize("bad", BAD_GRAPHS, ids=lambda g: g.id)
def test_bad_graph_gives_exactly_the_announced_positioned_problems(bad: BadGraph) -> None:
    """The loader reports exactly the announced problems: PATH:LINE:COLUMN: KEY: message."""
    with pytest.raises(ConfigError) as info:
        load_config(bad.path, strict=bad.strict)
    got = info.value.details
    assert len(got) == len(bad.expected), info.value.problems
    for problem, want in zip(got, bad.expected, strict=True):
        assert (problem.line, problem.column, problem.key) == (want.line, want.column, want.key), str(problem)
        assert want.fragment in problem.message, str(problem)
        assert str(problem) == f"{bad.path}:{want.line}:{want.column}: {want.key}: {problem.message}"
        assert "\n" not in str(problem)
    assert info.value.problems == [str(p) for p in got]
