"""The writers (``JsonlLog``, ``MemoryLog``) refuse events that a strict reader
(``fsm-stage state --strict``, DSH's loader) would refuse, or that break the folds, before
anything is written; the log is unchanged afterwards.

Rules under test: a ``domain/verb`` type; JSON ``data``; surface ops only on surface types;
a type outside DSH's vocabulary only when ignorable (``ignorable=True``, ``fsm/…``,
``ignorable_types``, fsm_stage's ``system/message``) or explicitly allowed (``MemoryLog``
allows them by default: it is never read by a strict reader); a JSON object ``data`` for DSH
types, ``user/message`` with ``content``. ``plan/mode {active: bool}`` stays with the plan-mode
runtime validators (tested in tests/plan_mode).
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm_stage.cli import main
from fsm_stage.errors import LogWriteError
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import Clock, MemoryLog, NewEvent, SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.projections import plan_mode_problem
from fsm_stage.log.writer_checks import check_new_event

HEADER = SessionHeader(id="s", created_at=1, cwd="/w")

BAD: list[tuple[str, Any, dict[str, Any], str]] = [
    ("", {}, {}, "domain/verb"),
    ("turnstart", {}, {}, "domain/verb"),
    ("turn/", {}, {}, "domain/verb"),
    ("/x", {}, {}, "domain/verb"),
    ("text-chunks", {}, {}, "domain/verb"),
    ("future/x", {}, {}, "unknown event type 'future/x'"),
    ("plan/mode", "active", {}, "plan/mode data must be a JSON object"),
    ("user/message", {"bad": 1}, {}, "user/message data needs `content`"),
    ("turn/start", [1], {}, "turn/start data must be a JSON object"),
    ("turn/start", {"turn": {1, 2}}, {}, "not JSON"),
    ("turn/start", {"x": math.nan}, {}, "not JSON"),
    ("turn/start", {"turn": 1}, {"surface_op": "append"}, "not a surface type"),
]


@pytest.mark.parametrize(("type_", "data", "kw", "fragment"), BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_memory_log_refuses_bad_events_and_stays_unchanged(
    type_: str, data: Any, kw: dict[str, Any], fragment: str
) -> None:
    log = MemoryLog(HEADER, allow_unknown_types=False)
    log.append("turn/start", {"turn": 1})
    with pytest.raises(LogWriteError, match=fragment.replace("|", "\\|").replace("{", "\\{")):
        log.append(type_, data, **kw)
    assert len(log) == 1


@pytest.mark.parametrize(("type_", "data", "kw", "fragment"), BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_jsonl_log_refuses_bad_events_and_the_file_is_unchanged(
    tmp_path: Path, type_: str, data: Any, kw: dict[str, Any], fragment: str
) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER) as log:
        log.append("turn/start", {"turn": 1})
        before = path.read_bytes()
        with pytest.raises(LogWriteError) as info:
            log.append(type_, data, **kw)
        assert fragment in str(info.value)
        assert path.read_bytes() == before and len(log) == 1
        # a batch with one bad event writes nothing either
        with pytest.raises(LogWriteError):
            log.append_many([NewEvent("turn/end", {"turn": 1}), NewEvent(type_, data, **kw)])
        assert path.read_bytes() == before and len(log) == 1


def test_unknown_types_are_written_when_ignorable_or_explicitly_allowed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with JsonlLog(path, header=HEADER, ignorable_types={"stage/change"}) as log:
        log.append("future/x", {"a": 1}, ignorable=True)
        log.append("fsm/note", "any JSON")
        log.append("stage/change", {"to": "b"})
        log.append("system/message", {"content": "You are helpful."}, surface_op="append")
    res = read_log(path, strict=True)
    assert [e.ignorable for e in res.events] == [True, True, True, True]
    other = tmp_path / "t.jsonl"
    with JsonlLog(other, header=HEADER, allow_unknown_types=True) as log:
        log.append("future/x", {})
    assert not read_log(other).events[0].ignorable
    mem = MemoryLog(HEADER)  # in memory, unknown types are allowed by default
    assert not mem.append("future/x", {}).ignorable
    assert MemoryLog(HEADER, ignorable_types={"stage/change"}).append("stage/change", {}).ignorable


def test_check_new_event_returns_whether_the_event_is_written_ignorable() -> None:
    assert check_new_event(NewEvent("turn/start", {"turn": 1})) is False
    assert check_new_event(NewEvent("fsm/x", None)) is True
    assert check_new_event(NewEvent("a/b", {}), ignorable_types=frozenset({"a/b"})) is True
    with pytest.raises(LogWriteError):
        check_new_event(NewEvent("a/b", {}))


_TYPES = st.sampled_from(
    ["turn/start", "turn/end", "plan/mode", "user/message", "future/x", "fsm/x", "", "x", "system/message"]
)
_DATA = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["active", "content", "turn"]), inner),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(st.tuples(_TYPES, _DATA, st.booleans()), max_size=12))
def test_whatever_a_writer_accepts_a_strict_reader_reads(tmp_path_factory: Any, events: Any) -> None:
    """Property: every log JsonlLog wrote is read by a strict reader without error, and by
    `fsm-stage state --strict` too unless it holds a ``plan/mode`` with an invalid payload:
    writers let those through so the plan-mode validators judge them (B109–B111), and
    ``state --strict`` refuses them in one line."""
    path = tmp_path_factory.mktemp("w") / "s.jsonl"
    with JsonlLog(path, header=SessionHeader(id="s", created_at=1, cwd="/w")) as log:
        for type_, data, ignorable in events:
            with contextlib.suppress(LogWriteError):
                log.append(type_, data, ignorable=ignorable)
        written = len(log)
    res = read_log(path, strict=True)
    assert len(res.events) == written and res.torn_tail_offset is None
    result = CliRunner().invoke(main, ["state", "--strict", "--json", str(path)])
    bad = [p for p in map(plan_mode_problem, res.events) if p is not None]
    if not bad:
        assert result.exit_code == 0, result.stderr
    else:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr == f"fsm-stage: {path}: invalid plan/mode record: {bad[0]}{more}\n"


def test_memory_and_file_logs_build_the_same_events_from_one_batch(tmp_path: Path) -> None:
    """Both writers share ``prepare_batch``: the same batch (NewEvents or plain tuples,
    a clock returning a float) gives identical events — integer ``time``, tuple
    ``source_event_seqs``, the same ignorable flags — in memory and on file."""
    from fsm_stage.log.events import Replace

    batch: list[Any] = [
        NewEvent("user/message", {"content": []}, "append"),
        ("fsm/note", {"x": 1}, None, None, False),
        NewEvent("user/message", {"content": []}, Replace(0, 0), [0]),
        ("agent/custom", {}, None, None, True),
    ]
    float_clock = cast(Clock, lambda: 1234.9)  # a host clock may return float ms
    mem = MemoryLog(SessionHeader(id="s"), clock=float_clock)
    with JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(id="s"), clock=float_clock) as log:
        on_file = log.append_many(batch)
    in_memory = mem.append_many(batch)
    assert in_memory == on_file
    assert {type(e.time) for e in in_memory} == {int} and in_memory[0].time == 1234
    assert in_memory[2].source_event_seqs == (0,)
    assert [e.ignorable for e in in_memory] == [False, True, False, True]
    assert read_log(tmp_path / "s.jsonl").events == on_file


def test_allow_unknown_types_defaults_differ_by_store_and_say_so(tmp_path: Path) -> None:
    """``MemoryLog`` lets unknown non-ignorable types through by default, ``JsonlLog``
    refuses them; both docstrings warn about it (an orchestrator testing on memory must not be
    surprised by the file)."""
    assert MemoryLog(SessionHeader(id="s")).append("agent/custom", {}).ignorable is False
    with (
        JsonlLog(tmp_path / "s.jsonl", header=SessionHeader(id="s")) as log,
        pytest.raises(LogWriteError, match="unknown event type"),
    ):
        log.append("agent/custom", {})
    for cls, other in ((MemoryLog, "JsonlLog"), (JsonlLog, "MemoryLog")):
        doc = " ".join((cls.__doc__ or "").split())
        assert "allow_unknown_types" in doc and "defaults to" in doc and other in doc


_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 80), max_value=1 << 80),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                    st.binary(max_size=4), st.just(math.nan))


def _nested(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.none(), st.booleans())
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.frozensets(st.integers(0, 3), max_size=2),
        st.dictionaries(keys, inner, max_size=4)), max_leaves=30)


def _dumps_accepts(data: Any) -> bool:
    import json

    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


@settings(max_examples=600, deadline=None)
@given(_nested(_LEAVES))
def test_the_json_check_refuses_exactly_what_json_dumps_refuses(data: Any) -> None:
    """Events of plain JSON types are checked without ``json.dumps`` (a walk over exact dicts,
    lists, strings, booleans, None and 64-bit ints); anything else still goes through it, so the
    verdict is json.dumps(allow_nan=False)'s for any data: NaN, sets, bytes, non-string keys,
    huge ints and tuples decide as before."""
    refused = False
    try:
        check_new_event(NewEvent("fsm/probe", data))
    except LogWriteError as err:
        refused = "not JSON" in str(err)
    assert refused is not _dumps_accepts(data)


def test_deep_cyclic_and_huge_data_is_decided_by_json_dumps() -> None:
    """Data deeper than the walk goes to ``json.dumps``: a cycle is refused with its error, and
    a deep but finite nesting is accepted; an int too long for ``str`` is refused, as
    ``json.dumps`` refuses it (an int of at most 64 bits is taken by the walk)."""
    with pytest.raises(LogWriteError, match="not JSON"):
        check_new_event(NewEvent("fsm/probe", {"n": [1 << 20000]}))
    check_new_event(NewEvent("fsm/probe", {"n": [(1 << 64) - 1, -(1 << 64) + 1, 1 << 200]}))
    cyclic: dict[str, Any] = {}
    cyclic["a"] = {"b": [cyclic]}
    with pytest.raises(LogWriteError, match="not JSON"):
        check_new_event(NewEvent("fsm/probe", cyclic))
    deep: Any = "leaf"
    for _ in range(50):
        deep = {"k": [deep]}
    check_new_event(NewEvent("fsm/probe", deep))
