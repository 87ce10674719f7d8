"""``SessionHeader`` refuses at construction what ``read_log(strict=True)`` would refuse in
its header line, and the stores refuse a header argument that is not a ``SessionHeader``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fsm_stage.log import open_log
from fsm_stage.log.dsh import read_log
from fsm_stage.log.events import MemoryLog, SessionHeader, wall_clock_ms
from fsm_stage.log.jsonl import JsonlLog


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "words"),
    [
        ((123,), {}, TypeError, "SessionHeader.id must be a non-empty str, got int"),
        (("",), {}, ValueError, "SessionHeader.id must be a non-empty str"),
        (("s",), {"cwd": 5}, TypeError, "SessionHeader.cwd must be a str or None, got int"),
        (("s",), {"cwd": Path("/w")}, TypeError, "SessionHeader.cwd must be a str or None, got"),
        (("s",), {"origin": 1}, TypeError, "SessionHeader.origin"),
        (("s",), {"parent_session": 1}, TypeError, "SessionHeader.parent_session"),
        (("s",), {"created_at": "1"}, TypeError, "SessionHeader.created_at must be a non-negative int"),
        (("s",), {"created_at": -1}, ValueError, "SessionHeader.created_at"),
        (("s",), {"delegation_depth": True}, TypeError, "SessionHeader.delegation_depth"),
        (("s",), {"delegation_depth": -2}, ValueError, "SessionHeader.delegation_depth"),
        (("s",), {"seed_length": "3"}, TypeError, "SessionHeader.seed_length"),
        (("s",), {"version": 1.0}, TypeError, "SessionHeader.version"),
        (("s",), {"extra": ["x"]}, TypeError, "SessionHeader.extra must be a mapping"),
    ],
)
def test_wrong_header_fields_are_refused_at_construction(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(")):
        SessionHeader(*args, **kwargs)


def test_a_valid_header_round_trips_through_the_strict_reader(tmp_path: Path) -> None:
    header = SessionHeader("s", created_at=2, cwd="/w", delegation_depth=1, parent_session="p",
                           origin="subagent", seed_length=None, version=None)
    with JsonlLog(tmp_path / "s.jsonl", header=header) as log:
        log.append("turn/start", {"turn": 1})
    assert read_log(tmp_path / "s.jsonl").header.id == "s"


@pytest.mark.parametrize("bad", ["x", {"id": "x"}, 5])
def test_the_stores_refuse_a_header_that_is_not_a_session_header(tmp_path: Path, bad: Any) -> None:
    name = type(bad).__name__
    with pytest.raises(TypeError, match=rf"MemoryLog\(header\) must be a SessionHeader, got {name}"):
        MemoryLog(bad)
    with pytest.raises(TypeError, match=rf"JsonlLog\(header=\) must be a SessionHeader or None, got {name}"):
        JsonlLog(tmp_path / "j.jsonl", header=bad)
    assert not (tmp_path / "j.jsonl").exists()
    for location in ("memory:", str(tmp_path / "o.jsonl")):
        words = rf"open_log\(create=\) must be a SessionHeader or None, got {name}"
        with pytest.raises(TypeError, match=words):
            open_log(location, create=bad)


def test_a_new_header_is_stamped_now_and_a_read_one_keeps_its_time(tmp_path: Path) -> None:
    """DSH writes ``createdAt`` as the session's creation time: a header built without one is
    stamped with the wall clock (not 1970), and a logged value (0 included) is kept on read."""
    before = wall_clock_ms()
    header = SessionHeader("s", cwd="/w")
    assert before <= header.created_at <= wall_clock_ms()
    with JsonlLog(tmp_path / "s.jsonl", header=header) as log:
        log.append("turn/start", {"turn": 1})
    assert read_log(tmp_path / "s.jsonl").header.created_at == header.created_at
    with JsonlLog(tmp_path / "z.jsonl", header=SessionHeader("z", created_at=0)) as log:
        log.append("turn/start", {"turn": 1})
    assert read_log(tmp_path / "z.jsonl").header.created_at == 0
