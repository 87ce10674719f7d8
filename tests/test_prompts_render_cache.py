"""``Catalog.text`` remembers renders whose variables did not change (issue 17)."""

from __future__ import annotations

from typing import Any

import pytest

from fsm_stage import prompts
from fsm_stage.prompts import Catalog, PromptTemplateError


def _catalog(**texts: str) -> Catalog:
    return Catalog(name="t", language="en", sources=(), data=texts)


def test_same_variables_render_once(monkeypatch: pytest.MonkeyPatch) -> None:
    prompts.clear_caches()
    calls: list[str] = []
    real = prompts._render

    def counting(text: str, origin: str | None, variables: Any) -> str:
        calls.append(text)
        return real(text, origin, variables)

    monkeypatch.setattr(prompts, "_render", counting)
    cat = _catalog(a="Hello << name >>, << n >>", r="<< [1, 2, 3] | random >>")
    assert cat.text("a", name="Ada", n=1) == cat.text("a", name="Ada", n=1) == "Hello Ada, 1"
    assert len(calls) == 1
    assert cat.text("a", name="Ada", n=True) == "Hello Ada, True"  # True == 1, rendered apart
    assert cat.text("a", name="Bo", n=1) == "Hello Bo, 1"
    assert len(calls) == 3
    cat.text("a", name=["x"], n=1)  # a mutable variable is never cached
    cat.text("a", name=["x"], n=1)
    assert len(calls) == 5
    cat.text("r")
    cat.text("r")  # randomness is never cached
    assert len(calls) == 7


def test_errors_are_not_cached() -> None:
    prompts.clear_caches()
    cat = _catalog(a="<< missing >>")
    for _ in range(2):
        with pytest.raises(PromptTemplateError, match="undefined variable"):
            cat.text("a")


def test_a_catalog_keeps_its_own_copy_of_the_data() -> None:
    """The text cache (``raw``) never goes stale: the catalog copies ``data`` read-only, so
    changing the dict it was built from changes nothing, and ``as_dict`` is a new plain copy."""
    data: dict[str, Any] = {"group": {"a": "first"}, "b": "second"}
    cat = Catalog(name="t", language="en", sources=(), data=data)
    assert cat.raw("group.a") == "first"
    data["group"]["a"] = "changed"
    data["b"] = "changed"
    assert (cat.raw("group.a"), cat.raw("b"), cat.has("group.a")) == ("first", "second", True)
    plain = cat.as_dict()
    assert plain == {"group": {"a": "first"}, "b": "second"} and type(plain["group"]) is dict
    plain["group"]["a"] = "edited"
    assert cat.text("group.a") == "first"


def test_a_catalog_pickles_and_copies_deeply() -> None:
    """A controller holding a catalog can be pickled or deep-copied, and a list leaf of a
    catalog built in code is the catalog's own too."""
    import copy
    import pickle

    cat = prompts.load_catalog("stage_switch")
    for twin in (copy.deepcopy(cat), pickle.loads(pickle.dumps(cat))):
        assert twin.as_dict() == cat.as_dict()
        assert twin.raw("review.approve_label") == cat.raw("review.approve_label")
    data: dict[str, Any] = {"items": ["a"]}
    built = Catalog(name="t", language="en", sources=(), data=data)
    data["items"].append("b")
    assert built.as_dict() == {"items": ["a"]}
