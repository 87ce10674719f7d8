"""Templates and wording catalogs: one sandboxed jinja2 environment for the whole package.

Every user-visible text (review dialogs, notices, tool descriptions, command replies, errors
shown to the model) lives in per-language YAML catalogs ``templates/<language>/<name>.yaml``;
protocol constants (``fsm_stage.constants``) stay in code. ``render(text, **variables)``
renders one template, ``environment()`` is the shared environment, ``load_catalog(name,
language, override_dir)`` returns a merged ``Catalog``.

Syntax: ``<< name >>`` inserts a variable, ``<% if x %>…<% endif %>`` is a block, ``<# … #>``
a comment. The environment is sandboxed, has no globals, refuses undefined variables, does no
HTML escaping and is bounded in time and size (``fsm_stage.prompts._limits``); any failure is
a one-line ``PromptTemplateError``. A catalog merges, when present, ``<base>/en``,
``<override_dir>/en``, ``<base>/<language>``, ``<override_dir>/<language>``; overlays may only
override keys English defines, with the same shape (``PromptTemplateError`` otherwise). Rules and why:
``docs/prompts-decisions.md``."""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import jinja2
import jinja2.exceptions
import jinja2.meta
import jinja2.nodes
import jinja2.runtime
import jinja2.sandbox
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

import fsm_stage.prompts._limits as limits
from fsm_stage.errors import PromptTemplateError as PromptTemplateError
from fsm_stage.resources import data_dir
from fsm_stage.text import visible

__all__ = [
    "BLOCK_DELIMITERS",
    "COMMENT_DELIMITERS",
    "LANGUAGES",
    "MAX_RENDERED_CHARS",
    "VARIABLE_DELIMITERS",
    "Catalog",
    "PromptTemplateError",
    "clear_caches",
    "deep_merge",
    "environment",
    "interpolates_only",
    "load_catalog",
    "render",
    "section_lists_targets_plainly",
    "template_variables",
]

VARIABLE_DELIMITERS = ("<<", ">>")
BLOCK_DELIMITERS = ("<%", "%>")
COMMENT_DELIMITERS = ("<#", "#>")
LANGUAGES = ("en", "zh")
#: Longest text a template may render, and longest string/list any operation may build
#: (characters / items). Sections and catalog texts are a few hundred characters.
MAX_RENDERED_CHARS = limits.MAX_RENDERED_CHARS
_BASE_LANGUAGE = "en"


class _BoundedSandbox(jinja2.sandbox.SandboxedEnvironment):
    """Sandbox bounded in time and size (``fsm_stage.prompts._limits``): counted loops and
    calls, projected-size checks on ``*``/``**``/``+``/``%``/``~``, filters and ``str`` methods."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = limits.BoundedCodeGenerator
    fsm_concat = staticmethod(limits.concat)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        limits.check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any,
             *args: Any, **kwargs: Any) -> Any:
        return super().call(__context, __obj, *limits.check_call(__obj, args, kwargs), **kwargs)

    def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
        return limits.wrap_loops(super()._parse(source, name, filename))


@functools.cache
def environment() -> jinja2.sandbox.SandboxedEnvironment:
    """The package's single jinja2 environment (created once, shared, never mutated after).

    ``SandboxedEnvironment`` with ``StrictUndefined``, variable delimiters ``<< >>``, blocks
    ``<% %>``, comments ``<# #>``, no autoescaping, ``keep_trailing_newline=True``, and
    ``trim_blocks`` / ``lstrip_blocks`` (a block tag alone on its line leaves no blank line).
    ``globals`` is empty: a template reads nothing but its variables.
    ``*`` / ``**`` refuse results beyond ``MAX_RENDERED_CHARS`` items / ``MAX_INT_BITS`` (4096)
    bits; loops, calls, filters, ``str`` methods, ``+``/``%``/``~`` and every output are
    bounded as described in ``fsm_stage.prompts._limits``.
    """
    env = _BoundedSandbox(
        variable_start_string=VARIABLE_DELIMITERS[0],
        variable_end_string=VARIABLE_DELIMITERS[1],
        block_start_string=BLOCK_DELIMITERS[0],
        block_end_string=BLOCK_DELIMITERS[1],
        comment_start_string=COMMENT_DELIMITERS[0],
        comment_end_string=COMMENT_DELIMITERS[1],
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
        finalize=limits.finalize,
    )
    env.globals.clear()
    limits.bound_filters(env.filters)
    return env


def _describe(origin: str | None) -> str:
    return f"{origin}: " if origin else ""


@functools.lru_cache(maxsize=1024)
def _compile(text: str, origin: str | None) -> jinja2.Template:
    try:
        return environment().from_string(text)
    except jinja2.TemplateSyntaxError as err:
        raise PromptTemplateError(
            f"{_describe(origin)}template syntax error on line {err.lineno}: {err.message}"
        ) from None


def _one_line(err: BaseException) -> str:
    return visible(" ".join(str(err).split())) or type(err).__name__


def _template_line(err: BaseException) -> str:
    """`` on line N`` for the deepest template frame of ``err``'s traceback, else ``""``."""
    line = None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" on line {line}" if line is not None else ""


def _render(template_text: str, origin: str | None, variables: Mapping[str, Any]) -> str:
    template = _compile(template_text, origin)
    try:
        parts: list[str] = []
        size = 0
        with limits.budget_scope():
            for chunk in template.generate(**variables):
                size += len(chunk)
                if size > MAX_RENDERED_CHARS:
                    raise PromptTemplateError(
                        f"{_describe(origin)}template renders more than {MAX_RENDERED_CHARS} characters"
                    )
                parts.append(chunk)
        return "".join(parts)
    except PromptTemplateError:
        raise
    except jinja2.UndefinedError as err:
        given = ", ".join(sorted(variables)) or "none"
        raise PromptTemplateError(
            f"{_describe(origin)}template uses an undefined variable: {err.message} (given: {given})"
        ) from None
    except jinja2.exceptions.SecurityError as err:
        raise PromptTemplateError(
            f"{_describe(origin)}template refused by the sandbox{_template_line(err)}: {_one_line(err)}"
        ) from None
    except Exception as err:  # any runtime failure of a deployer's template is the template's fault
        raise PromptTemplateError(
            f"{_describe(origin)}template failed while rendering{_template_line(err)}: "
            f"{type(err).__name__}: {_one_line(err)}"
        ) from None


#: Rendered catalog texts by ``(template text, sorted variables)`` (``Catalog.text``); cleared
#: when it holds ``_RENDERED_MAX`` entries. Renders are pure functions of the text and the
#: variables except through jinja's ``random`` filter and ``lipsum``, which are never cached.
_RenderKey = tuple[str, tuple[tuple[str, type, Any], ...]]
_RENDERED: dict[_RenderKey, str] = {}
_RENDERED_MAX = 4096
_SCALARS = (str, int, float, bool, type(None))


def _render_key(template_text: str, variables: Mapping[str, Any]) -> _RenderKey | None:
    """The ``_RENDERED`` key, or None when the render must not be cached (a mutable or
    non-scalar variable, or a template that may use randomness)."""
    for value in variables.values():
        if type(value) not in _SCALARS:
            return None
    if "random" in template_text or "lipsum" in template_text:
        return None
    # the type is part of the key: ``True == 1`` but they render differently
    # keys are unique, so sorting the triples compares keys only (never the values)
    return template_text, tuple(sorted([(k, type(v), v) for k, v in variables.items()]))


def render(template_text: str, /, **variables: Any) -> str:
    """Render ``template_text`` with ``variables`` through the shared sandboxed environment.

    Returns the rendered string (a trailing newline of the template is kept). Compiled
    templates are cached by text. Raises ``PromptTemplateError`` (a ``UserError``, one line) for
    a syntax error, an undefined variable (naming it and the variables that were given), a
    sandbox violation, output longer than ``MAX_RENDERED_CHARS`` or any other runtime error
    (``ZeroDivisionError``, ``TypeError``, …): never a traceback.
    """
    return _render(template_text, None, variables)


def template_variables(template_text: str) -> set[str]:
    """Names of the variables ``template_text`` reads from its context (for config validation).

    Raises ``PromptTemplateError`` when the text does not compile.
    """
    try:
        ast = environment().parse(template_text)
    except jinja2.TemplateSyntaxError as err:
        raise PromptTemplateError(f"template syntax error on line {err.lineno}: {err.message}") from None
    return set(jinja2.meta.find_undeclared_variables(ast))


def _name_uses(section: str, name: str) -> tuple[int, int] | None:
    """``(uses, bare)``: how often ``section`` reads variable ``name`` at all and how often as a
    bare ``<< name >>`` output (no filter, test, attribute, operator or assignment). None when
    the section does not compile."""
    try:
        ast = environment().parse(section)
    except jinja2.TemplateSyntaxError:
        return None
    uses = sum(1 for n in ast.find_all(jinja2.nodes.Name) if n.name == name)
    bare = sum(1 for out in ast.find_all(jinja2.nodes.Output) for n in out.nodes
               if isinstance(n, jinja2.nodes.Name) and n.name == name)
    return uses, bare


@functools.lru_cache(maxsize=256)
def section_lists_targets_plainly(section: str) -> bool:
    """Whether ``section`` uses ``stage_targets`` only as bare ``<< stage_targets >>`` outputs
    (at least once): such a section cannot read well when there are no targets, so
    ``stage:policy`` then shows a catalog line instead, and config validation warns
    about stages with ``targets: []``. A section that tests, filters or defaults
    the variable (``<% if stage_targets %>``, ``<< stage_targets or … >>``) handles the empty
    case itself; one that never mentions it has nothing to fix. A section that does not
    compile returns False (rendering it reports the error).
    """
    counts = _name_uses(section, "stage_targets")
    return counts is not None and counts[0] > 0 and counts[0] == counts[1]


@functools.lru_cache(maxsize=256)
def interpolates_only(section: str, names: frozenset[str]) -> bool:
    """Whether ``section`` reads each variable of ``names`` only as bare ``<< name >>`` outputs
    (or not at all). For such a section and string values, whether a render succeeds depends on
    the values only through their lengths (every output and the total are size-checked), so
    rendering once with the longest value of each decides it for all shorter ones. False when
    the section does not compile.
    """
    for name in names:
        counts = _name_uses(section, name)
        if counts is None or counts[0] != counts[1]:
            return False
    return True


def deep_merge(base: Any, overlay: Any) -> Any:
    """Merge ``overlay`` over ``base`` (docs/contracts.md; S103–S107).

    If either side is not a plain mapping (lists count as "not a mapping"), the result is
    ``overlay``. Otherwise it is a new ``dict``: a deep copy of ``base`` with each overlay key
    merged recursively. The inputs are never mutated and the result shares no mutable
    structure with them; merging the same overlay twice equals merging it once.
    """
    if not isinstance(base, Mapping) or not isinstance(overlay, Mapping):
        return copy.deepcopy(overlay)
    merged: dict[Any, Any] = {key: copy.deepcopy(value) for key, value in base.items()}
    for key, value in overlay.items():
        merged[key] = deep_merge(merged[key], value) if key in merged else copy.deepcopy(value)
    return merged


# --------------------------------------------------------------------------- catalogs


def _plain(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a catalog tree as plain nested dicts (picklable, unlike read-only views)."""
    return {k: _plain(v) if isinstance(v, Mapping) else copy.deepcopy(v) for k, v in tree.items()}


def _iter_leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _iter_leaves(value, dotted + ".")
        else:
            yield dotted, value


def _read_catalog_file(path: Path) -> dict[str, Any]:
    yaml = YAML(typ="safe", pure=True)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise PromptTemplateError(f"{path}: cannot read catalog: {err.strerror or err}") from None
    except MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise PromptTemplateError(f"{where}: invalid YAML: {err.problem or err}") from None
    except YAMLError as err:
        raise PromptTemplateError(f"{path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PromptTemplateError(f"{path}: a catalog must be a mapping of keys to texts or groups")
    _check_shape(path, data)
    return data


def _check_shape(path: Path, tree: Mapping[Any, Any], prefix: str = "") -> None:
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if not isinstance(key, str) or not key or "." in key:
            raise PromptTemplateError(
                f"{path}: {visible(dotted)}: a catalog key must be a non-empty string without '.'")
        if isinstance(value, Mapping):
            _check_shape(path, value, dotted + ".")
        elif not isinstance(value, str):
            raise PromptTemplateError(
                f"{path}: {visible(dotted)}: must be a text (string), got {type(value).__name__}")


def _check_overlay(path: Path, base: Mapping[str, Any], overlay: Mapping[str, Any], prefix: str = "") -> None:
    for key, value in overlay.items():
        dotted = f"{prefix}{key}"
        if key not in base:
            known = visible(", ".join(sorted(str(k) for k in base))) or "none"
            raise PromptTemplateError(f"{path}: {visible(dotted)}: unknown catalog key (known here: {known})")
        if isinstance(base[key], Mapping) != isinstance(value, Mapping):
            expected = "a group of texts" if isinstance(base[key], Mapping) else "a text"
            raise PromptTemplateError(
                f"{path}: {visible(dotted)}: must be {expected}, as in the English catalog")
        if isinstance(value, Mapping):
            _check_overlay(path, base[key], value, dotted + ".")


@attrs.frozen(eq=False)
class Catalog:
    """A merged wording catalog (read-only); see the module docstring for the layering.

    ``name``: catalog name (``"stage_switch"``); ``language``: ``en`` / ``zh``; ``sources``:
    the files merged, in order. Keys are dotted paths into nested groups
    (``"review.full_question"``). Compared and hashed by identity (loaded catalogs are cached).
    """

    name: str
    language: str
    sources: tuple[Path, ...]
    #: a private deep copy of the ``data`` given (a later change to that dict changes nothing here)
    _data: Mapping[str, Any] = attrs.field(repr=False, alias="data", converter=_plain)
    #: Texts already looked up by dotted key (``raw``); the data is the catalog's own copy.
    _texts: dict[str, str] = attrs.field(factory=dict, init=False, repr=False)

    def _lookup(self, key: str) -> Any:
        node: Any = self._data
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise KeyError(f"catalog {self.name!r} ({self.language}) has no key {key!r}")
            node = node[part]
        return node

    def raw(self, key: str) -> str:
        """The unrendered template text at dotted ``key``.

        Raises ``KeyError`` naming the key and the catalog when the key is missing or names a
        group rather than a text.
        """
        found = self._texts.get(key)
        if found is not None:
            return found
        node = self._lookup(key)
        if not isinstance(node, str):
            raise KeyError(f"catalog {self.name!r} ({self.language}): {key!r} is a group, not a text")
        self._texts[key] = node
        return node

    def text(self, key: str, **variables: Any) -> str:
        """Render the text at dotted ``key`` with ``variables`` through the shared environment.

        Raises ``KeyError`` for a missing key and ``PromptTemplateError`` for an undefined
        variable (the message names the catalog and key). A successful render is remembered
        (``_RENDERED``) when every variable is an immutable scalar and the template uses no
        randomness: the same text with the same variables is not rendered again.
        """
        template = self.raw(key)
        cache_key = _render_key(template, variables)
        if cache_key is not None:
            hit = _RENDERED.get(cache_key)
            if hit is not None:
                return hit
        out = _render(template, f"catalog {self.name!r} ({self.language}) key {key!r}", variables)
        if cache_key is not None:
            if len(_RENDERED) >= _RENDERED_MAX:
                _RENDERED.clear()
            _RENDERED[cache_key] = out
        return out

    def has(self, key: str) -> bool:
        """Whether dotted ``key`` names a text in this catalog."""
        try:
            self.raw(key)
        except KeyError:
            return False
        return True

    def keys(self) -> tuple[str, ...]:
        """Every dotted text key, in file order."""
        return tuple(k for k, _ in _iter_leaves(self._data))

    def variables(self, key: str) -> set[str]:
        """Variables the text at ``key`` reads (see ``template_variables``)."""
        return template_variables(self.raw(key))

    def as_dict(self) -> dict[str, Any]:
        """A deep copy of the merged catalog as plain nested dicts."""
        return _plain(self._data)


_cache: dict[tuple[Any, ...], Catalog] = {}
_cache_lock = threading.Lock()


def _signature(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    sig = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        sig.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(sig)


def load_catalog(
    name: str,
    language: str = _BASE_LANGUAGE,
    override_dir: Path | str | None = None,
    *,
    base_dir: Path | str | None = None,
) -> Catalog:
    """Load catalog ``name`` in ``language``: English, then each overlay that exists (module docs).

    ``base_dir`` defaults to the shipped ``templates/`` folder; ``override_dir`` is a deployer's
    folder with the same ``<language>/<name>.yaml`` layout (missing files are skipped). Every
    text is compiled at load time, so a syntax error is reported immediately. Results are cached
    and reloaded when a contributing file changes (mtime/size).

    Raises ``PromptTemplateError`` (a ``UserError``) for an unsupported language, a missing English
    file, invalid YAML, non-text leaves, unknown override keys or a template syntax error.
    """
    if language not in LANGUAGES:
        choices = ", ".join(LANGUAGES)
        raise PromptTemplateError(f"catalog {name!r}: language must be one of {choices}, got {language!r}")
    base = Path(base_dir) if base_dir is not None else data_dir("templates")
    layers: list[Path] = [base / _BASE_LANGUAGE / f"{name}.yaml"]
    if override_dir is not None:
        layers.append(Path(override_dir) / _BASE_LANGUAGE / f"{name}.yaml")
    if language != _BASE_LANGUAGE:
        layers.append(base / language / f"{name}.yaml")
        if override_dir is not None:
            layers.append(Path(override_dir) / language / f"{name}.yaml")
    key = (name, language, str(base), str(override_dir), _signature(layers))
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    if not layers[0].is_file():
        raise PromptTemplateError(f"{layers[0]}: catalog {name!r} has no English file")
    merged: dict[str, Any] = _read_catalog_file(layers[0])
    used = [layers[0]]
    for path in layers[1:]:
        if not path.is_file():
            continue
        overlay = _read_catalog_file(path)
        _check_overlay(path, merged, overlay)
        merged = deep_merge(merged, overlay)
        used.append(path)
    for dotted, text in _iter_leaves(merged):
        _compile(text, f"catalog {name!r} ({language}) key {dotted!r}")
    catalog = Catalog(name=name, language=language, sources=tuple(used), data=merged)
    with _cache_lock:
        _cache[key] = catalog
    return catalog


def clear_caches() -> None:
    """Forget loaded catalogs and compiled templates (tests; long-lived processes)."""
    with _cache_lock:
        _cache.clear()
    _compile.cache_clear()
    _RENDERED.clear()
