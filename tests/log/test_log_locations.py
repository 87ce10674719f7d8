"""``open_log`` / ``read_location``: one opener for files, ``memory:``, ``-`` and registered schemes."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from fsm_stage.errors import LogFormatError, LogLockedError, UserError
from fsm_stage.log import (
    JsonlLog,
    MemoryLog,
    SessionHeader,
    StoredLog,
    locations,
    log_schemes,
    open_log,
    read_location,
    register_log_scheme,
    unregister_log_scheme,
)
from fsm_stage.log.writer_checks import LogWriteError

HEADER = SessionHeader("loc-test", created_at=1)


@pytest.fixture
def fake_scheme() -> Iterator[list[tuple[str, Any]]]:
    """Registers ``postgresql`` and ``postgres`` with a recording opener backed by MemoryLog."""
    calls: list[tuple[str, Any]] = []

    def opener(location: str, *, create: SessionHeader | None = None, **options: Any) -> StoredLog:
        calls.append((location, create, options))
        return MemoryLog(create or HEADER)

    had = set(log_schemes())  # the shipped PostgreSQL opener is put back afterwards
    saved = {name: locations._schemes[name] for name in ("postgresql", "postgres") if name in had}
    register_log_scheme("postgresql", opener, replace=True)
    register_log_scheme("postgres", opener, replace=True)
    try:
        yield calls
    finally:
        unregister_log_scheme("postgresql")
        unregister_log_scheme("postgres")
        for name, saved_opener in saved.items():
            register_log_scheme(name, saved_opener)


def test_a_path_opens_a_jsonl_log_created_with_the_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with open_log(str(path), create=HEADER) as log:
        assert isinstance(log, JsonlLog)
        log.append("user/message", {"content": "hi"}, surface_op="append")
    with open_log(path) as again:  # a Path too; existing log, no create needed
        assert again.header.id == "loc-test"
        assert [e.type for e in again.events] == ["user/message"]
    assert read_location(path).events[0].data == {"content": "hi"}


def test_a_missing_file_without_create_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LogFormatError, match="no such session log"):
        open_log(str(tmp_path / "missing.jsonl"))
    assert not (tmp_path / "missing.jsonl").exists()


def test_create_on_an_existing_log_of_another_session_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    open_log(path, create=HEADER).close()
    with pytest.raises(LogFormatError, match="does not match"):
        open_log(path, create=SessionHeader("other", created_at=1))


@pytest.mark.parametrize("cwd", [".", "work/dir", ""])
def test_create_with_a_relative_cwd_is_refused_before_anything_is_written(
    tmp_path: Path, cwd: str, fake_scheme: list[tuple[str, Any]]
) -> None:
    bad = SessionHeader("loc-test", created_at=1, cwd=cwd)
    for location in (str(tmp_path / "s.jsonl"), "memory:", "postgresql://db/x"):
        with pytest.raises(UserError, match=f"session cwd {cwd!r} is not an absolute path"):
            open_log(location, create=bad)
    assert not (tmp_path / "s.jsonl").exists()
    assert fake_scheme == []  # the store was never asked
    with open_log(tmp_path / "s.jsonl", create=SessionHeader("loc-test", cwd=str(tmp_path))) as log:
        assert log.header.cwd == str(tmp_path)


def test_open_log_keeps_the_one_writer_rule(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with open_log(path, create=HEADER), pytest.raises(LogLockedError):
        open_log(path)


def test_open_log_creates_missing_parent_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "s.jsonl"
    with open_log(path, create=HEADER) as log:
        log.append("user/message", {"content": "x"}, surface_op="append")
    with open_log(path) as again:
        assert [e.type for e in again.events] == ["user/message"]


def test_options_reach_the_store(tmp_path: Path) -> None:
    with open_log(tmp_path / "s.jsonl", create=HEADER, clock=lambda: 42, ignorable_types=["x/y"]) as log:
        assert log.append("x/y", {}).time == 42
        assert log.events[0].ignorable
    mem = open_log("memory:", create=HEADER, allow_unknown_types=False, strict=True)
    with pytest.raises(LogWriteError):
        mem.append("made/up", {})


def test_memory_opens_a_fresh_private_log_each_time() -> None:
    a = open_log("memory:", create=HEADER)
    b = open_log("MEMORY:", create=HEADER)
    assert isinstance(a, MemoryLog) and isinstance(b, MemoryLog)
    a.append("user/message", {"content": "x"}, surface_op="append")
    assert len(a) == 1 and len(b) == 0
    with a as same:  # MemoryLog has the StoredLog lifecycle too
        assert same is a
    assert isinstance(a, StoredLog)


def test_memory_needs_a_header_and_has_no_names() -> None:
    with pytest.raises(UserError, match="create="):
        open_log("memory:")
    with pytest.raises(UserError, match="no names"):
        open_log("memory:shared", create=HEADER)


def test_standard_input_is_refused_for_writing() -> None:
    with pytest.raises(UserError, match="standard input, which is read-only"):
        open_log("-", create=HEADER)


def test_empty_and_non_string_locations() -> None:
    with pytest.raises(UserError, match="empty log location"):
        open_log("", create=HEADER)
    with pytest.raises(TypeError, match=r"str or os\.PathLike"):
        open_log(cast(Any, 3), create=HEADER)


def test_an_unknown_scheme_names_the_known_ones() -> None:
    with pytest.raises(UserError, match=r"unknown log location scheme 'mysql'.*known: memory:") as err:
        open_log("mysql://db.example/sessions", create=HEADER)
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="'sqlite'"):
        open_log("sqlite:///tmp/x.db")


def test_registered_schemes_get_the_whole_location(fake_scheme: list[tuple[str, Any]]) -> None:
    assert {"memory", "postgres", "postgresql"} <= set(log_schemes())
    log = open_log("postgresql://db/s?id=1", create=HEADER, clock=int)
    assert isinstance(log, MemoryLog)
    open_log("Postgres://other")
    assert fake_scheme == [
        ("postgresql://db/s?id=1", HEADER, {"clock": int}),
        ("Postgres://other", None, {}),
    ]
    with pytest.raises(UserError, match="not a file"):
        read_location("postgres://db/s")


def test_register_refuses_bad_names_and_silent_replacement(fake_scheme: list[tuple[str, Any]]) -> None:
    def opener(location: str, *, create: SessionHeader | None = None, **options: Any) -> StoredLog:
        return MemoryLog(create or HEADER)

    for bad in ("c", "", "1x", "a b", "x:y"):
        with pytest.raises(ValueError, match="invalid log scheme name"):
            register_log_scheme(bad, opener)
    with pytest.raises(ValueError, match="already registered"):
        register_log_scheme("PostgreSQL", opener)
    register_log_scheme("postgresql", opener, replace=True)
    with pytest.raises(KeyError):
        unregister_log_scheme("nosuch")


@pytest.mark.parametrize("name", ["C:\\logs\\a.jsonl", "C:/logs/a.jsonl", "notes:v2.jsonl", "memo:x.jsonl"])
def test_drive_letters_and_colons_in_names_open_as_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_log(name, create=HEADER) as log:
        assert isinstance(log, JsonlLog)
        assert log.path == Path(name)
    assert read_location(name).header.id == "loc-test"


def test_a_file_named_like_a_scheme_opens_with_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "memory:").mkdir()
    with open_log(Path("memory:") / "x.jsonl", create=HEADER) as log:
        assert isinstance(log, JsonlLog)
    with open_log("./memory:/x.jsonl") as log:
        assert isinstance(log, JsonlLog)


def test_read_location_reads_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with open_log(path, create=HEADER) as log:
        log.append("user/message", {"content": "hi"}, surface_op="append")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    res = read_location("-")
    assert res.header.id == "loc-test" and [e.seq for e in res.events] == [0]
    assert res.events == read_location(path).events


def test_read_location_from_standard_input_names_it_in_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"jsonrpc": "2.0"}\n')))
    with pytest.raises(LogFormatError, match=r"not a session log: <stdin>: ACP JSON-RPC transcript"):
        read_location("-")


def test_read_location_refuses_memory_and_empty() -> None:
    with pytest.raises(UserError, match="not a file"):
        read_location("memory:")
    with pytest.raises(UserError, match="empty log location"):
        read_location("")
