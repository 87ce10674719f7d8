"""docs/reviews.md's suspend/resume example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "reviews.md"


def test_the_suspend_resume_example_runs() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    namespace: dict[str, object] = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # the documented example
    assert namespace["review_id"]
