"""Loading stage-graph files: ``load_config`` / ``load_config_text`` -> ``ConfigFile``.

A file is either the native form (one mapping: the graph keys in snake_case plus an optional
``plan_mode:`` mapping; top-level ``x-…`` keys are ignored) or the plugin-list form
(``fsm_stage.config.plugin``). Every problem of a file is collected and raised as one
``ConfigError``, one line each: ``PATH:LINE:COLUMN: KEY: message`` (KEY ``(yaml)`` for
a syntax error, ``(file)`` for the file as a whole). Warnings (unreachable stages, a stage
without targets under a section listing them) are returned in ``ConfigFile.warnings``;
``strict=True`` makes them errors. A plain native file takes the libyaml fast path and is
positioned only when it has something to report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm_stage.errors import ConfigError as ConfigError

if TYPE_CHECKING:  # the loader's parts load with the first file loaded, not at import
    from fsm_stage._yaml import Loc, NativePath
    from fsm_stage.config.model import ConfigFile, GraphConfig, PlanModeConfig
    from fsm_stage.config.vocabulary import GraphReport

#: the top-level key prefix of the user's own keys (``x-…``; ``config.model.EXTENSION_PREFIX``)
_EXTENSION_PREFIX = "x-"

def load_config_text(text: str, path: str = "<string>", *, strict: bool = False,
                     tools: Iterable[str] | None = None) -> ConfigFile:
    """Load one YAML document (native or plugin-list form) into a validated ``ConfigFile``.

    ``path`` is used in messages and as the default graph name (its stem). Raises
    ``ConfigError`` whose ``problems`` are every positioned problem of the file (one line each,
    sorted by position). ``strict`` turns warnings (unreachable stages) into errors. ``tools``
    is the host's tool catalog: tool names of ``tools`` policies it lacks are then errors
    (without it, names in no ``tool_groups`` entry are warnings; ``config.policy``).
    Contracts: docs/contracts.md (S1–S12, B1–B5).
    """
    if not isinstance(text, str):
        raw = isinstance(text, bytes | bytearray)
        hint = " (decode bytes first, e.g. data.decode('utf-8'))" if raw else ""
        raise TypeError(f"load_config_text: expected the YAML text as str, got {type(text).__name__}{hint}")
    if not isinstance(path, str):
        raise TypeError(f"load_config_text: path must be a str (used in messages), got {type(path).__name__}")
    import attrs

    from fsm_stage._yaml import fast_parse, parse_yaml, unknown_key_message
    from fsm_stage.config.model import PLAN_MODE_KEY, ConfigFile, GraphConfig, PlanModeConfig
    from fsm_stage.config.models import check_models
    from fsm_stage.config.policy import check_policies
    from fsm_stage.config.review_rules import check_review_rules
    from fsm_stage.config.rules import check_field_rules, check_graph, check_loaded_graph
    from fsm_stage.config.vocabulary import GraphReport, class_fields_by_key, structure

    report = GraphReport(path)
    stem = Path(path).stem if not path.startswith("<") else "stage-graph"
    native: dict[str, Any] | None = None
    fast = fast_parse(text, locate=False)
    if fast is not None:
        native = _without_extensions(fast[0])
        report.locate = lambda: _fast_locations(text)
    if not native:  # not handled by the fast path (or it declares nothing): the reference path
        report.locate = None
        ok, tree = parse_yaml(text, report, skip_top_key=_is_extension)
        if ok:
            native = _to_native(tree, report, stem)
    graph: GraphConfig | None = None
    plan: PlanModeConfig | None = None
    if native is not None:
        graph_part = {k: v for k, v in native.items() if k != PLAN_MODE_KEY}
        graph_keys = class_fields_by_key(GraphConfig)
        if graph_part and not graph_keys.keys() & graph_part.keys():
            # only unknown keys (e.g. a typo beside `plan_mode`): no graph was meant
            for key in graph_part:
                report.error((key,), unknown_key_message(key, [*graph_keys, PLAN_MODE_KEY]), at_key=True)
        elif graph_part:
            graph_part.setdefault("name", stem)
            graph = structure(graph_part, GraphConfig, (), report)
            check_graph(graph_part, report)
        if PLAN_MODE_KEY in native:
            pm = native[PLAN_MODE_KEY]
            plan = structure(pm, PlanModeConfig, (PLAN_MODE_KEY,), report)
            if isinstance(pm, Mapping):
                check_field_rules(pm, PlanModeConfig, (PLAN_MODE_KEY,), report)
        check_policies(graph_part, native.get(PLAN_MODE_KEY), report, tools=tools)
        check_models(graph_part, native.get(PLAN_MODE_KEY), report)
        check_review_rules(graph_part, native.get(PLAN_MODE_KEY), report)
    if graph is not None and not report.errors:
        check_loaded_graph(graph, report)
    if strict:
        report.errors.extend(attrs.evolve(w, severity="error") for w in report.warnings)
        report.warnings = []
    if report.errors:
        raise ConfigError(report.ordered(report.errors))
    warnings = report.ordered(report.warnings)
    return ConfigFile(
        path=path,
        graph=graph,
        plan_mode=plan,
        warnings=tuple(str(w) for w in warnings),
        warning_details=tuple(warnings),
    )


def load_config(path: str | Path, *, strict: bool = False, tools: Iterable[str] | None = None) -> ConfigFile:
    """Read and load the YAML file at ``path`` (see ``load_config_text``).

    Raises ``ConfigError`` (one positioned line per problem); a file that cannot be read
    (missing, a directory, binary, not UTF-8: ``fileio.read_text_input``) is a one-line
    ``ConfigError`` too, ``PATH:1:1: (file): cannot read stage graph: reason``.
    """
    from fsm_stage._yaml import Problem
    from fsm_stage.fileio import InputFileError, read_text_input

    shown = str(path)
    try:
        text = read_text_input(path, what="stage graph")
    except InputFileError as err:
        message = str(err).removeprefix(f"{Path(path)}: ")
        raise ConfigError([Problem(shown, 1, 1, "(file)", message)]) from None
    return load_config_text(text, shown, strict=strict, tools=tools)


def _to_native(tree: Any, report: GraphReport, stem: str) -> dict[str, Any] | None:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    from fsm_stage._yaml import Loc, describe_value, node_pos, plain_scalar, to_plain
    from fsm_stage.config.plugin import load_plugin_list

    if tree is None:
        report.error_at(
            (1, 1), "(file)", "the file is empty; expected a stage graph mapping or a plugin list"
        )
        return None
    if isinstance(tree, CommentedSeq):
        return load_plugin_list(tree, report, stem)
    if not isinstance(tree, CommentedMap):
        report.error_at(
            node_pos(tree),
            "(file)",
            f"expected a stage graph mapping or a plugin list, got {describe_value(plain_scalar(tree))}",
        )
        return None
    pos = node_pos(tree)
    report.locs[()] = Loc("", pos, pos)
    # ``x-…`` keys are dropped before their values are converted: their aliases never expand
    native = to_plain(tree, (), "", report, _drop_top_extensions)
    assert isinstance(native, dict)
    if not native and not report.errors:
        report.error_at(
            pos, "(file)", "the file declares nothing; expected `stages` and `section` and/or `plan_mode`"
        )
        return None
    return native


def _fast_locations(text: str) -> dict[NativePath, Loc]:
    """Positions of a text the fast path already parsed (a second, positioning pass)."""
    from fsm_stage._yaml import fast_parse

    located = fast_parse(text)
    if located is None:  # cannot happen: the same text parsed a moment ago
        raise AssertionError("the libyaml fast path refused a text it had accepted")
    return located[1]


def _is_extension(key: str) -> bool:
    return key.startswith(_EXTENSION_PREFIX)


def _drop_top_extensions(npath: NativePath, key: str, pos: tuple[int, int], display: str) -> str | None:
    """``to_plain`` renamer: None (drop) for a top-level ``x-…`` key, else the key itself."""
    return None if not npath and key.startswith(_EXTENSION_PREFIX) else key


def _without_extensions(native: dict[str, Any]) -> dict[str, Any]:
    """``native`` without its ``x-…`` top-level keys: the user's own (a home for YAML anchors),
    as in Compose files."""
    return {k: v for k, v in native.items() if not k.startswith(_EXTENSION_PREFIX)}

