"""The session-scoped throwaway PostgreSQL cluster shared by the store tests (a plain module).

Skips with the reason outside CI when the server binaries, the ``postgres`` OS user or psycopg
are missing; fails when ``CI`` or ``FSM_STAGE_REQUIRE_POSTGRES=1`` is set (``.ci/run`` sets the
latter after installing them), so CI can never pass by skipping the store tests.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest
from pg_testing import TempCluster, unavailable_reason


def require_server(reason: str | None) -> None:
    """Skip (outside CI) or fail (in CI) when ``reason`` says no cluster can start."""
    if reason is not None:
        if os.environ.get("CI") or os.environ.get("FSM_STAGE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"CI needs the PostgreSQL store tests to run, but: {reason}")
        pytest.skip(reason)


@contextlib.contextmanager
def migrated_cluster() -> Iterator[TempCluster]:
    """A throwaway cluster with the fsm_stage schema in database ``postgres``, stopped on exit
    (skips, or fails under CI, when no server can run here)."""
    require_server(unavailable_reason())
    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    cluster = TempCluster.start()
    try:
        with connect(cluster.dsn) as conn:
            migrate(conn)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[TempCluster]:
    """A running cluster with the fsm_stage schema, shared by the whole test session."""
    with migrated_cluster() as cluster:
        yield cluster


def new_session_id(prefix: str = "t") -> str:
    """A session id no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
