"""Test-suite root: makes ``tests/`` importable (``shared_data``) for every test folder.

With ``FSM_STAGE_REQUIRE_SHARED=1`` (set by ``.ci/run``) a missing shared reference folder is
an error instead of a reason to skip the corpus tests, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os

import pytest
from shared_data import DSH_SESSIONS, SEEDS


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("FSM_STAGE_REQUIRE_SHARED") == "1":
        missing = [str(p) for p in (DSH_SESSIONS, SEEDS) if not p.is_dir()]
        if missing:
            raise pytest.UsageError(
                "FSM_STAGE_REQUIRE_SHARED=1 but the shared reference data is missing: "
                + ", ".join(missing)
                + " (set FSM_STAGE_SHARED to the folder holding data/ and seeds/)"
            )
