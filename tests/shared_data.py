"""Where the tests find the project's shared reference data (recorded DSH session logs, seeds).

The data lives outside the repository, in ``shared/`` beside the checkout (``<repo>/../shared``),
as in CI. Set ``FSM_STAGE_SHARED`` to point elsewhere. Tests that need it skip with the path
they looked at when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("FSM_STAGE_SHARED") or (REPO.parent / "shared")).resolve()
DSH_SESSIONS = SHARED_DIR / "data" / "dsh-sessions"
SEEDS = SHARED_DIR / "seeds"
PLAN_REVIEW_LOG = DSH_SESSIONS / "apps__web__tests__snapshots__plan-review__session.jsonl"
