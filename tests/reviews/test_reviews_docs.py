"""docs/reviews.md: the suspend/resume example runs as written; every decision-table row names a
test that exists."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "reviews.md"


def test_the_suspend_resume_examples_run() -> None:
    """Both examples: the runtime's ``call_tool`` and the composed host's ``Loop`` suspending in
    one "process" and resuming in another over the reopened log."""
    runtime_level, loop_level = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"),
                                           flags=re.S)
    namespace: dict[str, object] = {}
    exec(compile(runtime_level, str(DOC), "exec"), namespace)  # the documented example
    assert namespace["review_id"]
    namespace = {}
    exec(compile(loop_level, str(DOC), "exec"), namespace)
    outcome = namespace["outcome"]
    assert getattr(outcome, "reason", None) == "completed"


def test_every_decision_table_row_names_a_test_that_exists() -> None:
    """docs/reviews.md: each row of the decision tables names its test (file and function)."""
    root = DOC.parents[1]
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Decision tables")
    tables = text[start:text.index("\n## ", start + 1)]
    rows = [line for line in tables.splitlines()
            if line.startswith("| ") and not line.startswith("| situation")]
    assert len(rows) >= 30
    for row in rows:
        found = re.search(r"`(tests/[\w/]+\.py)::(\w+)`", row)
        assert found is not None, f"a row without its test: {row}"
        source = (root / found.group(1)).read_text(encoding="utf-8")
        assert f"def {found.group(2)}(" in source, f"{found.group(1)} has no {found.group(2)}"
