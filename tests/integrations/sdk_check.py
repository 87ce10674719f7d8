"""Helpers for the converter/tool-spec tests (a plain module; tests/integrations has no
__init__): ``sdk(name)`` imports an optional SDK or skips (never skips in CI), and
``check_typed(value, tp)`` checks a plain value against an SDK ``TypedDict`` type deeply:
required keys present, no unknown keys, literals and scalars right, every union tried.
It is stricter than pydantic's ``TypeAdapter`` (which ignores extra TypedDict keys and does
not look inside ``Iterable`` fields), so the tests run both."""

from __future__ import annotations

import collections.abc as cabc
import importlib
import os
import types
import typing
from typing import Any

import pytest
import typing_extensions as te


def in_ci() -> bool:
    return os.environ.get("CI") not in (None, "", "0") or os.environ.get("FSM_STAGE_REQUIRE_SHARED") == "1"


def sdk(name: str) -> Any:
    """``import name``; outside CI a missing SDK skips the test with the extra to install."""
    if in_ci():
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"{name} is not installed (pip install 'fsm_stage[test]')")


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and (typing.is_typeddict(tp) or te.is_typeddict(tp))


def _problems(value: Any, tp: Any, path: str) -> list[str]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is object:
        return []
    if origin in (te.Required, te.NotRequired, typing.Required, typing.NotRequired, te.Annotated,
                  typing.Annotated):
        return _problems(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        results = [_problems(value, a, path) for a in args]
        if any(not r for r in results):
            return []
        best = min(results, key=len)  # the closest member's problems say most
        return [f"{path}: matches no union member; closest: " + "; ".join(best)]
    if origin in (typing.Literal, te.Literal):
        return [] if value in args else [f"{path}: {value!r} not in {args}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {tp.__name__}"]
        hints = typing.get_type_hints(tp, include_extras=True)
        out = [f"{path}.{k}: unknown key for {tp.__name__}" for k in value if k not in hints]
        out += [f"{path}.{k}: required by {tp.__name__}" for k in tp.__required_keys__ if k not in value]
        for k, v in value.items():
            if k in hints:
                out += _problems(v, hints[k], f"{path}.{k}")
        return out
    if origin in (dict, cabc.Mapping) or tp is dict:
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        return [p for k, v in value.items() for p in (_problems(v, args[1], f"{path}.{k}") if args else [])]
    if origin in (list, cabc.Iterable, cabc.Sequence, tuple) or tp is list:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in _problems(v, item, f"{path}[{i}]")]
    if isinstance(tp, type):
        if tp is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, tp)
        return [] if ok else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    if isinstance(tp, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):
        return _problems(value, tp.__value__, path)
    return []  # a type this checker does not model: pydantic's check covers it


def check_typed(value: Any, tp: Any) -> None:
    """Assert ``value`` fits ``tp`` (deep TypedDict check, then pydantic's TypeAdapter)."""
    problems = _problems(value, tp, "$")
    assert not problems, "\n".join(problems)
    from pydantic import TypeAdapter

    TypeAdapter(tp).validate_python(value)
