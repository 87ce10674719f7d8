"""The inbox tests' path (their fixture modules) and the real-browser fixtures: ``browser``
(Debian's chromium driven headless by Playwright; skips with the reason outside CI when
chromium or playwright is missing, fails under ``CI=true``) and ``shots`` (the screenshot
folder: a tmp dir, or ``FSM_STAGE_ARTEFACTS`` to keep them)."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _need(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required under CI)")
    pytest.skip(reason)


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("playwright is not installed")
    if not Path(CHROMIUM).exists():
        _need(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("FSM_STAGE_ARTEFACTS", tmp_path / "screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out
