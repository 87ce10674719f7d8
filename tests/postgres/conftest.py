"""Fixtures of the PostgreSQL store tests: ``pg_cluster`` (a throwaway server, ``pg_fixture``)
and ``pg_url`` (a new session's location on it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pg_fixture import new_session_id, pg_cluster  # noqa: F401  (pg_cluster: a fixture)
from pg_testing import TempCluster


@pytest.fixture
def pg_url(pg_cluster: TempCluster) -> Callable[..., str]:  # noqa: F811
    """``pg_url(prefix="t") -> location`` of a session id no other test uses."""
    return lambda prefix="t": pg_cluster.url(new_session_id(prefix))


@pytest.fixture
def fresh_db(pg_cluster: TempCluster) -> Callable[[], str]:  # noqa: F811
    """``fresh_db() -> dsn`` of a new, empty database (no fsm_stage schema)."""
    from fsm_stage.log.postgres import connect

    def make() -> str:
        name = new_session_id("db").replace("-", "_")
        with connect(pg_cluster.dsn) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return pg_cluster.dsn.replace("/postgres?", f"/{name}?")

    return make
