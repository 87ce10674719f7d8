"""Time and size bounds for template rendering (used by ``fsm_stage.prompts``).

Templates come from deployers, so a template must not be able to hang the process or allocate
gigabytes before the rendered-length check. Every rendering runs under a ``Budget``
(``MAX_RENDER_STEPS`` loop iterations, calls and concatenations, and ``MAX_RENDER_SECONDS`` of
wall-clock time); every string-producing operation checks its *projected* size against
``MAX_RENDERED_CHARS`` before it allocates (``indent``/``center``/``wordwrap``/``join``/
``format``/``replace``/``batch``/``slice`` filters, ``str`` methods such as ``center`` or
``replace``, ``*``/``+``/``%``/``~``), and a value shown in the output (``<< x >>``) must have
a safe text form: a function, method, class or object whose only text is its memory address
is refused. Every refusal is a ``jinja2.exceptions.SecurityError``; ``prompts`` turns it into
its one-line ``PromptTemplateError``.
"""

from __future__ import annotations

import contextvars
import functools
import re
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.nodes
from jinja2.exceptions import SecurityError

__all__ = [
    "MAX_RENDERED_CHARS",
    "MAX_RENDER_SECONDS",
    "MAX_RENDER_STEPS",
    "BoundedCodeGenerator",
    "Budget",
    "bound_filters",
    "bounded_loop",
    "budget_scope",
    "check_binop",
    "check_call",
    "concat",
    "finalize",
    "wrap_loops",
]

#: Longest text a template may render, and the largest string/list any operation may build.
MAX_RENDERED_CHARS = 200_000
#: Loop iterations + calls + concatenations one rendering may perform.
MAX_RENDER_STEPS = 1_000_000
#: Wall-clock seconds one rendering may take.
MAX_RENDER_SECONDS = 5.0
_CHECK_CLOCK_EVERY = 1024
LOOP_FILTER = "_fsm_bounded_loop"


class Budget:
    """Steps and deadline left for one rendering; ``tick()`` raises ``SecurityError`` when spent."""

    def __init__(self, steps: int = MAX_RENDER_STEPS, seconds: float = MAX_RENDER_SECONDS) -> None:
        self.left = steps
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def tick(self) -> None:
        """Count one step; raise ``SecurityError`` when the steps or the time are used up."""
        self.left -= 1
        if self.left < 0:
            raise SecurityError(f"template does more than {MAX_RENDER_STEPS} loop steps or calls")
        if self.left % _CHECK_CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
            raise SecurityError(f"template takes longer than {self.seconds:g} seconds to render")


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "fsm_stage_template_budget", default=None)


class budget_scope:
    """Context manager: run the enclosed rendering under a fresh ``Budget``."""

    def __enter__(self) -> Budget:
        budget = Budget()
        self._token = _budget.set(budget)
        return budget

    def __exit__(self, *_exc: object) -> None:
        _budget.reset(self._token)


def _tick() -> None:
    budget = _budget.get()
    if budget is not None:
        budget.tick()


def _refuse_size(what: str, size: int) -> None:
    if size > MAX_RENDERED_CHARS:
        raise SecurityError(f"{what} would build {size} characters, more than {MAX_RENDERED_CHARS}")


def _unsafe_text(value: Any) -> str | None:
    """Why ``value`` has no safe text form (None when it has one)."""
    if isinstance(value, jinja2.Undefined):
        return None
    if isinstance(value, types.ModuleType):
        return "a module"
    if callable(value):
        name = (getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
                or type(value).__name__)
        return f"{name!r} is a function, method or class, not a text"
    kind = type(value)
    if kind.__str__ is object.__str__ and kind.__repr__ is object.__repr__:  # type: ignore[comparison-overlap]
        return f"a {kind.__name__} object has no text form"
    return None


def text_size(value: Any, *, what: str, shown: bool = False) -> int:
    """Projected length of ``str(value)``, stopping once past ``MAX_RENDERED_CHARS``.

    Containers count their items (shared references are counted each time, as ``str`` would
    print them). ``shown=True`` also refuses values without a safe text form (see module
    docstring). Raises ``SecurityError``.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if shown and (reason := _unsafe_text(item)) is not None:
            raise SecurityError(f"{what}: cannot show {reason}")
        if isinstance(item, str | bytes | bytearray):
            total += len(item) + 2
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 3 + 2
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            for key, val in list(item.items())[: MAX_RENDERED_CHARS]:
                stack.extend((key, val))
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            if total <= MAX_RENDERED_CHARS:
                stack.extend(item)
        else:
            total += 8
        if total > MAX_RENDERED_CHARS:
            _refuse_size(what, total)
    return total


def finalize(value: Any) -> Any:
    """The environment's ``finalize``: every ``<< x >>`` output is checked (module docstring)."""
    text_size(value, what="output", shown=True)
    return value


def concat(parts: Iterable[Any]) -> str:
    """``~`` concatenation with the size and safe-text checks applied before ``str()``."""
    _tick()
    items = list(parts)
    total = 0
    for item in items:
        total += text_size(item, what="'~' concatenation", shown=True)
        _refuse_size("'~' concatenation", total)
    return "".join(str(item) for item in items)


def bounded_loop(iterable: Any) -> Iterator[Any]:
    """Iterate ``iterable`` counting one budget step per item (every ``<% for %>`` loop)."""
    for item in iterable:
        _tick()
        yield item


def _int_args(args: Iterable[Any]) -> Iterator[int]:
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool):
            yield arg
        elif isinstance(arg, list | tuple):
            yield from (a for a in arg if isinstance(a, int) and not isinstance(a, bool))
        elif isinstance(arg, Mapping):
            yield from (a for a in arg.values() if isinstance(a, int) and not isinstance(a, bool))


_DIGITS = re.compile(r"\d+")


def _check_format(fmt: Any, args: Iterable[Any], what: str) -> None:
    """Refuse a ``%``/``str.format`` whose widths or precisions could exceed the limit."""
    numbers = list(_int_args(args))
    if isinstance(fmt, str):
        numbers += [int(d) for d in _DIGITS.findall(fmt) if len(d) < 12] + [
            MAX_RENDERED_CHARS + 1 for d in _DIGITS.findall(fmt) if len(d) >= 12]
    for number in numbers:
        if abs(number) > MAX_RENDERED_CHARS:
            raise SecurityError(f"{what} with a width or number {number} larger than {MAX_RENDERED_CHARS}")


def _replace_size(text: str, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return len(text)
    hits = len(text) + 1 if old == "" else text.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * (len(new) - len(old))


def _width(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _check_str_method(obj: str, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    what = f"str.{name}"
    if name in ("center", "ljust", "rjust", "zfill") and args:
        _refuse_size(what, _width(args[0]))
    elif name == "expandtabs":
        tab = _width(args[0] if args else kwargs.get("tabsize", 8))
        _refuse_size(what, len(obj) + obj.count("\t") * max(tab, 0))
    elif name == "replace" and len(args) >= 2:
        _refuse_size(what, _replace_size(obj, *args[:3]))
    elif name == "join" and args:
        items = list(args[0])
        size = sum(text_size(i, what=what) for i in items) + len(obj) * len(items)
        _refuse_size(what, size)
    elif name in ("format", "format_map"):
        _check_format(obj, (*args, *kwargs.values()), what)


def _materialised(args: Iterable[Any]) -> tuple[Any, ...]:
    """``args`` with one-shot iterators (``map``/``select`` results) turned into lists, so a
    size check can read them and the call still gets every item."""
    return tuple(list(a) if isinstance(a, Iterator) else a for a in args)


def check_call(obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """Budget step and size checks before the sandbox calls ``obj`` (macros, methods, loop()).

    Returns the positional arguments to call with (iterators materialised). Raises
    ``SecurityError``.
    """
    _tick()
    args = _materialised(args)
    for arg in (*args, *(v for k, v in kwargs.items() if not k.startswith("_"))):
        text_size(arg, what="call argument")
    method = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format / format_map
    owner = getattr(method, "__self__", None)
    if isinstance(owner, str):
        _check_str_method(owner, getattr(method, "__name__", ""), args, kwargs)
    elif isinstance(owner, list) and getattr(obj, "__name__", "") in ("extend", "append", "insert"):
        _refuse_size("growing a list", len(owner) + 1)
    return args


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Projected-size checks for ``*``, ``+`` and ``%`` (``**`` is checked in ``prompts``)."""
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(times, int) and not isinstance(times, bool):
                _refuse_size(f"repeating a {type(seq).__name__} {times} times", len(seq) * times)
    elif operator == "+" and isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        _refuse_size("'+'", len(left) + len(right))
    elif operator == "%" and isinstance(left, str):
        _check_format(left, right if isinstance(right, tuple | Mapping) else (right,), "'%' formatting")
        text_size(right, what="'%' formatting")


def _guard(name: str, func: Callable[..., Any], check: Callable[..., None] | None) -> Callable[..., Any]:
    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        args = _materialised(args)
        values = [a for a in args if not isinstance(a, jinja2.runtime.Context | jinja2.nodes.EvalContext
                                                   | jinja2.Environment)]
        for value in (*values, *kwargs.values()):
            text_size(value, what=f"filter {name!r}")
        if check is not None and values:
            check(*values, **kwargs)
        result = func(*args, **kwargs)
        if isinstance(result, str):
            _refuse_size(f"filter {name!r}", len(result))
        return result

    return guarded


def _lines(value: Any) -> int:
    return str(value).count("\n") + 1 if isinstance(value, str) else 1


def _check_indent(s: Any, width: Any = 4, *_a: Any, **_k: Any) -> None:
    pad = len(width) if isinstance(width, str) else _width(width)
    _refuse_size("filter 'indent'", len(str(s)) + _lines(s) * max(pad, 0))


def _check_center(s: Any, width: Any = 80, *_a: Any, **_k: Any) -> None:
    _refuse_size("filter 'center'", max(len(str(s)), _width(width)))


def _check_wordwrap(s: Any, width: Any = 79, break_long_words: Any = True, wrapstring: Any = None,
                    *_a: Any, **kwargs: Any) -> None:
    wrap = kwargs.get("wrapstring", wrapstring)
    wrap_len = len(wrap) if isinstance(wrap, str) else 1
    _refuse_size("filter 'wordwrap'", len(str(s)) * (1 + wrap_len))


def _check_join(value: Any, d: Any = "", *_a: Any, **kwargs: Any) -> None:
    sep = kwargs.get("d", d)
    items = list(value) if isinstance(value, Iterable) else []
    size = sum(text_size(i, what="filter 'join'") for i in items)
    _refuse_size("filter 'join'", size + (len(sep) if isinstance(sep, str) else 0) * len(items))


def _check_format_filter(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_format(value, (*args, *kwargs.values()), "filter 'format'")


def _check_replace(s: Any, old: Any = "", new: Any = "", count: Any = None, **_k: Any) -> None:
    _refuse_size("filter 'replace'", _replace_size(str(s), old, new, -1 if count is None else count))


def _check_count_arg(name: str) -> Callable[..., None]:
    def check(_value: Any, count: Any = 1, *_a: Any, **_k: Any) -> None:
        _refuse_size(f"filter {name!r}", _width(count))
    return check


_CHECKS: dict[str, Callable[..., None]] = {
    "indent": _check_indent, "center": _check_center, "wordwrap": _check_wordwrap,
    "join": _check_join, "format": _check_format_filter, "replace": _check_replace,
    "batch": _check_count_arg("batch"), "slice": _check_count_arg("slice"),
}


def bound_filters(filters: dict[str, Callable[..., Any]]) -> None:
    """Replace every filter in ``filters`` by a size-checked one; add the loop filter."""
    for name, func in list(filters.items()):
        filters[name] = _guard(name, func, _CHECKS.get(name))
    filters[LOOP_FILTER] = bounded_loop


def wrap_loops(tree: jinja2.nodes.Template) -> jinja2.nodes.Template:
    """Make every ``<% for %>`` iterate through ``bounded_loop`` (counted, timed)."""
    for loop in tree.find_all(jinja2.nodes.For):
        loop.iter = jinja2.nodes.Filter(loop.iter, LOOP_FILTER, [], [], None, None, lineno=loop.lineno)
    return tree


class BoundedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Code generator whose ``~`` goes through ``concat`` (sized and checked before ``str``)."""

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.fsm_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")
