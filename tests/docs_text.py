"""Find the documentation a test checks: a ``<!-- BEGIN name -->`` … ``<!-- END name -->`` part of
README.md or of a page under docs/, so a section can move between them without breaking tests."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def doc_pages() -> list[Path]:
    """README.md and every docs/*.md page, README first."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def doc_section(name: str) -> str:
    """The text between the BEGIN/END markers of ``name`` in whichever page holds them."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        if begin in text:
            return text[text.index(begin):text.index(end)]
    raise AssertionError(f"no documentation page has a {begin} section")
