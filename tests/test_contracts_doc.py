"""docs/contracts.md lists every behaviour contract id (``B…`` plan mode, ``S…`` stage switch)
cited in ``fsm_stage/`` or ``tests/``, with its rule, so every citation resolves to a shipped
document; every listed id is cited by at least one test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: an id as cited: ``B12``, ``S37e`` (item (e) of S37's rule); never a lint code such as ``B018``
ID = re.compile(r"(?<![\w.-])([BS][1-9]\d{0,2})([a-z]?)(?!\w)")


def _listed() -> set[str]:
    text = (ROOT / "docs" / "contracts.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| ([BS]\d+) \|", text, re.M))


def _cited(folder: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path == Path(__file__).resolve():
            continue  # this file's examples cite nothing
        for base, _item in ID.findall(path.read_text(encoding="utf-8")):
            found.setdefault(base, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_cited_contract_id_is_listed() -> None:
    listed = _listed()
    cited = _cited("fsm_stage") | _cited("tests")
    assert {i: sorted(cited[i])[:2] for i in cited if i not in listed} == {}


def test_every_listed_contract_id_is_cited_by_a_test() -> None:
    tested = _cited("tests")
    assert sorted(i for i in _listed() if i not in tested) == []


def test_the_lists_are_complete() -> None:
    listed = _listed()
    assert {f"B{n}" for n in range(1, 115)} <= listed and {f"S{n}" for n in range(1, 117)} <= listed
