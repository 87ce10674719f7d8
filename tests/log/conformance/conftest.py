"""Fixtures of the store conformance suite: ``store`` is one store kind (memory, jsonl, postgres).

A ``Store`` opens one session log, reopens it (a restart: a new object reading what is stored)
and injects a failed write the store's own way (``MemoryLog.fail_next``; a JSONL write that
fails half-way; a PostgreSQL connection the server drops).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_fixture import new_session_id, pg_cluster  # noqa: F401  (pg_cluster: a fixture)

from fsm_stage.log.events import SessionHeader
from fsm_stage.log.jsonl import JsonlLog
from fsm_stage.log.memory import MemoryLog

STORES = ("memory", "jsonl", "postgres")


class Store:
    """One session log in one kind of store (see the module docs)."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.header = SessionHeader(new_session_id(kind), created_at=1_700_000_000_000, cwd="/w")
        self.opened: list[Any] = []
        self._memory: MemoryLog | None = None
        if kind == "jsonl":
            self.path = tmp_path / "s.jsonl"
        if kind == "postgres":
            self.cluster = request.getfixturevalue("pg_cluster")
            self.url = self.cluster.url(self.header.id)

    def open(self, *, create: bool = True, **options: Any) -> Any:
        """Open (creating with ``self.header``) the log; file rules: unknown types refused."""
        options.setdefault("allow_unknown_types", False)
        header = self.header if create else None
        if self.kind == "memory":
            if self._memory is None:
                assert header is not None
                log = MemoryLog(header, **options)
            else:  # a restart: a new object over what was committed
                log = MemoryLog(self._memory.header, list(self._memory.events), **options)
            self._memory = log
        elif self.kind == "jsonl":
            log = JsonlLog(self.path, header=header, **options)
        else:
            from fsm_stage.log.locations import open_log

            log = open_log(self.url, create=header, **options)
        self.opened.append(log)
        return log

    def reopen(self, log: Any, **options: Any) -> Any:
        """Close ``log`` (where closing exists) and open the stored log again."""
        with contextlib.suppress(AttributeError):
            log.close()
        return self.open(create=False, **options)

    @property
    def conditional(self) -> bool:
        """Whether this store's ``append_many`` takes ``expect_last_seq`` yet."""
        cls = {"memory": MemoryLog, "jsonl": JsonlLog}.get(self.kind)
        if cls is None:
            return True
        return "expect_last_seq" in inspect.signature(cls.append_many).parameters

    @contextlib.contextmanager
    def failing_write(self, log: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        """The next append inside fails the store's own way."""
        if self.kind == "memory":
            log.fail_next = OSError("disk full")
            yield
        elif self.kind == "jsonl":
            import fsm_stage.log.jsonl as jsonl

            real = jsonl._write_all_at

            def half_then_fail(fd: int, blob: bytes, offset: int) -> None:
                real(fd, blob[: len(blob) // 2], offset)
                raise OSError(28, "No space left on device")

            with monkeypatch.context() as m:
                m.setattr(jsonl, "_write_all_at", half_then_fail)
                yield
        else:  # the connection dies and the server stays unreachable (a single drop heals)
            import fsm_stage.log.postgres as postgres
            from fsm_stage.errors import DatabaseError

            with postgres.connect(self.cluster.dsn) as admin:
                pid = log._conn.info.backend_pid
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

            def unreachable(conninfo: str, **_: Any) -> Any:
                raise DatabaseError(f"{conninfo}: cannot connect to PostgreSQL: refused", transient=True)

            with monkeypatch.context() as m:
                m.setattr(postgres, "connect", unreachable)
                yield

    def close_all(self) -> None:
        for log in self.opened:
            with contextlib.suppress(Exception):
                log.close()


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = Store(request.param, tmp_path, request)
    yield s
    s.close_all()
