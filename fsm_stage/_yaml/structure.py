"""Strict cattrs structuring of YAML data into attrs classes, every problem positioned.

``strict_converter`` builds a cattrs converter that accepts only the exact YAML types (no
``"5"`` -> 5), refuses ``null`` and unknown keys, and words its messages for users;
``positioned_problems`` structures a ``ProblemReport``'s data with it and reports every
validation error at its line and column. ``Vocabulary`` carries what differs between file
kinds (YAML key names, scalar shorthands, expected-value words, extra known keys, how a
missing key is named).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, cast, get_args, get_origin

import attrs

from fsm_stage._yaml.problems import NativePath, Problem, describe_value, join
from fsm_stage._yaml.report import ProblemReport
from fsm_stage.errors import _TypeProblem

if TYPE_CHECKING:  # cattrs loads when a converter is built or an error tree is walked
    import cattrs


def attribute_name(field: attrs.Attribute[Any]) -> str:
    """The default YAML key of an attrs field: its attribute name."""
    return field.name


def _no_extra_keys(cl: type, npath: NativePath) -> Sequence[str]:
    return ()


def _missing_as_key(cl: type, key: str, report: ProblemReport) -> tuple[str, str | None]:
    return key, None


@attrs.frozen
class Vocabulary:
    """How one kind of YAML file writes its attrs classes.

    ``key_of(field)``            the YAML key of an attrs field (default: its name).
    ``shorthand``                class -> field a bare YAML string fills (``{Edge: "target"}``).
    ``expected``                 class -> words for a valid value ("a mapping {name, ...}").
    ``extra_keys(cl, npath)``    keys accepted beside ``cl``'s fields at ``npath`` (listed in
                                 unknown-key messages).
    ``missing(cl, key, report)`` ``(key as shown, expected words or None)`` for a missing key.
    ``placed``                   ``(class, key)`` -> where that key goes instead, for a key
                                 written in the wrong mapping (its unknown-key message says so).
    """

    key_of: Callable[[attrs.Attribute[Any]], str] = attribute_name
    shorthand: Mapping[type, str] = attrs.field(factory=dict)
    expected: Mapping[type, str] = attrs.field(factory=dict)
    extra_keys: Callable[[type, NativePath], Sequence[str]] = _no_extra_keys
    missing: Callable[[type, str, ProblemReport], tuple[str, str | None]] = _missing_as_key
    placed: Mapping[tuple[type, str], str] = attrs.field(factory=dict)


PLAIN_VOCABULARY = Vocabulary()


def _strict_str(value: object, _: object) -> str:
    if not isinstance(value, str):
        raise _TypeProblem(f"expected a string, got {describe_value(value)}")
    return value


def _strict_int(value: object, _: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _TypeProblem(f"expected an integer, got {describe_value(value)}")
    return value


def _strict_bool(value: object, _: object) -> bool:
    if not isinstance(value, bool):
        raise _TypeProblem(f"expected true or false, got {describe_value(value)}")
    return value


def _is_str_mapping(t: object) -> bool:
    origin: object = get_origin(t)
    return origin in (Mapping, dict) or t in (Mapping, dict)


def _is_literal(t: object) -> bool:
    origin: object = get_origin(t)
    return origin is Literal


def _is_optional(t: object) -> bool:
    args = get_args(t)
    return len(args) == 2 and type(None) in args and not _is_literal(t)


def _is_hom_tuple(t: object) -> bool:
    args = get_args(t)
    return get_origin(t) is tuple and len(args) == 2 and args[1] is Ellipsis


def strict_converter(
    *, number: str = "a number", vocabulary: Vocabulary = PLAIN_VOCABULARY
) -> cattrs.Converter:
    """A cattrs converter that structures YAML data strictly, with user-facing messages, for
    use with ``positioned_problems``.

    ``str``/``int``/``bool``/``float`` accept only that YAML type (no ``"5"`` -> 5, no
    booleans as numbers; ``number`` words what a float field expects); ``Literal`` values are
    listed; ``X | None`` refuses ``null`` ("give a value, or remove the key"); ``tuple[X, ...]``
    needs a list; ``Mapping``/``dict`` a mapping; an attrs class needs a mapping
    (``vocabulary.expected`` words it, default "a mapping {its keys}"), refuses unknown keys,
    reads each field under ``vocabulary.key_of(field)`` and accepts a bare string for the
    classes of ``vocabulary.shorthand``. Detailed validation is on, so every problem of a
    document is collected. Add your own hooks to the returned converter as usual.
    """
    import cattrs
    from cattrs.errors import IterableValidationError, IterableValidationNote
    from cattrs.gen import make_dict_structure_fn, override

    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(bool, _strict_bool)

    def strict_float(value: object, _: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _TypeProblem(f"expected {number}, got {describe_value(value)}")
        return value

    conv.register_structure_hook(float, strict_float)

    def mapping_hook(value: object, _: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise _TypeProblem(f"expected a mapping, got {describe_value(value)}")
        return dict(value)

    conv.register_structure_hook_func(_is_str_mapping, mapping_hook)

    def literal_hook(value: object, t: Any) -> object:
        allowed = get_args(t)
        if value not in allowed or isinstance(value, bool):
            choices = " or ".join(json.dumps(a) for a in allowed)
            raise _TypeProblem(f"must be {choices}, got {describe_value(value)}")
        return value

    conv.register_structure_hook_func(_is_literal, literal_hook)

    def hook_for(t: Any) -> Callable[[object, Any], object]:
        """The structure hook ``conv`` uses for ``t`` (``conv.structure`` before cattrs 24.1)."""
        get_hook = getattr(conv, "get_structure_hook", None)
        return get_hook(t) if get_hook is not None else conv.structure

    def optional_factory(t: Any) -> Callable[[object, Any], object]:
        inner = next(a for a in get_args(t) if a is not type(None))
        inner_hook: Callable[[object, Any], object] | None = None  # looked up on first use

        def hook(value: object, _: Any) -> object:
            nonlocal inner_hook
            if value is None:
                raise _TypeProblem("is null; give a value, or remove the key to use the default")
            if inner_hook is None:
                inner_hook = hook_for(inner)
            return inner_hook(value, inner)

        return hook

    conv.register_structure_hook_factory(_is_optional, optional_factory)

    def tuple_factory(t: Any) -> Callable[[object, Any], object]:
        item_type = get_args(t)[0]

        item_hook: Callable[[object, Any], object] | None = None  # looked up on first use

        def hook(value: object, _: Any) -> tuple[object, ...]:
            nonlocal item_hook
            if not isinstance(value, list):
                raise _TypeProblem(f"expected a list, got {describe_value(value)}")
            if item_hook is None:
                item_hook = hook_for(item_type)
            hook_of = item_hook
            out: list[object] = []
            append = out.append
            try:  # every item valid (the common case): no index bookkeeping per item
                for item in value:
                    append(hook_of(item, item_type))
                return tuple(out)
            except Exception as first:  # the item at len(out) failed: note it, go on with the rest
                failed = len(out)
                first.add_note(IterableValidationNote(f"@ index {failed}", failed, item_type))
                errors: list[Exception] = [first]
            for i in range(failed + 1, len(value)):  # each item is structured once
                try:
                    append(hook_of(value[i], item_type))
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"@ index {i}", i, item_type))
                    errors.append(exc)
            raise IterableValidationError(f"While structuring {t!r}", errors, t)

        return hook

    conv.register_structure_hook_factory(_is_hom_tuple, tuple_factory)

    key_of, shorthand = vocabulary.key_of, vocabulary.shorthand

    def class_factory(cl: Any) -> Callable[[object, Any], object]:
        fields = attrs.fields(cl)
        renames = {f.name: override(rename=key_of(f)) for f in fields if key_of(f) != f.name}
        inner = cast(Any, make_dict_structure_fn)(cl, conv, _cattrs_forbid_extra_keys=True, **renames)
        keys = ", ".join(key_of(f) for f in fields)
        words = vocabulary.expected.get(cl, f"a mapping {{{keys}}}")

        short = shorthand.get(cl)
        # the shorthand field first: ``cl(value)`` (no keyword dict per value)
        first = fields[0] if fields else None
        positional = first is not None and first.name == short and first.init and not first.kw_only

        def hook(value: object, _: Any) -> object:
            if short is not None and isinstance(value, str):
                return cl(value) if positional else cl(**{short: value})
            if value is None:
                raise _TypeProblem(f"is null; expected {words}")
            if type(value) is not dict and not isinstance(value, Mapping):
                raise _TypeProblem(f"expected {words}, got {describe_value(value)}")
            return inner(value, cl)

        return hook

    conv.register_structure_hook_factory(attrs.has, class_factory)
    return conv


@functools.cache
def fields_by_key(
    cl: type, key_of: Callable[[attrs.Attribute[Any]], str]
) -> Mapping[str, attrs.Attribute[Any]]:
    """YAML key -> attrs field of ``cl``, in field order (read-only, cached)."""
    return MappingProxyType({key_of(f): f for f in attrs.fields(cl)})


def walk_cattrs(
    exc: BaseException,
    cl: Any,
    npath: NativePath,
    report: ProblemReport,
    vocabulary: Vocabulary = PLAIN_VOCABULARY,
    *,
    plain: bool = False,
) -> None:
    """Report every leaf of a cattrs validation error tree at its position.

    cattrs annotates each sub-exception with the attribute (``AttributeValidationNote``) or
    list index (``IterableValidationNote``) it came from; those notes give the path.
    ``plain``: a leaf ``TypeError``/``ValueError`` message is used as it is (hooks of a
    caller's converter word their own messages).
    """
    from cattrs.errors import (
        AttributeValidationNote,
        BaseValidationError,
        ForbiddenExtraKeysError,
        IterableValidationNote,
    )

    key_of = vocabulary.key_of
    if isinstance(exc, BaseValidationError):
        # a required key an unknown key of the same mapping is a misspelling of: reported once,
        # at the misspelt key ("did you mean"), not also as missing
        for sub in exc.exceptions:
            if isinstance(sub, ForbiddenExtraKeysError):
                known = _known_keys(sub.cl, npath, vocabulary)
                report.misspelt.update((npath, hint) for key in sub.extra_fields
                                       if (hint := key_suggestion(key, known)) is not None)
        for sub in exc.exceptions:
            notes = getattr(sub, "__notes__", [])
            note = next(
                (n for n in notes if isinstance(n, AttributeValidationNote | IterableValidationNote)), None
            )
            if isinstance(note, AttributeValidationNote):
                fields = attrs.fields_dict(cl) if attrs.has(cl) else {}
                key = key_of(fields[note.name]) if note.name in fields else note.name
                if isinstance(sub, KeyError) and note.name in fields:
                    if (npath, key) not in report.misspelt:
                        _report_missing(cl, key, npath, report, vocabulary)
                else:
                    walk_cattrs(sub, _unwrap(note.type), (*npath, key), report, vocabulary, plain=plain)
            elif isinstance(note, IterableValidationNote):
                walk_cattrs(sub, _unwrap(note.type), (*npath, note.index), report, vocabulary, plain=plain)
            else:
                walk_cattrs(sub, cl, npath, report, vocabulary, plain=plain)
        return
    if isinstance(exc, ForbiddenExtraKeysError):
        known = _known_keys(exc.cl, npath, vocabulary)
        for key in sorted(exc.extra_fields):
            where = vocabulary.placed.get((exc.cl, key))
            message = unknown_key_message(key, known) if where is None else \
                f"unknown key {key} here: {where}; expected one of: {', '.join(known)}"
            report.error((*npath, key), message, at_key=True)
        return
    if isinstance(exc, _TypeProblem) or (plain and isinstance(exc, TypeError | ValueError) and str(exc)):
        report.error(npath, str(exc))
    else:
        report.error(npath, f"invalid value: {exc}")


def _unwrap(t: Any) -> Any:
    """The class inside ``X | None`` / ``tuple[X, ...]`` annotations (for nested notes)."""
    while True:
        if _is_optional(t):
            t = next(a for a in get_args(t) if a is not type(None))
        elif _is_hom_tuple(t):
            t = get_args(t)[0]
        else:
            return t


def _report_missing(
    cl: Any, key: str, npath: NativePath, report: ProblemReport, vocabulary: Vocabulary
) -> None:
    shown, expected = vocabulary.missing(cl, key, report)
    loc = report.loc(npath)
    report.error_at(
        loc.value,
        join(loc.display, shown),
        "required key is missing" + (f"; expected {expected}" if expected is not None else ""),
    )


def _known_keys(cl: Any, npath: NativePath, vocabulary: Vocabulary) -> list[str]:
    """The keys a mapping structured into ``cl`` at ``npath`` may hold, in field order."""
    return [*fields_by_key(cl, vocabulary.key_of), *vocabulary.extra_keys(cl, npath)]


def key_suggestion(key: str, known: list[str]) -> str | None:
    """The known key an unknown ``key`` most likely means: its snake_case / camelCase spelling
    when that is known, else the closest of ``known`` (``difflib``), else None."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
    camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
    for candidate in (snake, camel):
        if candidate != key and candidate in known:
            return candidate
    close = difflib.get_close_matches(key, known, n=1)
    return close[0] if close else None


def unknown_key_message(key: str, known: list[str]) -> str:
    """``unknown key(s) KEY (did you mean `x`?); expected one of: ...`` (the hint from
    ``key_suggestion``, left out when there is none)."""
    suggestion = key_suggestion(key, known)
    hint = f" (did you mean `{suggestion}`?)" if suggestion is not None else ""
    return f"unknown key(s) {key}{hint}; expected one of: {', '.join(known)}"


def positioned_problems(
    report: ProblemReport,
    cl: type[Any],
    *,
    converter: cattrs.Converter,
    npath: NativePath = (),
    value: object = attrs.NOTHING,
    vocabulary: Vocabulary = PLAIN_VOCABULARY,
    plain: bool = True,
) -> tuple[Any, list[Problem]]:
    """Structure ``value`` (default: the data at ``npath`` of ``report.data``) into the attrs
    class ``cl`` with ``converter`` and report every cattrs validation problem at its position.

    Returns ``(instance or None, report.problems)``. ``plain``: leaf ``TypeError`` /
    ``ValueError`` messages of the converter's hooks are used as they are. Never raises for
    bad input; exceptions other than cattrs validation errors (bugs in hooks) propagate.
    """
    from cattrs.errors import BaseValidationError, ForbiddenExtraKeysError

    if value is attrs.NOTHING:
        value = report.data
        for part in npath:
            value = value[part] if isinstance(value, dict | list) else None  # type: ignore[index]
    try:
        obj = converter.structure(value, cl)
    except (BaseValidationError, ForbiddenExtraKeysError, TypeError, ValueError) as exc:
        walk_cattrs(exc, cl, npath, report, vocabulary, plain=plain)
        obj = None
    return obj, report.problems
