"""Round-trip YAML parsing: ruamel text -> tree -> plain Python data with positions.

``parse_yaml`` parses a text (duplicate keys refused) and turns every syntax error into one
positioned problem on a report; ``to_plain`` converts the round-trip tree to plain dicts,
lists and scalars while recording each key's and value's position (``Loc``) on the report,
optionally renaming keys (``Renamer``). This path is the reference for messages and
positions; ``fsm_stage._yaml.fast`` is the libyaml shortcut for plain documents.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fsm_stage._yaml.problems import Loc, NativePath, describe_value, join

if TYPE_CHECKING:
    from fsm_stage._yaml.report import ProblemReport


def plain_scalar(value: object) -> object:
    """A ruamel scalar (``ScalarBoolean``, ``ScalarFloat``, ``ScalarInt``, str subclass) as
    the plain Python value; other values unchanged."""
    from ruamel.yaml.scalarbool import ScalarBoolean
    from ruamel.yaml.scalarfloat import ScalarFloat
    from ruamel.yaml.scalarint import ScalarInt

    if isinstance(value, ScalarBoolean):
        return bool(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, ScalarFloat):
        return float(value)
    if isinstance(value, ScalarInt):
        return int(value)
    if isinstance(value, str):
        from fsm_stage._yaml.limits import join_surrogate_pairs

        return join_surrogate_pairs(str(value))
    return value


#: ``rename(mapping_path, key, key_position, key_display)`` -> native key, or None to drop
#: the key (the renamer has reported it).
Renamer = Callable[[NativePath, str, tuple[int, int], str], str | None]


def to_plain(
    node: object,
    npath: NativePath,
    display: str,
    report: ProblemReport,
    rename: Renamer | None = None,
) -> object:
    """Convert a ruamel round-trip node to plain Python, recording each value's position.

    ``rename`` maps a file key to its native name, or None to drop it (an unknown key,
    already reported by the renamer). Keys merged in with ``<<: *anchor`` are positioned at
    the mapping. A YAML tag is reported and then ignored. (ruamel turns a recursive alias
    into null, so no cycle reaches this function.)
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar


    here = report.loc(npath).value
    tag = getattr(getattr(node, "tag", None), "value", None)
    if isinstance(node, TaggedScalar) or (tag is not None and isinstance(node, CommentedMap | CommentedSeq)):
        report.error(npath, f"has the YAML tag {tag}; fsm_stage knows no tags, remove it")
        if isinstance(node, TaggedScalar):
            return node.value
    if isinstance(node, CommentedMap):
        mpos = node_pos(node, here)
        out: dict[str, object] = {}
        positions = node.lc.data or {}  # None for `!!omap`
        for key in list(node.keys()):
            if key in positions:
                kl, kc, vl, vc = (n + 1 for n in positions[key])
                kpos, vpos = (kl, kc), (vl, vc)
            else:  # merged from an anchor with `<<:`
                kpos = vpos = mpos
            kdisplay = join(display, str(key))
            if not isinstance(key, str):
                report.error_at(
                    kpos, kdisplay, f"key {key!r} is {describe_value(key)}; expected a name (a string key)"
                )
                continue
            native = rename(npath, key, kpos, kdisplay) if rename is not None else key
            if native is None:
                continue
            child = (*npath, native)
            # a null value has no node of its own: point at its key
            report.locs[child] = Loc(kdisplay, kpos, kpos if node[key] is None else vpos)
            out[native] = to_plain(node[key], child, kdisplay, report, rename)
        return out
    if isinstance(node, CommentedSeq):
        items: list[object] = []
        positions = node.lc.data or {}
        for i, item in enumerate(node):
            ipos = (positions[i][0] + 1, positions[i][1] + 1) if i in positions else here
            child = (*npath, i)
            idisplay = join(display, i)
            report.locs[child] = Loc(idisplay, ipos, ipos)
            items.append(to_plain(item, child, idisplay, report, rename))
        return items
    return plain_scalar(node)


def node_pos(node: object, default: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    """1-based (line, column) where ruamel recorded ``node``, or ``default``."""
    lc = getattr(node, "lc", None)
    if lc is None or lc.line is None:
        return default
    return (lc.line + 1, lc.col + 1)


def _mapping_display(text: str, mark: Any) -> str:
    """Display path of the mapping that starts at ``mark`` (duplicate keys allowed), or ''."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if mark is None:
        return ""
    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = True
    try:
        tree = yaml.load(text)
    except Exception:  # another syntax error later in the file: keep the bare key
        return ""

    def search(node: object, display: str) -> str | None:
        lc = getattr(node, "lc", None)
        if (
            isinstance(node, CommentedMap)
            and lc is not None
            and (lc.line, lc.col) == (mark.line, mark.column)
        ):
            return display
        children: list[tuple[object, str]] = []
        if isinstance(node, CommentedMap):
            children = [(v, join(display, str(k))) for k, v in node.items()]
        elif isinstance(node, CommentedSeq):
            children = [(v, join(display, i)) for i, v in enumerate(node)]
        for child, child_display in children:
            found = search(child, child_display)
            if found is not None:
                return found
        return None

    return search(tree, "") or ""


def parse_yaml(
    text: str, report: ProblemReport, *, skip_top_key: Callable[[str], bool] = lambda key: False
) -> tuple[bool, object]:
    """Parse ``text`` with ruamel round-trip (duplicate keys are errors): ``(ok, tree)``.

    A syntax error is one problem on ``report`` (KEY ``(yaml)``, a duplicate key: its dotted
    path) and gives ``(False, None)``; never raises for bad input. The document is first
    checked by ``limits.check_events`` (size, depth, alias expansion outside the top-level keys
    ``skip_top_key`` accepts, tags, lone surrogates): a violation gives ``(False, None)`` too.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    from fsm_stage._yaml.core_schema import CoreResolver
    from fsm_stage._yaml.limits import check_events

    if not check_events(text, report, skip_top_key):
        return False, None
    yaml = YAML(typ="rt", pure=True)
    yaml.Resolver = CoreResolver  # numbers as editors read them (YAML 1.2 core schema)
    yaml.allow_duplicate_keys = False
    try:
        return True, yaml.load(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark
        problem = (err.problem or "invalid YAML").strip()
        context = (err.context or "").strip()
        key = "(yaml)"
        if isinstance(err, DuplicateKeyError):
            m = re.search(r'found duplicate key "(.*?)"', problem)
            if m:
                key = join(_mapping_display(text, err.context_mark), m.group(1))
            message = f"{problem}; each key may appear once per mapping"
        elif err.context_mark is not None and (
            "end of stream" in problem
            or "stream end" in problem
            or context.startswith(("while parsing a flow", "while scanning a quoted"))
        ):
            # an unclosed quote or bracket: point at where it was opened
            mark = err.context_mark
            what = re.sub(r"^while (?:scanning|parsing) (?:an? )?", "", context) or "this construct"
            fix = "add the matching closing quote" if "quoted" in what else "add the closing bracket or brace"
            message = f"the {what} opened here is never closed; {fix}"
        elif "\\t" in problem or "\t" in problem:
            message = f"{problem}; indent with spaces, YAML does not allow tabs here"
        else:
            message = f"{problem} ({context})" if context else problem
        pos = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        report.error_at(pos, key, f"YAML syntax error: {message}")
        return False, None
    except (YAMLError, ValueError, TypeError, AttributeError, KeyError, RecursionError) as err:
        # unmarked errors, and ruamel internals tripping over odd input (e.g. a bare `!!set`
        # tag): still one line, never a traceback
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        report.error_at((1, 1), "(yaml)", f"YAML error: cannot read this document ({first})")
        return False, None


# ---------------------------------------------------------------------------------------------
# Fast path: libyaml events → plain data with positions
# ---------------------------------------------------------------------------------------------

