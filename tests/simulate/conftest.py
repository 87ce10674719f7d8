"""Fixtures for the simulator tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_helpers import DSH_SESSIONS, PLAN_REVIEW_LOG


@pytest.fixture
def plan_review_log() -> Path:
    """The recorded plan-review session (docs/session-log.md), or a skip when it is absent."""
    if not PLAN_REVIEW_LOG.is_file():
        pytest.skip(f"recorded DSH sessions not found at {DSH_SESSIONS} (expected <repo>/../shared)")
    return PLAN_REVIEW_LOG
