"""Helpers shared by the session-log tests (imported as a plain module; no __init__ here)."""

from __future__ import annotations

from pathlib import Path

from shared_data import DSH_SESSIONS

REPO = Path(__file__).resolve().parents[2]
DSH_DIR = DSH_SESSIONS
PLAN_REVIEW = "apps__web__tests__snapshots__plan-review__session.jsonl"


def dsh_files() -> list[str]:
    """Names of every file in the DSH corpus (empty when the shared folder is absent)."""
    return sorted(p.name for p in DSH_DIR.iterdir()) if DSH_DIR.is_dir() else []


def is_session_log(path: Path) -> bool:
    """Independent classification (census rule): first non-empty line has ``type: session``."""
    import json

    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                first = json.loads(line)
                return isinstance(first, dict) and first.get("type") == "session"
    return False
