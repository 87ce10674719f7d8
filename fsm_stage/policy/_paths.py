"""Path arguments of a tool call, read and normalised against the session cwd for path rules.

``call_paths(args, expected, workspace)`` returns every path a call names, each as its
workspace-relative forms (lexical, and physical through symlinks when the cwd exists), or the
reasons it cannot be classified. ``workspace(cwd)`` resolves the cwd and probes (once per
folder, cached) whether the file system folds case. ``PathGlob`` matches those forms by path
segment. The rules are the tables of docs/tool-policy.md.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

#: Words that make an argument key path-like (the key is split at ``_``, ``-``, ``.``, spaces
#: and lower→upper case changes: ``file_path``, ``targetFile``, ``src-dir`` are path-like).
PATH_WORDS: frozenset[str] = frozenset({
    "path", "paths", "file", "files", "filename", "filenames", "filepath", "filepaths",
    "dir", "dirs", "directory", "directories", "folder", "folders", "cwd", "workdir",
    "dest", "destination", "pathname", "pathnames", "src", "srcs", "source", "sources", "dst", "dsts",
    "target", "targets", "out", "output", "outputs", "outfile", "outdir", "destdir", "uri", "uris",
    "url", "urls",
})
#: Key words that take a list of paths (a path-like key ending in one of them, or a declared
#: ``path_args`` name ending in ``s``); every other path-like key takes one string.
PLURAL_WORDS: frozenset[str] = frozenset({
    "paths", "files", "filenames", "filepaths", "dirs", "directories", "folders", "pathnames",
    "srcs", "sources", "dsts", "targets", "outputs", "uris", "urls",
})
MAX_PATH_CHARS = 4096
MAX_PATHS = 256
MAX_NODES = 10_000
_KEY_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_PROBE_ENTRIES = 64

Case = Literal["fold", "exact", "unknown"]


def _words(key: str) -> list[str]:
    return [w.lower() for w in _KEY_SPLIT.split(key) if w]


def path_like(key: str) -> bool:
    """True when the argument name ``key`` holds a path by its words (``PATH_WORDS``)."""
    return any(w in PATH_WORDS for w in _words(key))


def _takes_list(key: str) -> bool:
    words = _words(key)
    return bool(words) and (words[-1] in PLURAL_WORDS or (not path_like(key) and key.endswith("s")))


@attrs.frozen
class Workspace:
    """The session cwd a call's paths are read against: ``root`` (absolute, lexically clean;
    None: the session has no cwd), ``real`` (its resolved path when it exists, else None) and
    ``case`` — ``fold`` (the file system ignores case), ``exact`` or ``unknown``."""

    root: str | None
    real: str | None
    case: Case


def _lexical(path: str) -> str:
    return "/" + "/".join(s for s in path.split("/") if s not in ("", "."))


def _differs_by_case(parent: str, name: str) -> bool | None:
    """Probe one entry: True when ``name`` with its case swapped is the same file."""
    other = name.swapcase()
    try:
        mine = os.stat(os.path.join(parent, name))
        theirs = os.stat(os.path.join(parent, other))
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return os.path.samestat(mine, theirs)


def _probe_case(real: str) -> Case:
    """Stat an entry of ``real`` (else ``real`` itself in its parent) under swapped case."""
    candidates: list[tuple[str, str]] = []
    try:
        with os.scandir(real) as it:
            for k, entry in enumerate(it):
                if k >= _PROBE_ENTRIES:
                    break
                if entry.name.swapcase() != entry.name:
                    candidates.append((real, entry.name))
                    break
    except OSError:
        pass
    head, tail = os.path.split(real)
    if tail and tail.swapcase() != tail:
        candidates.append((head, tail))
    for parent, name in candidates:
        same = _differs_by_case(parent, name)
        if same is not None:
            return "fold" if same else "exact"
    return "unknown"


def workspace(cwd: str | None) -> Workspace:
    """The ``Workspace`` of a session cwd, resolved at every call (a cwd created, or replaced
    by a link, since the last call is read as it is now); only the case probe of a resolved
    folder is cached for the process (it stats at most two entries once). A relative or
    missing cwd is kept lexically with case ``unknown``."""
    if cwd is None or not cwd.startswith("/") or "\x00" in cwd:
        return _NO_WORKSPACE
    root = _lexical(cwd)
    try:
        real = os.path.realpath(root) if os.path.isdir(root) else None
    except (OSError, ValueError):
        real = None
    return Workspace(root, real, _case_of(real) if real is not None else "unknown")


_NO_WORKSPACE = Workspace(None, None, "unknown")


@functools.lru_cache(maxsize=64)
def _case_of(real: str) -> Case:
    return _probe_case(real)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def _inside(path: str, root: str, fold: bool) -> str | None:
    """Absolute clean ``path`` relative to ``root`` (``""``: the root itself), or None when it
    lies outside; compared segment by segment, case-folded with ``fold``."""
    segs = [s for s in path.split("/") if s]
    base = [s for s in root.split("/") if s]
    head = segs[: len(base)]
    same = [_fold(s) for s in head] == [_fold(s) for s in base] if fold else head == base
    return "/".join(segs[len(base):]) if same and len(segs) >= len(base) else None


def normalise(path: str, ws: Workspace) -> tuple[tuple[str, ...], str | None]:
    """The workspace-relative forms of ``path`` (``""`` is the cwd itself; POSIX separators, no
    ``.``, ``..``, empty or trailing parts), or ``((), why)`` when it cannot be classified:
    empty, NUL, longer than ``MAX_PATH_CHARS``, ``~``, a drive or URL scheme, absolute without
    a session cwd, leaving the cwd lexically or through a symlink, or (where ``/`` is the only
    separator) holding a backslash: a tool there reads ``k\\..\\x`` as one name, so no
    reading of it is safe."""
    if not path or "\x00" in path or len(path) > MAX_PATH_CHARS:
        return (), "is empty, too long or holds a NUL"
    if "\\" in path and os.sep != "\\":
        return (), "holds a backslash (a separator on Windows, a name character here)"
    text = path.replace("\\", "/")
    if text.startswith("~") or _SCHEME.match(text.split("/", 1)[0]):
        return (), "is home-relative, a drive or a URL"
    stack: list[str] = []
    if text.startswith("/") and ws.root is None:
        return (), "is absolute and the session has no cwd"
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                if not text.startswith("/"):
                    return (), "leaves the session cwd"
                continue  # "/.." is "/"
            stack.pop()
        else:
            stack.append(part)
    if text.startswith("/"):
        assert ws.root is not None
        rel = _inside("/" + "/".join(stack), ws.root, ws.case == "fold")
        if rel is None:
            return (), "lies outside the session cwd"
        lexical = rel
    else:
        lexical = "/".join(stack)
    forms = [lexical]
    if ws.real is not None and ws.root is not None:
        joined = text if text.startswith("/") else posixpath.join(ws.root, text)
        try:
            real = os.path.realpath(joined)
        except (OSError, ValueError):
            return (), "cannot be resolved"
        physical = _inside(real, ws.real, ws.case == "fold")
        if physical is None:
            return (), "leaves the session cwd through a symlink"
        if physical != lexical:
            forms.append(physical)
    return tuple(forms), None


@attrs.frozen
class CallPaths:
    """What a path rule reads from one call: ``forms`` (per path, its normalised forms) and
    ``problems`` (why some argument could not be classified; empty when every path is clean)."""

    forms: tuple[tuple[str, ...], ...]
    problems: tuple[str, ...]


def _nested_path_keys(value: object) -> str | None:
    """The first path-like key nested in ``value`` (or ``…`` past ``MAX_NODES`` nodes)."""
    todo: list[object] = [value]
    seen = 0
    while todo:
        seen += 1
        if seen > MAX_NODES:
            return "…"
        item = todo.pop()
        if isinstance(item, Mapping):
            for k, v in item.items():
                if isinstance(k, str) and path_like(k):
                    return k
                todo.append(v)
        elif isinstance(item, list | tuple):
            todo.extend(item)
    return None


def call_paths(args: object, expected: Sequence[str], ws: Workspace) -> CallPaths:
    """Every path of ``args`` (a call's decoded arguments) for a rule reading ``expected`` keys.
    A problem: arguments that are not an object; a path-like key not in ``expected``; a path
    key whose value is not a string (or, for list keys, a non-empty list of strings); a path
    nested inside another argument; no path at all; a path ``normalise`` rejects."""
    if not isinstance(args, Mapping):
        return CallPaths((), ("the arguments are not a JSON object",))
    forms: list[tuple[str, ...]] = []
    problems: list[str] = []
    for key, value in args.items():
        key = str(key)
        if key in expected or path_like(key):
            if key not in expected:
                problems.append(f"argument {key!r} is a path the rule does not name")
                continue
            if isinstance(value, str):
                values: list[object] = [value]
            elif isinstance(value, list) and value and _takes_list(key):
                values = list(value)
            else:
                kind = "a list" if isinstance(value, list) else type(value).__name__
                problems.append(f"argument {key!r} is {kind} where a path is expected")
                continue
            for item in values[:MAX_PATHS]:
                if not isinstance(item, str):
                    kind = type(item).__name__
                    problems.append(f"argument {key!r} holds a {kind} where a path is expected")
                    continue
                found, why = normalise(item, ws)
                if why is not None:
                    problems.append(f"path {item[:200]!r} {why}")
                else:
                    forms.append(found)
            if len(values) > MAX_PATHS:
                problems.append(f"argument {key!r} holds more than {MAX_PATHS} paths")
        else:
            nested = _nested_path_keys(value)
            if nested is not None:
                problems.append(f"argument {key!r} nests a path ({nested})")
    if not forms and not problems:
        problems.append(f"no path argument ({', '.join(expected)})")
    return CallPaths(tuple(forms), tuple(problems))


class PathGlob:
    """One ``paths`` glob matched segment by segment: ``**`` any number of folders (or none),
    ``*`` / ``?`` within one segment, everything else literal. ``fold``: compare case-folded."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._parts: dict[bool, list[re.Pattern[str] | None]] = {}

    def _compiled(self, fold: bool) -> list[re.Pattern[str] | None]:
        if fold not in self._parts:
            text = _fold(self.pattern) if fold else self.pattern
            parts: list[re.Pattern[str] | None] = []
            for seg in (s for s in text.replace("\\", "/").split("/") if s not in ("", ".")):
                if seg == "**":
                    if not parts or parts[-1] is not None:
                        parts.append(None)
                    continue
                out = []
                for ch in seg:
                    out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
                parts.append(re.compile("".join(out).replace("[^/]*[^/]*", "[^/]*")))
            self._parts[fold] = parts
        return self._parts[fold]

    def match(self, path: str, *, fold: bool, folder: bool) -> bool:
        """True when ``path`` (normalised, ``""`` the cwd) matches; with ``folder`` also when it
        names a folder that could hold a match (``secret`` for ``secret/**``, ``""`` for all)."""
        parts = self._compiled(fold)
        segs = [s for s in (_fold(path) if fold else path).split("/") if s]

        def close(states: set[int]) -> set[int]:
            out = set(states)
            for j in sorted(states):
                k = j
                while k < len(parts) and parts[k] is None:
                    k += 1
                    out.add(k)
            return out

        states = close({0})
        for seg in segs:
            step: set[int] = set()
            for j in states:
                if j < len(parts):
                    part = parts[j]
                    if part is None:
                        step.add(j)
                    elif part.fullmatch(seg):
                        step.add(j + 1)
            states = close(step)
            if not states:
                return False
        return len(parts) in states or (folder and bool(states))
