"""Fixtures for the session-log tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import DSH_DIR


@pytest.fixture
def dsh_dir() -> Path:
    if not DSH_DIR.is_dir():
        pytest.skip(f"DSH corpus not found at {DSH_DIR} (expected <repo>/../shared/data/dsh-sessions)")
    return DSH_DIR
