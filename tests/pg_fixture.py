"""The session-scoped throwaway PostgreSQL cluster shared by the store tests (a plain module).

Skips with the reason outside CI when the server binaries, the ``postgres`` OS user or psycopg
are missing; fails when ``CI`` is set (CI must have them: ``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from fsm_stage.log.pg_testing import TempCluster, unavailable_reason


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[TempCluster]:
    """A running cluster with the fsm_stage schema in database ``postgres``."""
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but PostgreSQL tests cannot run: {reason}")
        pytest.skip(reason)
    from fsm_stage.log.pg_schema import migrate
    from fsm_stage.log.postgres import connect

    cluster = TempCluster.start()
    try:
        with connect(cluster.dsn) as conn:
            migrate(conn)
        yield cluster
    finally:
        cluster.stop()


def new_session_id(prefix: str = "t") -> str:
    """A session id no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
