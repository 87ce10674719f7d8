"""``PrefixView``: the first n items of an append-only list, behaving as the tuple it stands for."""

from __future__ import annotations

import copy
import pickle

import pytest

from fsm_stage.runtime.prefix import PrefixView


def test_a_view_is_the_tuple_of_its_first_items_and_does_not_grow() -> None:
    items = [{"n": 0}, {"n": 1}, {"n": 2}]
    view = PrefixView(items, 2)
    items.append({"n": 3})  # the list grows; the view keeps its length
    assert len(view) == 2 and list(view) == items[:2]
    assert view == tuple(items[:2]) and tuple(items[:2]) == view
    assert view[0] is items[0] and view[-1] is items[1]
    assert view[1:] == (items[1],) and isinstance(view[:], tuple)
    assert view[::-1] == (items[1], items[0])
    with pytest.raises(IndexError):
        view[2]
    with pytest.raises(IndexError):
        view[-3]
    assert view != tuple(items[:3]) and view != list(items[:2])  # a tuple, not a list


def test_views_of_one_list_compare_by_length_and_others_by_items() -> None:
    items = ["a", "b", "c"]
    short, long = PrefixView(items, 2), PrefixView(items, 3)
    assert short.shares_items(long) and short != long and short == PrefixView(items, 2)
    assert PrefixView(["a", "b"], 2) == short and not PrefixView(["a", "b"], 2).shares_items(short)
    assert PrefixView(["a", "x"], 2) != short
    assert hash(short) == hash(("a", "b")) and repr(short) == repr(("a", "b"))


def test_a_view_copies_and_pickles_as_a_tuple() -> None:
    items = [{"k": [1]}]
    view = PrefixView(items, 1)
    copied = copy.deepcopy(view)
    assert copied == (({"k": [1]}),) and isinstance(copied, tuple) and copied[0] is not items[0]
    assert pickle.loads(pickle.dumps(view)) == ({"k": [1]},)


@pytest.mark.parametrize("n", [-1, 2])
def test_a_length_outside_the_list_is_refused(n: int) -> None:
    with pytest.raises(ValueError, match=r"n must be within 0\.\.1"):
        PrefixView(["only"], n)


def test_views_compare_as_tuples_do_even_for_items_unequal_to_themselves() -> None:
    nan = float("nan")
    assert PrefixView([nan], 1) == PrefixView([nan], 1) == (nan,)  # tuples compare identity first
    assert PrefixView([nan], 1) != PrefixView([float("nan")], 1)
