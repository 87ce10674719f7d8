"""Stage-graph configuration: frozen attrs classes, the YAML loader and its validation rules.

The data model every layer reads, the loader that builds it from YAML with positioned errors,
and ``normalised`` (the plain dict the compiled graph's fingerprint hashes). The JSON Schema
(``fsm_stage.schema``) is derived from these classes and from the ``FieldRule`` metadata on
their fields, so the loader and the schema share one source of truth.

Shapes
------
``ConfigFile``      what one YAML file declares: an optional ``GraphConfig`` (the stage
                    switch), an optional ``PlanModeConfig`` and the file's warnings.
``GraphConfig``     name, stages (non-empty, ordered), guidance ``section`` template,
                    ``initial`` (None = first stage), ``handoff_dir``, ``min_handoff_tokens``
                    (None = every model transition is full), ``language`` (en | zh),
                    ``description`` (documentation only).
``StageConfig``     name (``[a-z][a-z0-9_-]*``), instruction, ``targets`` (None = every other
                    stage, the seed's behaviour; otherwise the allowed edges), ``description``.
``EdgeConfig``      one allowed transition: ``target`` stage name (YAML key ``to``) and the
                    names of the eligibility predicates (``guards``) that must hold to take it.
``PlanModeConfig``  ``section``: the plan-mode policy text (plan-mode spec §1.8, B1–B5).

Two YAML forms
--------------
*Native* (DESIGN.md §6): one mapping with the graph keys in snake_case plus an optional
``plan_mode:`` mapping; top-level keys starting with ``x-`` are ignored (a home for YAML
anchors, e.g. ``x-defaults: &d {...}`` merged into stages with ``<<: *d``).

*Plugin list* (the seeds' DeepSeek Harness composition, verbatim): a list of entries
``{id, name, config}`` where ``id`` is ``stage-switch`` (config keys ``stages``,
``section``, ``handoffDir``, ``initial``, ``minHandoffTokens``, ``language``; stages hold
only ``name`` and ``instruction``) or ``plan-mode`` (config key ``section``). ``name``, when
given, must be the package the entry configures (``PLUGIN_PACKAGES``, any npm scope:
``plugin_name_pattern``); another package's name is an error.
In the plugin form ``{{ stage_current }}`` / ``{{ stage_targets }}`` in the stage-switch
``section`` are translated to the native ``<< stage_current >>`` syntax; the plan-mode
``section`` is kept verbatim (B4). A plugin-form graph takes its name from the file name.

Error reporting
---------------
``load_config`` collects every problem of a file and raises ``InvalidConfigError`` (a
``ConfigError``: ``problems`` the lines, ``details`` the ``Problem`` records); each problem is
exactly one line ``PATH:LINE:COLUMN: KEY: what is wrong and what is expected``
(1-based line and column; KEY a dotted path as written in the file, e.g. ``stages[2].name``
or ``[0].config.handoffDir``). YAML syntax errors (tabs, unclosed quotes, duplicate keys,
several documents) use the same format with KEY ``(yaml)`` (a duplicate key: its dotted path);
problems of the file as a whole (empty, unreadable) use KEY ``(file)``. Parsing uses ruamel.yaml
round-trip mode (positions of every key and value), structuring uses cattrs (strict types,
``forbid_extra_keys``), and the value rules read ``FieldRule`` metadata.

Speed: a native-form file of plain YAML (no tags, anchors, merges or directives) is parsed
with ruamel's libyaml extension (``ruamel.yaml.clib``, a runtime dependency on CPython, or
``ruamel.yaml.clibz``) when it is installed, about 20x faster
than the pure-Python round-trip parser (a 1,000-stage graph loads in ~40 ms instead of
~900 ms); positions are then computed only if the file has a problem or a warning. Whatever
that path does not handle (every syntax error, duplicate key, the plugin form, odd YAML)
goes through the round-trip parser, so messages and positions are the same either way
(``tests/test_config_fast_path.py`` compares the two paths). The ``section``
template is checked with the package's shared jinja2 environment
(``fsm_stage.prompts.template_variables``): it must compile, use only ``stage_current`` and
``stage_targets``, and render without error for every stage (its name and declared
targets; ``_trial_render_section``); the native form writes them ``<< stage_current >>``, and
``{{ … }}`` there is an error.
Unknown keys are errors at every level in both forms (a deliberate departure from the seed,
which silently drops extra keys inside a stage entry, S12c); every problem is reported, not
only the first (the seed stops at the first failure, S12d).

Decision on ``null`` (stage-switch spec Appendix B item 2)
----------------------------------------------------------
A YAML ``null`` (``key:`` with nothing after it, ``key: ~``, ``key: null``) for any key,
optional or required, is an error: "supplied and invalid", as in the seed. For most optional
keys a user who writes ``initial:`` has left the value unfinished, and for ``targets`` a
``null`` would be ambiguous (``[]`` means "no model transitions", an absent key means "every
other stage"). The message says to give a value or remove the key to get the default.

Names
-----
Stage names (and guard names) are at most ``MAX_NAME_LENGTH`` (64) characters: a stage name
becomes the handoff file ``<stage>.md``. The limit is ``FieldRule.max_length`` /
``item_max_length``, so the JSON Schema says ``maxLength`` too.

Warnings
--------
Reported in ``ConfigFile.warnings`` in the same one-line format (``severity="warning"`` in
``warning_details``); ``strict=True`` turns them into errors. Only a file without errors gets
them:

* stages that cannot be reached from ``initial`` through ``targets`` (a user ``/stage`` jump
  can still reach them);
* a stage with ``targets: []`` while the ``section`` template lists ``<< stage_targets >>``
  plainly (``prompts.section_lists_targets_plainly``), which renders empty there (a section
  branching on ``<% if stage_targets %>`` gets no warning).

Positioned problems for other YAML files
----------------------------------------
``ProblemReport`` (parse, positions, ``error``/``warn``) and ``positioned_problems`` (cattrs
structuring with every validation error at its line and column) are public, so other YAML
inputs (scenario files) report problems exactly as stage graphs do.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override

from fsm_stage.constants import PLAN_SOURCE_PLUGIN, STAGE_NAME_RE, STAGE_SOURCE_KIND
from fsm_stage.errors import ConfigError
from fsm_stage.fileio import InputFileError, read_text_input
from fsm_stage.prompts import PromptTemplateError, render, section_lists_targets_plainly, template_variables

Language = Literal["en", "zh"]

#: Stage name grammar (stage-switch spec §1.2), matched with ``re.fullmatch``.
STAGE_NAME_PATTERN: str = STAGE_NAME_RE.pattern
#: Plugin-list entry ids (the seeds' plugin ids, equal to their log source names).
STAGE_SWITCH_PLUGIN_ID: str = STAGE_SOURCE_KIND
PLAN_MODE_PLUGIN_ID: str = PLAN_SOURCE_PLUGIN
#: Guard (eligibility predicate) name grammar, matched with ``re.fullmatch``.
GUARD_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
#: Longest stage or guard name (characters). A stage name becomes the handoff file name
#: ``<stage>.md`` (file systems refuse names over 255 bytes); guard names share the limit so
#: messages and diagrams stay readable.
MAX_NAME_LENGTH = 64
#: The package each plugin-list entry configures (the ``name`` of the seeds' entries); a
#: ``name`` must be that package, optionally republished under another npm scope
#: (``@fork/dsh-stage-switch``), because fsm_stage implements exactly that package.
PLUGIN_PACKAGES: Mapping[str, str] = MappingProxyType(
    {STAGE_SWITCH_PLUGIN_ID: "@ai4rpg/dsh-stage-switch", PLAN_MODE_PLUGIN_ID: "@deepseek-ai/dsh-plan-mode"}
)


def plugin_name_pattern(plugin_id: str) -> str:
    """Full-match regex of the ``name`` a plugin-list entry with ``plugin_id`` may carry:
    the seed's package name, or its base name with any (or no) npm scope."""
    base = re.escape(PLUGIN_PACKAGES[plugin_id].rsplit("/", 1)[-1])
    return f"(?:@[a-z0-9][a-z0-9._~-]*/)?{base}"
#: Variables a graph ``section`` template may use (stage-switch spec §1.8).
TEMPLATE_VARIABLES = frozenset({"stage_current", "stage_targets"})


@attrs.frozen
class FieldRule:
    """Validation rule and documentation of one config field (attrs field metadata ``"rule"``).

    Read by the loader (messages, checks) and by ``fsm_stage.schema`` (JSON Schema keywords),
    so both judge a file by the same rules.

    ``doc``          one-sentence description (schema ``description``, README).
    ``expected``     what a valid value looks like, for "missing"/"wrong type" messages.
    ``pattern``      full-match regular expression for strings (schema ``pattern ^…$``).
    ``non_blank``    the string must contain a non-whitespace character.
    ``minimum``      inclusive lower bound for numbers (finite numbers only).
    ``max_length``   maximum string length in characters (schema ``maxLength``).
    ``min_items``    minimum list length.
    ``item_pattern`` full-match regular expression for each string of a list.
    ``item_max_length`` maximum length of each string of a list (schema ``items.maxLength``).
    ``forbid``       ``(regex, message)`` pairs: a string in which ``re.search`` finds the
                     regex is refused with the message (schema ``not: {pattern}``).
    ``yaml_key``     the native YAML key when it differs from the attribute name.
    ``plugin_key``   the key in the plugin-list form; None = not accepted there.

    Regexes use only syntax that Python ``re`` and ECMA-262 (JSON Schema) read alike.
    """

    doc: str
    expected: str
    pattern: str | None = None
    non_blank: bool = False
    minimum: float | None = None
    max_length: int | None = None
    min_items: int | None = None
    item_pattern: str | None = None
    item_max_length: int | None = None
    forbid: tuple[tuple[str, str], ...] = ()
    yaml_key: str | None = None
    plugin_key: str | None = None


def _rule(doc: str, expected: str, **kw: Any) -> dict[str, FieldRule]:
    return {"rule": FieldRule(doc, expected, **kw)}


def field_rule(field: attrs.Attribute[Any]) -> FieldRule:
    """The ``FieldRule`` of an attrs field of a config class (KeyError if it has none)."""
    rule: FieldRule = field.metadata["rule"]
    return rule


def yaml_key(field: attrs.Attribute[Any]) -> str:
    """The native YAML key of ``field`` (``EdgeConfig.target`` is written ``to``); the
    attribute name for fields without a ``FieldRule`` (classes of other files)."""
    rule: FieldRule | None = field.metadata.get("rule")
    return (rule.yaml_key if rule is not None else None) or field.name


#: Handoff folders that could leave the session directory (DESIGN.md §4 invariant 6).
_HANDOFF_DIR_FORBIDDEN: tuple[tuple[str, str], ...] = (
    (r"^(?:[/\\~]|[A-Za-z]:)", "is an absolute path; expected a folder relative to the session directory"),
    (r"(?:^|[/\\])\.\.(?:[/\\]|(?![\s\S]))", "leaves the session directory; `..` components are not allowed"),
    (r"\x00", "contains a NUL character; expected a plain relative folder path"),
)


@attrs.frozen
class EdgeConfig:
    """An allowed model transition ``<stage> -> target``; ``guards`` name eligibility predicates.

    YAML: a stage name string, or a mapping ``{to: <stage>, guards: [<predicate names>]}``.
    """

    target: str = attrs.field(
        metadata=_rule(
            "The stage this transition leads to.",
            "a configured stage name",
            pattern=STAGE_NAME_PATTERN,
            max_length=MAX_NAME_LENGTH,
            yaml_key="to",
        )
    )
    guards: tuple[str, ...] = attrs.field(
        default=(),
        metadata=_rule(
            "Names of eligibility predicates that must all hold for the model to take this edge.",
            "a list of predicate names",
            item_pattern=GUARD_NAME_PATTERN,
            item_max_length=MAX_NAME_LENGTH,
        ),
    )


@attrs.frozen
class StageConfig:
    """One stage of a graph (stage-switch spec §1.2)."""

    name: str = attrs.field(
        metadata=_rule(
            "Stage name; also the handoff file name, so it is restricted to a safe grammar.",
            f"a stage name matching {STAGE_NAME_PATTERN}, at most {MAX_NAME_LENGTH} characters",
            pattern=STAGE_NAME_PATTERN,
            max_length=MAX_NAME_LENGTH,
            plugin_key="name",
        )
    )
    instruction: str = attrs.field(
        metadata=_rule(
            "Shown to the model on entering the stage, after `Current stage: <name>`.",
            "a non-empty string `instruction`",
            non_blank=True,
            plugin_key="instruction",
        )
    )
    targets: tuple[EdgeConfig, ...] | None = attrs.field(
        default=None,
        metadata=_rule(
            "Stages the model may switch to from here (omit: every other stage; []: none).",
            "a list of stage names or {to, guards} mappings",
        ),
    )
    description: str | None = attrs.field(
        default=None,
        metadata=_rule("Documentation only (diagrams, README); never shown to the model.", "a string"),
    )


@attrs.frozen
class PlanModeConfig:
    """Plan-mode settings: the policy ``section`` shown while plan mode is active (B1–B5)."""

    section: str = attrs.field(
        metadata=_rule(
            "Plan-mode policy text, shown verbatim at system-prompt order 50 while plan mode is active.",
            "a non-empty string `section`",
            non_blank=True,
            plugin_key="section",
        )
    )


@attrs.frozen
class GraphConfig:
    """A validated stage graph (stage-switch spec §1.2 plus fsm_stage's edges)."""

    name: str = attrs.field(
        metadata=_rule(
            "Graph name (diagram title, logs); the plugin form uses the file name.",
            "a non-empty string",
            non_blank=True,
        )
    )
    stages: tuple[StageConfig, ...] = attrs.field(
        metadata=_rule(
            "The stages, in order; the first is the default initial stage.",
            "a non-empty `stages` list of {name, instruction} mappings",
            min_items=1,
            plugin_key="stages",
        )
    )
    section: str = attrs.field(
        metadata=_rule(
            "Guidance template shown while an eligibility predicate holds; "
            "may use << stage_current >> and << stage_targets >>.",
            "a non-empty string `section`",
            non_blank=True,
            plugin_key="section",
        )
    )
    initial: str | None = attrs.field(
        default=None,
        metadata=_rule(
            "Stage a new session starts in (default: the first stage).",
            "a configured stage name",
            pattern=STAGE_NAME_PATTERN,
            max_length=MAX_NAME_LENGTH,
            plugin_key="initial",
        ),
    )
    handoff_dir: str = attrs.field(
        default="handoff",
        metadata=_rule(
            "Folder for handoff documents, relative to the session's working directory.",
            "a relative folder path inside the session directory",
            non_blank=True,
            forbid=_HANDOFF_DIR_FORBIDDEN,
            plugin_key="handoffDir",
        ),
    )
    min_handoff_tokens: float | None = attrs.field(
        default=None,
        metadata=_rule(
            "Surface size (tokens) from which a model transition is full (handoff + archive); "
            "omit to make every model transition full.",
            "a non-negative finite number",
            minimum=0,
            plugin_key="minHandoffTokens",
        ),
    )
    language: Language = attrs.field(
        default="en",
        metadata=_rule('Review dialog language: "en" or "zh".', '"en" or "zh"', plugin_key="language"),
    )
    description: str | None = attrs.field(
        default=None,
        metadata=_rule("Documentation only (diagrams, README); never shown to the model.", "a string"),
    )

    @functools.cached_property
    def stage_names(self) -> tuple[str, ...]:
        """Configured stage names in configured order (built once per instance; not a field)."""
        return tuple(s.name for s in self.stages)

    @property
    def initial_stage(self) -> str:
        """``initial`` when set, otherwise the first stage's name (S-spec §1.2 default)."""
        return self.initial if self.initial is not None else self.stages[0].name

    @functools.cached_property
    def _stage_index(self) -> dict[str, StageConfig]:
        """name -> stage (the first of that name), built once per instance; not a field, so
        equality, hashing, ``attrs.evolve`` and pickling ignore it."""
        index: dict[str, StageConfig] = {}
        for s in self.stages:
            index.setdefault(s.name, s)
        return index

    def stage(self, name: str) -> StageConfig | None:
        """The stage called ``name``, or None when it is not configured (O(1))."""
        return self._stage_index.get(name)

    def edges_from(self, name: str) -> tuple[EdgeConfig, ...]:
        """Allowed model transitions out of ``name`` in configured order.

        ``targets: None`` means every other configured stage with no guards. An unknown
        ``name`` (e.g. a stage removed from the graph after a log recorded it) may go anywhere,
        so a session is never stranded.
        """
        st = self.stage(name)
        if st is None or st.targets is None:
            return tuple(e for e in self._edges_to_every_stage if e.target != name)
        return st.targets

    @functools.cached_property
    def _edges_to_every_stage(self) -> tuple[EdgeConfig, ...]:
        """One unguarded ``EdgeConfig`` per configured stage, built once per instance (like
        ``_stage_index``: not a field, so equality, hashing, evolve and pickling ignore it);
        ``edges_from`` filters the source out instead of rebuilding every edge per call."""
        return tuple(EdgeConfig(n) for n in self.stage_names)


@attrs.frozen
class Problem:
    """One positioned problem (or warning) of a config file.

    ``line`` / ``column`` are 1-based; ``key`` is the dotted path as written in the file
    (``stages[2].name``), ``(yaml)`` for a syntax error, ``(file)`` for the file as a whole.
    ``str(problem)`` is the one-line form ``PATH:LINE:COLUMN: KEY: message``.
    """

    path: str
    line: int
    column: int
    key: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.key}: {self.message}"

    def to_json(self) -> dict[str, object]:
        """``{path, line, column, key, message, severity}`` (the ``validate --json`` item)."""
        return attrs.asdict(self)


#: Top-level native keys starting with this are ignored: a place for YAML anchors that
#: stages merge in with ``<<: *anchor`` (the Compose-file convention).
EXTENSION_PREFIX = "x-"
#: Key of the plan-mode mapping at the top level of the native form.
PLAN_MODE_KEY = "plan_mode"


@attrs.frozen
class ConfigFile:
    """Everything one YAML file declares. At least one of ``graph`` / ``plan_mode`` is set.

    ``warnings`` are one-line positioned messages (same format as errors) that do not make
    the file invalid (unreachable stages).
    """

    path: str
    graph: GraphConfig | None = None
    plan_mode: PlanModeConfig | None = None
    warnings: tuple[str, ...] = ()
    warning_details: tuple[Problem, ...] = attrs.field(default=(), eq=False, repr=False)


for _cls in (EdgeConfig, StageConfig, PlanModeConfig, GraphConfig, ConfigFile):
    attrs.resolve_types(_cls)

#: Classes a bare YAML string may stand for, and the field the string fills
#: (``targets: [verify]`` means ``targets: [{to: verify}]``).
SCALAR_SHORTHAND: dict[type, str] = {EdgeConfig: "target"}
#: The config classes the loader structures (the JSON Schema's ``$defs``).
CONFIG_CLASSES: tuple[type, ...] = (GraphConfig, StageConfig, EdgeConfig, PlanModeConfig)


# ---------------------------------------------------------------------------------------------
# Positions
# ---------------------------------------------------------------------------------------------

NativePath = tuple[str | int, ...]


@attrs.define
class _Loc:
    """Where a value sits in the file: its display path and 1-based (line, column) positions."""

    display: str
    key: tuple[int, int]
    value: tuple[int, int]


def _join(display: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{display}[{part}]"
    return f"{display}.{part}" if display else part


class InvalidConfigError(ConfigError):
    """``ConfigError`` raised by the loader; ``details`` holds the structured problems.

    ``problems`` (inherited) are their one-line strings, in the same order.
    """

    def __init__(self, details: list[Problem]) -> None:
        self.details = tuple(details)
        super().__init__([str(p) for p in details])


_LINE_BREAKS = re.compile("[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _one_line(text: str) -> str:
    """``text`` with every character ``str.splitlines`` breaks on escaped (``\\n``, ``\\u2028``).

    Keys and values from the file end up in messages; a problem must stay one line.
    """
    return _LINE_BREAKS.sub(lambda m: json.dumps(m.group(0))[1:-1], text)


class ProblemReport:
    """Positioned problems and warnings of one YAML file (the loader's, and public for other
    YAML inputs such as scenario files).

    Usage for a file of your own attrs classes::

        report = ProblemReport.from_yaml(text, "scenario.yaml")   # syntax errors are problems
        obj, problems = positioned_problems(report, Scenario, converter=my_converter)
        report.error(("steps", 3, "id"), "duplicate call id")      # your own rules, positioned
        if report.problems: raise InvalidConfigError(report.problems)

    Paths (``npath``) are tuples of mapping keys and list indexes into the document, e.g.
    ``("steps", 2, "name")``; they display as ``steps[2].name``. ``error`` points at the value
    (``at_key=True``: at the key); a path that is not in the file (a missing key) is placed at
    its nearest present ancestor. ``problems`` / ``warning_list`` give ``Problem`` records
    (``str(p)`` is ``PATH:LINE:COLUMN: KEY: message``) sorted by position, duplicates removed.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self.locs: dict[NativePath, _Loc] = {}
        #: computes ``locs`` on first use (the fast path positions a file only when it reports)
        self.locate: Callable[[], dict[NativePath, _Loc]] | None = None
        self.plugin_form = False
        #: the document as plain Python data (``from_yaml``/``from_tree``); None if unparsable
        self.data: object = None

    @classmethod
    def from_yaml(cls, text: str, path: str) -> ProblemReport:
        """Parse ``text`` with ruamel.yaml (round trip, duplicate keys refused) into ``data``,
        recording the position of every key and value. YAML syntax errors and tags become
        problems (KEY ``(yaml)``); ``data`` is then None (syntax error) or the untagged value."""
        report = cls(path)
        ok, tree = _parse_yaml(text, report)
        if ok:
            report._load_tree(tree)
        return report

    @classmethod
    def from_tree(cls, tree: object, path: str) -> ProblemReport:
        """Like ``from_yaml`` for a document already loaded with ``YAML(typ="rt")``."""
        report = cls(path)
        report._load_tree(tree)
        return report

    def _load_tree(self, tree: object) -> None:
        pos = _node_pos(tree)
        self.locs[()] = _Loc("", pos, pos)
        self.data = _to_plain(tree, (), "", self)

    @property
    def problems(self) -> list[Problem]:
        """The errors so far, by position (see ``ordered``)."""
        return self.ordered(self.errors)

    @property
    def warning_list(self) -> list[Problem]:
        """The warnings so far, by position."""
        return self.ordered(self.warnings)

    def position(self, npath: NativePath) -> tuple[int, int]:
        """1-based (line, column) of the value at ``npath`` (or its nearest present ancestor)."""
        return self.loc(npath).value

    def display(self, npath: NativePath) -> str:
        """``npath`` as written in messages, e.g. ``steps[2].name``."""
        return self.loc(npath).display

    def error_at(self, pos: tuple[int, int], key: str, message: str) -> None:
        self.errors.append(Problem(self.path, pos[0], pos[1], _one_line(key or "(file)"), _one_line(message)))

    def error(self, npath: NativePath, message: str, *, at_key: bool = False) -> None:
        """A problem with the value at ``npath`` (or with the key itself when ``at_key``)."""
        loc = self.loc(npath)
        self.error_at(loc.key if at_key else loc.value, loc.display, message)

    def warn(self, npath: NativePath, message: str) -> None:
        loc = self.loc(npath)
        self.warnings.append(
            Problem(self.path, *loc.value, _one_line(loc.display), _one_line(message), "warning")
        )

    def loc(self, npath: NativePath) -> _Loc:
        """The location of ``npath``, or of its nearest located ancestor (a missing key)."""
        if self.locate is not None:
            self.locs, self.locate = self.locate(), None
        probe = npath
        while probe not in self.locs and probe:
            probe = probe[:-1]
        base = self.locs.get(probe, _Loc("", (1, 1), (1, 1)))
        if probe == npath:
            return base
        display = base.display
        for part in npath[len(probe) :]:
            display = _join(display, part)
        return _Loc(display, base.value, base.value)

    @staticmethod
    def ordered(items: list[Problem]) -> list[Problem]:
        """Problems by position, exact duplicates removed."""
        seen: set[Problem] = set()
        out: list[Problem] = []
        for p in sorted(items, key=lambda p: (p.line, p.column)):
            if p not in seen:
                seen.add(p)
                out.append(p)
        return out


# ---------------------------------------------------------------------------------------------
# YAML → plain data with positions
# ---------------------------------------------------------------------------------------------


def describe_value(value: object, *, json_names: bool = False) -> str:
    """The type of a decoded YAML/JSON value in words, for one-line user-facing errors.

    Default (config files): with the value where short, e.g. ``a number (5)``, ``a string
    ("x")``, ``a list``, ``a mapping``, ``null``. ``json_names=True`` (tool arguments, which are
    JSON): the bare JSON type name ``null`` / ``boolean`` / ``number`` / ``string`` / ``array``
    / ``object``. Anything else is named by its Python type. The one helper for both (D8).
    """
    import datetime

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean" if json_names else f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int | float):
        return "number" if json_names else f"a number ({value})"
    if isinstance(value, str):
        return "string" if json_names else f"a string ({json.dumps(value, ensure_ascii=False)})"
    if isinstance(value, list | tuple):
        return "array" if json_names else "a list"
    if isinstance(value, Mapping):
        return "object" if json_names else "a mapping"
    if json_names:
        return type(value).__name__
    if isinstance(value, set | frozenset):
        return "a set"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, datetime.date):
        return f"a date ({value.isoformat()}; quote it to make it a string)"
    return f"a {type(value).__name__}"


def _plain_scalar(value: object) -> object:
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
        return str(value)
    return value


#: ``rename(mapping_path, key, key_position, key_display)`` -> native key, or None to drop
#: the key (the renamer has reported it).
_Renamer = Callable[[NativePath, str, tuple[int, int], str], str | None]


def _to_plain(
    node: object,
    npath: NativePath,
    display: str,
    report: ProblemReport,
    rename: _Renamer | None = None,
) -> object:
    """Convert a ruamel round-trip node to plain Python, recording each value's position.

    ``rename`` maps a file key to its native name, or None to drop it (an unknown
    plugin-form key, already reported by the renamer). Keys merged in with ``<<: *anchor``
    are positioned at the mapping. A YAML tag is reported and then ignored. (ruamel turns a
    recursive alias into null, so no cycle reaches this function.)
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar

    here = report.loc(npath).value
    tag = getattr(getattr(node, "tag", None), "value", None)
    if isinstance(node, TaggedScalar) or (tag is not None and isinstance(node, CommentedMap | CommentedSeq)):
        report.error(npath, f"has the YAML tag {tag}; fsm_stage knows no tags, remove it")
        if isinstance(node, TaggedScalar):
            return node.value
    if isinstance(node, CommentedMap):
        mpos = _node_pos(node, here)
        out: dict[str, object] = {}
        positions = node.lc.data or {}  # None for `!!omap`
        for key in list(node.keys()):
            if key in positions:
                kl, kc, vl, vc = (n + 1 for n in positions[key])
                kpos, vpos = (kl, kc), (vl, vc)
            else:  # merged from an anchor with `<<:`
                kpos = vpos = mpos
            kdisplay = _join(display, str(key))
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
            report.locs[child] = _Loc(kdisplay, kpos, kpos if node[key] is None else vpos)
            out[native] = _to_plain(node[key], child, kdisplay, report, rename)
        return out
    if isinstance(node, CommentedSeq):
        items: list[object] = []
        positions = node.lc.data or {}
        for i, item in enumerate(node):
            ipos = (positions[i][0] + 1, positions[i][1] + 1) if i in positions else here
            child = (*npath, i)
            idisplay = _join(display, i)
            report.locs[child] = _Loc(idisplay, ipos, ipos)
            items.append(_to_plain(item, child, idisplay, report, rename))
        return items
    return _plain_scalar(node)


def _node_pos(node: object, default: tuple[int, int] = (1, 1)) -> tuple[int, int]:
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
            children = [(v, _join(display, str(k))) for k, v in node.items()]
        elif isinstance(node, CommentedSeq):
            children = [(v, _join(display, i)) for i, v in enumerate(node)]
        for child, child_display in children:
            found = search(child, child_display)
            if found is not None:
                return found
        return None

    return search(tree, "") or ""


def _parse_yaml(text: str, report: ProblemReport) -> tuple[bool, object]:
    """Parse ``text`` with ruamel round-trip (duplicate keys are errors). (ok, tree)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt", pure=True)
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
                key = _join(_mapping_display(text, err.context_mark), m.group(1))
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

#: Use ruamel's libyaml-based C parser when it is installed (``ruamel.yaml.clib``, which ships
#: binary wheels, or ``ruamel.yaml.clibz``). Tests set this to False to check the pure-Python path alone.
_USE_C_PARSER = True

_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"
#: Resolved tags of plain scalars the fast path constructs (with ruamel's round-trip
#: constructor, as the pure path does); any other tag (timestamps, merge keys, ...) makes the
#: loader take the pure path.
_FAST_SCALAR_TAGS = frozenset({"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


#: Text libyaml reads differently from ruamel's pure parser (found by differential fuzzing,
#: ``tests/test_config_fast_path.py``): it accepts tabs where ruamel refuses them, counts NEL /
#: LINE SEPARATOR / PARAGRAPH SEPARATOR inside quoted scalars as line breaks (shifting every
#: later line number), gives a byte order mark after the start no column, and accepts a comment
#: right after a block scalar header (``|#``). Texts containing any of these (even where they
#: would be harmless) take the pure path (see ``_libyaml_differs``).
_LIBYAML_DIFFERENT_CHARS = "\t\x85\u2028\u2029"
_BLOCK_HEADER_COMMENT = re.compile(r"[|>][-+0-9]*#")


def _libyaml_differs(text: str) -> bool:
    """Whether ``text`` holds something libyaml reads differently (``_LIBYAML_DIFFERENT_CHARS``,
    a byte order mark after the start, ``|#``). Substring tests first: ~free on 175 KB."""
    return (
        any(c in text for c in _LIBYAML_DIFFERENT_CHARS)
        or text.find("\ufeff", 1) != -1
        or ("#" in text and _BLOCK_HEADER_COMMENT.search(text) is not None)
    )


class _NotPlain(Exception):
    """The document uses something only the pure round-trip path handles (or reports)."""


@functools.cache
def _c_parser() -> type | None:
    """ruamel's libyaml ``CParser`` class, or None when no C extension is installed."""
    import importlib

    try:
        cyaml = importlib.import_module("ruamel.yaml.cyaml")
    except ImportError:
        return None
    parser: type = cyaml.CParser
    return parser


@functools.cache
def _plain_resolvers() -> dict[Any, list[tuple[str, Any]]]:
    """ruamel's YAML 1.2 implicit resolvers (first character -> [(tag, regex)]): the table the
    pure round-trip loader resolves plain scalars with (it defaults to YAML 1.2 too)."""
    from ruamel.yaml.resolver import VersionedResolver

    table: dict[Any, list[tuple[str, Any]]] = VersionedResolver(version=(1, 2)).versioned_resolver
    return {k: list(v) for k, v in table.items()}


def _resolve_plain(value: str) -> str:
    """The tag ruamel gives the plain (unquoted, untagged) scalar ``value``."""
    table = _plain_resolvers()
    candidates = table.get(value[0] if value else "", [])
    if None in table:
        candidates = candidates + table[None]
    for tag, regex in candidates:
        if regex.match(value):
            return tag
    return _STR_TAG


def _fast_native(text: str, *, locate: bool = True) -> tuple[dict[str, Any], dict[NativePath, _Loc]] | None:
    """Parse a native-form document with libyaml: ``(plain data, positions)`` or None.

    Gives exactly what the pure round-trip path (``_parse_yaml`` + ``_to_plain``) gives for
    the documents it accepts: one mapping with string keys, no duplicate key, no tag, anchor,
    alias, merge key or directive, scalars that are strings, null, booleans or numbers, every
    position from the same event marks. Anything else (including every syntax error, an empty
    file, a plugin list and text for which ``_libyaml_differs``) returns None and the caller
    takes the pure path, whose messages and positions are the reference. About 20x faster
    than the pure parser. ``locate=False`` skips the positions (returns ``{}``), which cost
    about as much as the parse: a valid file never needs them.
    """
    parser_cls = _c_parser() if _USE_C_PARSER else None
    if parser_cls is None or _libyaml_differs(text):
        return None
    try:
        parser = parser_cls(text)
    except Exception:  # e.g. text that cannot be encoded as UTF-8 (lone surrogates)
        return None
    try:
        return _EventComposer(parser.get_event, locate).document()
    except Exception:  # _NotPlain, syntax errors, anything the C parser raises: pure path
        return None
    finally:
        parser.dispose()


class _EventComposer:
    """Builds the native mapping and its positions from parser events (see ``_fast_native``);
    raises ``_NotPlain`` for anything the pure path must handle."""

    def __init__(self, get_event: Callable[[], Any], locate: bool) -> None:
        from ruamel.yaml import events

        self.get_event = get_event
        self.events = events
        self.locate = locate
        self.locs: dict[NativePath, _Loc] = {}
        self.tags: dict[str, str] = {}  # plain scalar -> resolved tag, memo for this document
        self.constructor: Any = None

    def document(self) -> tuple[dict[str, Any], dict[NativePath, _Loc]]:
        ev, get_event = self.events, self.get_event
        if type(get_event()) is not ev.StreamStartEvent:
            raise _NotPlain
        start = get_event()
        if type(start) is not ev.DocumentStartEvent or start.version is not None or start.tags is not None:
            raise _NotPlain  # empty stream, or a %YAML / %TAG directive
        root = get_event()
        if type(root) is not ev.MappingStartEvent:
            raise _NotPlain  # a plugin list, a scalar, an empty document
        if self.locate:
            mark = root.start_mark
            pos = (mark.line + 1, mark.column + 1)
            self.locs[()] = _Loc("", pos, pos)
        data = self.collection(root, (), "")
        if type(get_event()) is not ev.DocumentEndEvent or type(get_event()) is not ev.StreamEndEvent:
            raise _NotPlain  # several documents: the pure path reports it
        assert isinstance(data, dict)
        return data, self.locs

    def scalar(self, event: Any) -> object:
        """The plain value of a scalar event, resolved and constructed as the pure path does."""
        if event.anchor is not None or event.ctag is not None:
            raise _NotPlain
        value: str = event.value
        if not event.implicit[0]:  # quoted or block scalar: a string
            return value
        tag = self.tags.get(value)
        if tag is None:
            tag = self.tags[value] = _resolve_plain(value)
        if tag == _STR_TAG:
            return value
        if tag == _NULL_TAG:
            return None
        if tag not in _FAST_SCALAR_TAGS:
            raise _NotPlain  # timestamps, `<<` merge keys, `=` value keys, ...
        from ruamel.yaml.nodes import ScalarNode

        if self.constructor is None:
            from ruamel.yaml import YAML

            self.constructor = YAML(typ="rt", pure=True).constructor
        node = ScalarNode(tag, value, event.start_mark, event.end_mark, style=event.style)
        return _plain_scalar(self.constructor.construct_object(node, deep=True))

    def collection(self, event: Any, npath: NativePath, display: str) -> object:
        """The plain value of a collection event, recording every child's position."""
        ev, get_event, locs, scalar = self.events, self.get_event, self.locs, self.scalar
        locate = self.locate
        kind = type(event)
        if kind is ev.AliasEvent or event.anchor is not None or event.ctag is not None:
            raise _NotPlain
        value: object
        if kind is ev.MappingStartEvent:
            out: dict[str, object] = {}
            while True:
                key_event = get_event()
                if type(key_event) is not ev.ScalarEvent:
                    if type(key_event) is ev.MappingEndEvent:
                        return out
                    raise _NotPlain  # a collection or alias as key
                key = scalar(key_event)  # `<<` (merge) raises: its tag is not a fast one
                if not isinstance(key, str) or key in out:
                    raise _NotPlain  # null/boolean/number key, duplicate key: the pure path reports it
                value_event = get_event()
                if not locate:
                    if type(value_event) is ev.ScalarEvent:
                        out[key] = scalar(value_event)
                    else:
                        out[key] = self.collection(value_event, npath, display)
                    continue
                kmark, vmark = key_event.start_mark, value_event.start_mark
                kpos = (kmark.line + 1, kmark.column + 1)
                kdisplay = f"{display}.{key}" if display else key
                child = (*npath, key)
                if type(value_event) is ev.ScalarEvent:
                    value = scalar(value_event)
                else:
                    value = self.collection(value_event, child, kdisplay)
                # a null value has no node of its own: point at its key (as ``_to_plain``)
                locs[child] = _Loc(
                    kdisplay, kpos, kpos if value is None else (vmark.line + 1, vmark.column + 1)
                )
                out[key] = value
        if kind is ev.SequenceStartEvent:
            items: list[object] = []
            while True:
                item_event = get_event()
                item_kind = type(item_event)
                if item_kind is ev.SequenceEndEvent:
                    return items
                if not locate:
                    if item_kind is ev.ScalarEvent:
                        items.append(scalar(item_event))
                    else:
                        items.append(self.collection(item_event, npath, display))
                    continue
                mark = item_event.start_mark
                ipos = (mark.line + 1, mark.column + 1)
                child = (*npath, len(items))
                idisplay = f"{display}[{len(items)}]"
                locs[child] = _Loc(idisplay, ipos, ipos)
                if item_kind is ev.ScalarEvent:
                    items.append(scalar(item_event))
                else:
                    items.append(self.collection(item_event, child, idisplay))
        raise _NotPlain


# ---------------------------------------------------------------------------------------------
# Structuring with cattrs
# ---------------------------------------------------------------------------------------------


class _TypeProblem(TypeError):
    """A value of the wrong type (the message says what was expected)."""


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
    *, number: str = "a number", expected: Mapping[type, str] | None = None
) -> cattrs.Converter:
    """A cattrs converter that structures YAML data strictly, with user-facing messages, for
    use with ``positioned_problems`` (the stage-graph loader uses one).

    ``str``/``int``/``bool``/``float`` accept only that YAML type (no ``"5"`` -> 5, no
    booleans as numbers; ``number`` words what a float field expects); ``Literal`` values are
    listed; ``X | None`` refuses ``null`` ("give a value, or remove the key"); ``tuple[X, ...]``
    needs a list; ``Mapping``/``dict`` a mapping; an attrs class needs a mapping (``expected``
    maps a class to the words used for it, default "a mapping {its keys}") and refuses unknown
    keys; fields with a ``FieldRule`` ``yaml_key`` are read under that key. Detailed
    validation is on, so every problem of a document is collected. Add your own hooks to the
    returned converter as usual (``register_structure_hook``).
    """
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

    def optional_factory(t: Any) -> Callable[[object, Any], object]:
        inner = next(a for a in get_args(t) if a is not type(None))

        def hook(value: object, _: Any) -> object:
            if value is None:
                raise _TypeProblem("is null; give a value, or remove the key to use the default")
            return conv.structure(value, inner)

        return hook

    conv.register_structure_hook_factory(_is_optional, optional_factory)

    def tuple_factory(t: Any) -> Callable[[object, Any], object]:
        item_type = get_args(t)[0]

        def hook(value: object, _: Any) -> tuple[object, ...]:
            if not isinstance(value, list):
                raise _TypeProblem(f"expected a list, got {describe_value(value)}")
            out: list[object] = []
            errors: list[Exception] = []
            for i, item in enumerate(value):
                try:
                    out.append(conv.structure(item, item_type))
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"@ index {i}", i, item_type))
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {t!r}", errors, t)
            return tuple(out)

        return hook

    conv.register_structure_hook_factory(_is_hom_tuple, tuple_factory)

    def class_factory(cl: Any) -> Callable[[object, Any], object]:
        renames = {f.name: override(rename=yaml_key(f)) for f in attrs.fields(cl) if yaml_key(f) != f.name}
        inner = cast(Any, make_dict_structure_fn)(cl, conv, _cattrs_forbid_extra_keys=True, **renames)
        keys = ", ".join(yaml_key(f) for f in attrs.fields(cl))
        words = (expected or {}).get(cl, f"a mapping {{{keys}}}")

        def hook(value: object, _: Any) -> object:
            if cl in SCALAR_SHORTHAND and isinstance(value, str):
                return cl(**{SCALAR_SHORTHAND[cl]: value})
            if value is None:
                raise _TypeProblem(f"is null; expected {words}")
            if not isinstance(value, Mapping):
                raise _TypeProblem(f"expected {words}, got {describe_value(value)}")
            return inner(value, cl)

        return hook

    conv.register_structure_hook_factory(attrs.has, class_factory)
    return conv


_CLASS_EXPECTED: dict[type, str] = {
    EdgeConfig: "a stage name or a mapping {to: <stage>, guards: [<predicate names>]}",
    StageConfig: "a mapping {name, instruction}",
    GraphConfig: "a stage graph mapping",
    PlanModeConfig: "a mapping {section}",
}
_CONVERTER = strict_converter(number="a non-negative finite number", expected=_CLASS_EXPECTED)


@functools.cache
def _class_fields_by_key(cl: type) -> Mapping[str, attrs.Attribute[Any]]:
    """YAML key -> attrs field of a config class, in field order (read-only, cached)."""
    return MappingProxyType({yaml_key(f): f for f in attrs.fields(cl)})


def _walk_cattrs(
    exc: BaseException, cl: Any, npath: NativePath, report: ProblemReport, *, plain: bool = False
) -> None:
    """Report every leaf of a cattrs validation error tree at its position.

    cattrs annotates each sub-exception with the attribute (``AttributeValidationNote``) or
    list index (``IterableValidationNote``) it came from; those notes give the path.
    ``plain``: a leaf ``TypeError``/``ValueError`` message is used as it is (hooks of a
    caller's converter word their own messages).
    """
    if isinstance(exc, BaseValidationError):
        for sub in exc.exceptions:
            notes = getattr(sub, "__notes__", [])
            note = next(
                (n for n in notes if isinstance(n, AttributeValidationNote | IterableValidationNote)), None
            )
            if isinstance(note, AttributeValidationNote):
                fields = attrs.fields_dict(cl) if attrs.has(cl) else {}
                key = yaml_key(fields[note.name]) if note.name in fields else note.name
                if isinstance(sub, KeyError) and note.name in fields:
                    _report_missing(cl, key, npath, report)
                else:
                    _walk_cattrs(sub, _unwrap(note.type), (*npath, key), report, plain=plain)
            elif isinstance(note, IterableValidationNote):
                _walk_cattrs(sub, _unwrap(note.type), (*npath, note.index), report, plain=plain)
            else:
                _walk_cattrs(sub, cl, npath, report, plain=plain)
        return
    if isinstance(exc, ForbiddenExtraKeysError):
        known = list(_class_fields_by_key(exc.cl))
        if exc.cl is GraphConfig and not npath:
            known.append(PLAN_MODE_KEY)
        for key in sorted(exc.extra_fields):
            report.error((*npath, key), _unknown_key_message(key, known), at_key=True)
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


def _report_missing(cl: Any, key: str, npath: NativePath, report: ProblemReport) -> None:
    field = _class_fields_by_key(cl)[key]
    rule: FieldRule | None = field.metadata.get("rule")
    shown = key
    if report.plugin_form and rule is not None and rule.plugin_key:
        shown = rule.plugin_key
    loc = report.loc(npath)
    report.error_at(
        loc.value,
        _join(loc.display, shown),
        "required key is missing" + (f"; expected {rule.expected}" if rule is not None else ""),
    )


def _unknown_key_message(key: str, known: list[str]) -> str:
    import difflib

    hint = ""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
    camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
    for candidate in (snake, camel):
        if candidate != key and candidate in known:
            hint = f" (did you mean `{candidate}`?)"
            break
    else:
        close = difflib.get_close_matches(key, known, n=1)
        if close:
            hint = f" (did you mean `{close[0]}`?)"
    return f"unknown key(s) {key}{hint}; expected one of: {', '.join(known)}"


# ---------------------------------------------------------------------------------------------
# Rules beyond types
# ---------------------------------------------------------------------------------------------


_DSH_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _check_template(text: str, npath: NativePath, report: ProblemReport, *, native: bool) -> None:
    if native:
        m = _DSH_VARIABLE.search(text)
        if m:
            report.error(
                npath,
                f"uses {m.group(0)}; the native form writes template variables as "
                f"<< {m.group(1)} >> (the {{{{ }}}} syntax is for the plugin-list form)",
            )
            return
    try:
        variables = template_variables(text)
    except PromptTemplateError as err:
        report.error(
            npath,
            f"{str(err).rstrip('.')}; expected a template using << stage_current >> / << stage_targets >>",
        )
        return
    unknown = sorted(variables - TEMPLATE_VARIABLES)
    if unknown:
        report.error(
            npath,
            f"template uses unknown variable(s) {', '.join(unknown)}; "
            f"expected only {', '.join(sorted(TEMPLATE_VARIABLES))}",
        )


#: Keys whose value must name a configured stage: ``_check_graph`` reports them with the list of
#: stages, which says more than the name pattern (the schema, which cannot cross-reference,
#: uses the pattern).
_CROSS_REFERENCES = frozenset({"initial"})


def _check_field_rules(value: Mapping[str, Any], cl: type, npath: NativePath, report: ProblemReport) -> None:
    """Apply the ``FieldRule`` value constraints (pattern, non-blank, minimum, min_items)."""
    for key, field in _class_fields_by_key(cl).items():
        if key not in value:
            continue
        v, rule, child = value[key], field_rule(field), (*npath, key)
        if isinstance(v, str):
            if rule.non_blank and not v.strip():
                if field.default is attrs.NOTHING:
                    report.error(child, f"is blank; expected {rule.expected}")
                else:
                    shown = report.loc(child).display.rsplit(".", 1)[-1]
                    report.error(child, f"is blank; `{shown}` must be a non-empty string when supplied")
            elif rule.max_length is not None and len(v) > rule.max_length and key not in _CROSS_REFERENCES:
                why = " (a stage name becomes the handoff file name <stage>.md)" if cl is StageConfig else ""
                report.error(
                    child, f"is too long: must be at most {rule.max_length} characters{why}, got {len(v)}"
                )
            elif (
                rule.pattern is not None
                and not re.fullmatch(rule.pattern, v)
                and key not in _CROSS_REFERENCES
            ):
                report.error(child, f"must match {rule.pattern}, got {json.dumps(v, ensure_ascii=False)}")
            else:
                for regex, message in rule.forbid:
                    if re.search(regex, v):
                        report.error(child, f"{json.dumps(v, ensure_ascii=False)} {message}")
                        break
        elif isinstance(v, int | float) and not isinstance(v, bool) and rule.minimum is not None:
            if not math.isfinite(v) or v < rule.minimum:
                report.error(child, f"must be a non-negative finite number, got {v}")
        elif isinstance(v, list) and rule.min_items is not None and len(v) < rule.min_items:
            report.error(child, f"is empty; expected {rule.expected}")


def _check_graph(data: Mapping[str, Any], report: ProblemReport) -> None:
    """Value and cross-reference rules of a graph (stage-switch spec §1.2, fsm_stage edges)."""
    _check_field_rules(data, GraphConfig, (), report)
    stages = data.get("stages")
    names: list[str] = []
    if isinstance(stages, list):
        seen: set[str] = set()
        for i, stage in enumerate(stages):
            if not isinstance(stage, Mapping):
                continue
            _check_field_rules(stage, StageConfig, ("stages", i), report)
            name = stage.get("name")
            if isinstance(name, str):
                if name in seen:
                    report.error(
                        ("stages", i, "name"), f'duplicate stage "{name}"; stage names must be unique'
                    )
                else:
                    names.append(name)
                seen.add(name)
        for i, stage in enumerate(stages):
            if isinstance(stage, Mapping) and isinstance(stage.get("targets"), list):
                _check_targets(stage, i, names, seen, report)
    initial = data.get("initial")
    if isinstance(initial, str) and names and initial not in names:
        report.error(
            ("initial",),
            f"{json.dumps(initial)} must name a configured stage; expected one of: {', '.join(names)}",
        )
    section = data.get("section")
    if isinstance(section, str) and section.strip():
        _check_template(section, ("section",), report, native=not report.plugin_form)


def _check_targets(
    stage: Mapping[str, Any], i: int, names: list[str], known: set[str], report: ProblemReport
) -> None:
    """Target and guard rules of stage ``i`` (``names``: the stages in order, ``known`` as a set)."""
    own = stage.get("name")
    seen: set[str] = set()
    guard_pattern = _GUARD_RE.pattern
    for j, edge in enumerate(stage["targets"]):
        target: object = edge
        tpath: NativePath = ("stages", i, "targets", j)
        guards: object = ()
        if isinstance(edge, Mapping):
            target, tpath, guards = edge.get("to"), (*tpath, "to"), edge.get("guards", ())
        if not isinstance(target, str):
            continue
        if target == own:
            report.error(tpath, f'stage "{own}" cannot target itself; expected another configured stage')
        elif names and target not in known:
            report.error(
                tpath, f'"{target}" must name a configured stage; expected one of: {", ".join(names)}'
            )
        elif target in seen:
            report.error(tpath, f'duplicate target "{target}"; list each target once (merge the guards)')
        seen.add(target)
        if isinstance(guards, list):
            gseen: set[str] = set()
            for k, guard in enumerate(guards):
                if not isinstance(guard, str):
                    continue
                gpath = ("stages", i, "targets", j, "guards", k)
                if len(guard) > _GUARD_MAX_LENGTH:
                    report.error(
                        gpath,
                        f"is too long: must be at most {_GUARD_MAX_LENGTH} characters, got {len(guard)}",
                    )
                elif not _GUARD_RE.fullmatch(guard):
                    report.error(gpath, f"must match {guard_pattern}, got {json.dumps(guard)}")
                elif guard in gseen:
                    report.error(gpath, f'duplicate guard "{guard}"; list each predicate once')
                gseen.add(guard)


#: ``EdgeConfig.guards`` item grammar, compiled once, and its length limit.
_GUARD_RE = re.compile(field_rule(attrs.fields(EdgeConfig).guards).item_pattern or "")
_GUARD_MAX_LENGTH = field_rule(attrs.fields(EdgeConfig).guards).item_max_length or MAX_NAME_LENGTH
_STAGE_TARGETS_VARIABLE = "stage_targets"


def _warn_terminal_guidance(graph: GraphConfig, report: ProblemReport) -> None:
    """Warn when the guidance ``section`` lists ``<< stage_targets >>`` plainly
    (``prompts.section_lists_targets_plainly``) and a stage has ``targets: []``: while an
    eligibility predicate holds there, the model would be told to pick one of no stages.
    A section that tests the variable (``<% if stage_targets %>``) handles the
    empty case itself and gets no warning."""
    if not section_lists_targets_plainly(graph.section):
        return
    for i, stage in enumerate(graph.stages):
        if stage.targets == ():
            report.warn(
                ("stages", i, "targets"),
                f'stage "{stage.name}" has no way out (`targets: []`) but the guidance `section` shows '
                "<< stage_targets >>, which renders empty there; give the stage a target, or word the "
                "section so it reads well without targets",
            )


def _trial_render_section(graph: GraphConfig, report: ProblemReport) -> None:
    """Render the guidance ``section`` as the stage switch would, once per stage with
    ``stage_current`` = its name and ``stage_targets`` = its declared targets (and ``""`` too when
    guards or ``targets: []`` can leave none), so a template that fails at run time (sandbox,
    runaway output, ``TypeError`` …) is a positioned problem at validate time.
    Stops at the first failure."""
    for stage in graph.stages:
        edges = graph.edges_from(stage.name)
        listed = ", ".join(e.target for e in edges)
        tried = dict.fromkeys((listed, "") if not edges or any(e.guards for e in edges) else (listed,))
        for targets in tried:
            try:
                render(graph.section, stage_current=stage.name, stage_targets=targets)
            except PromptTemplateError as err:
                report.error(("section",), f'{str(err).rstrip(".")} (rendered for stage "{stage.name}", '
                             f"stage_targets {targets!r:.60})")
                return


def _unreachable(graph: GraphConfig) -> list[int]:
    """Indexes of stages that no chain of edges from ``initial`` reaches. O(stages + edges):
    a stage with ``targets`` omitted reaches every stage without listing its edges."""
    reached = {graph.initial_stage}
    frontier = [graph.initial_stage]
    while frontier:
        stage = graph.stage(frontier.pop())
        if stage is None or stage.targets is None:  # `edges_from`: every other stage
            return []
        for edge in stage.targets:
            if edge.target not in reached:
                reached.add(edge.target)
                frontier.append(edge.target)
    return [i for i, s in enumerate(graph.stages) if s.name not in reached]


# ---------------------------------------------------------------------------------------------
# The two forms
# ---------------------------------------------------------------------------------------------

_PLUGIN_ENTRY_KEYS = ("id", "name", "config")
_PLUGIN_IDS = (STAGE_SWITCH_PLUGIN_ID, PLAN_MODE_PLUGIN_ID)


def _plugin_keys(cl: type) -> dict[str, str]:
    """plugin-form key -> attribute/native key of ``cl`` (only fields the plugin form accepts)."""
    return {field_rule(f).plugin_key or "": yaml_key(f) for f in attrs.fields(cl) if field_rule(f).plugin_key}


def _plugin_renamer(report: ProblemReport) -> _Renamer:
    graph_keys, stage_keys, plan_keys = (
        _plugin_keys(GraphConfig),
        _plugin_keys(StageConfig),
        _plugin_keys(PlanModeConfig),
    )

    def rename(npath: NativePath, key: str, pos: tuple[int, int], display: str) -> str | None:
        if npath == ():
            table = graph_keys
        elif npath == (PLAN_MODE_KEY,):
            table = plan_keys
        elif len(npath) == 2 and npath[0] == "stages":
            table = stage_keys
        else:
            return key
        if key in table:
            return table[key]
        report.error_at(pos, display, _unknown_key_message(key, list(table)))
        return None

    return rename


def _child_pos(node: Any, index: object, *, of_key: bool, default: tuple[int, int]) -> tuple[int, int]:
    """1-based position of item ``index`` of a sequence, or of key ``index`` (``of_key``) or its
    value in a mapping; ``default`` when ruamel recorded none (tagged or merged nodes)."""
    data = getattr(getattr(node, "lc", None), "data", None) or {}
    pos = data.get(index)
    if not pos:
        return default
    line, col = (pos[0], pos[1]) if of_key or len(pos) < 4 else (pos[2], pos[3])
    return (line + 1, col + 1)


def _entry_value(entry: Any) -> str:
    """``_describe`` of a plugin-list item (a tagged scalar is described by its value)."""
    from ruamel.yaml.comments import TaggedScalar

    return describe_value(_plain_scalar(entry.value if isinstance(entry, TaggedScalar) else entry))


def _load_plugin_list(tree: Any, report: ProblemReport, stem: str) -> dict[str, Any] | None:
    from ruamel.yaml.comments import CommentedMap

    report.plugin_form = True
    native: dict[str, Any] = {}
    seen: dict[str, int] = {}
    any_entry = False
    root = _node_pos(tree)
    tag = getattr(getattr(tree, "tag", None), "value", None)
    if tag is not None:
        report.error_at(
            root, "(file)", f"the plugin list has the YAML tag {tag}; fsm_stage knows no tags, remove it"
        )
    for idx, entry in enumerate(tree):
        epos = _child_pos(tree, idx, of_key=True, default=root)
        edisplay = f"[{idx}]"
        etag = getattr(getattr(entry, "tag", None), "value", None)
        if etag is not None:
            report.error_at(epos, edisplay, f"has the YAML tag {etag}; fsm_stage knows no tags, remove it")
            continue
        if not isinstance(entry, CommentedMap):
            report.error_at(
                epos,
                edisplay,
                f"expected a plugin entry mapping {{id, name, config}}, got {_entry_value(entry)}",
            )
            continue
        epos = _node_pos(entry, epos) if not entry.lc.data else epos
        for key in entry:
            if key not in _PLUGIN_ENTRY_KEYS:
                report.error_at(
                    _child_pos(entry, key, of_key=True, default=epos),
                    f"{edisplay}.{key}",
                    _unknown_key_message(str(key), list(_PLUGIN_ENTRY_KEYS)),
                )
        pid = entry.get("id")
        if "id" not in entry:
            report.error_at(
                epos, f"{edisplay}.id", f"required key is missing; expected one of: {', '.join(_PLUGIN_IDS)}"
            )
            continue
        il, ic = _child_pos(entry, "id", of_key=False, default=epos)
        il, ic = il - 1, ic - 1
        if not isinstance(pid, str) or pid not in _PLUGIN_IDS:
            report.error_at(
                (il + 1, ic + 1),
                f"{edisplay}.id",
                f"unknown plugin id {json.dumps(_plain_scalar(pid), default=str)}; "
                f"expected one of: {', '.join(_PLUGIN_IDS)}",
            )
            continue
        if pid in seen:
            report.error_at(
                (il + 1, ic + 1),
                f"{edisplay}.id",
                f"duplicate plugin {json.dumps(pid)} (already at [{seen[pid]}]); expected each plugin once",
            )
            continue
        seen[pid] = idx
        name = entry.get("name")
        if "name" in entry:
            npos = _child_pos(entry, "name", of_key=False, default=epos)
            package = PLUGIN_PACKAGES[pid]
            if not isinstance(name, str) or not name.strip():
                report.error_at(
                    npos,
                    f"{edisplay}.name",
                    f"expected the package name {json.dumps(package)}, got {_entry_value(name)}",
                )
            elif not re.fullmatch(plugin_name_pattern(pid), name):
                report.error_at(
                    npos,
                    f"{edisplay}.name",
                    f"{json.dumps(_one_line(name), ensure_ascii=False)} is not the {pid} package; expected "
                    f"{json.dumps(package)} (or omit `name`): fsm_stage implements that package, "
                    "a plugin entry for another package cannot be configured here",
                )
        if "config" not in entry:
            report.error_at(
                epos, f"{edisplay}.config", "required key is missing; expected the plugin's config mapping"
            )
            continue
        config = entry["config"]
        cl, cc = _child_pos(entry, "config", of_key=False, default=epos)
        cl, cc = cl - 1, cc - 1
        cdisplay = f"{edisplay}.config"
        if not isinstance(config, CommentedMap):
            report.error_at(
                (cl + 1, cc + 1),
                cdisplay,
                f"expected a config mapping, got {describe_value(_plain_scalar(config))}",
            )
            continue
        any_entry = True
        cpos = _node_pos(config, (cl + 1, cc + 1))
        if pid == STAGE_SWITCH_PLUGIN_ID:
            report.locs[()] = _Loc(cdisplay, cpos, cpos)
            graph = _to_plain(config, (), cdisplay, report, _plugin_renamer(report))
            assert isinstance(graph, dict)
            section = graph.get("section")
            if isinstance(section, str):
                graph["section"] = _DSH_VARIABLE.sub(lambda m: f"<< {m.group(1)} >>", section)
            graph = {"name": stem, **graph}
            native.update(graph)
        else:
            report.locs[(PLAN_MODE_KEY,)] = _Loc(cdisplay, cpos, cpos)
            native[PLAN_MODE_KEY] = _to_plain(
                config, (PLAN_MODE_KEY,), cdisplay, report, _plugin_renamer(report)
            )
    if not any_entry and not report.errors:
        report.error_at(
            (1, 1),
            "(file)",
            "the plugin list holds no entry; expected `- id: stage-switch` and/or `- id: plan-mode`",
        )
    return native if any_entry else None


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def load_config_text(text: str, path: str = "<string>", *, strict: bool = False) -> ConfigFile:
    """Load one YAML document (native or plugin-list form) into a validated ``ConfigFile``.

    ``path`` is used in messages and as the default graph name (its stem). Raises
    ``ConfigError`` whose ``problems`` are every positioned problem of the file (one line each,
    sorted by position). ``strict`` turns warnings (unreachable stages) into errors.
    Spec: stage-switch §1.2 (S1–S12), plan-mode §2.A (B1–B5), DESIGN.md §6.
    """
    report = ProblemReport(path)
    stem = Path(path).stem if not path.startswith("<") else "stage-graph"
    native: dict[str, Any] | None = None
    fast = _fast_native(text, locate=False)
    if fast is not None:
        native = _without_extensions(fast[0])
        report.locate = lambda: _fast_locations(text)
    if not native:  # not handled by the fast path (or it declares nothing): the reference path
        report.locate = None
        ok, tree = _parse_yaml(text, report)
        if ok:
            native = _to_native(tree, report, stem)
    graph: GraphConfig | None = None
    plan: PlanModeConfig | None = None
    if native is not None:
        graph_part = {k: v for k, v in native.items() if k != PLAN_MODE_KEY}
        graph_keys = _class_fields_by_key(GraphConfig)
        if graph_part and not graph_keys.keys() & graph_part.keys():
            # only unknown keys (e.g. a typo beside `plan_mode`): no graph was meant
            for key in graph_part:
                report.error((key,), _unknown_key_message(key, [*graph_keys, PLAN_MODE_KEY]), at_key=True)
        elif graph_part:
            graph_part.setdefault("name", stem)
            graph = _structure(graph_part, GraphConfig, (), report)
            _check_graph(graph_part, report)
        if PLAN_MODE_KEY in native:
            pm = native[PLAN_MODE_KEY]
            plan = _structure(pm, PlanModeConfig, (PLAN_MODE_KEY,), report)
            if isinstance(pm, Mapping):
                _check_field_rules(pm, PlanModeConfig, (PLAN_MODE_KEY,), report)
    if graph is not None and not report.errors:
        _trial_render_section(graph, report)
        _warn_terminal_guidance(graph, report)
        for i in _unreachable(graph):
            report.warn(
                ("stages", i, "name"),
                f'stage "{graph.stages[i].name}" is unreachable from initial stage '
                f'"{graph.initial_stage}" through `targets`; add it to a stage\'s targets or remove it',
            )
    if strict:
        report.errors.extend(attrs.evolve(w, severity="error") for w in report.warnings)
        report.warnings = []
    if report.errors:
        raise InvalidConfigError(report.ordered(report.errors))
    warnings = report.ordered(report.warnings)
    return ConfigFile(
        path=path,
        graph=graph,
        plan_mode=plan,
        warnings=tuple(str(w) for w in warnings),
        warning_details=tuple(warnings),
    )


def load_config(path: str | Path, *, strict: bool = False) -> ConfigFile:
    """Read and load the YAML file at ``path`` (see ``load_config_text``).

    Raises ``ConfigError`` (one positioned line per problem); a file that cannot be read
    (missing, a directory, binary, not UTF-8: ``fileio.read_text_input``) is a one-line
    ``ConfigError`` too, ``PATH:1:1: (file): cannot read stage graph: reason``.
    """
    shown = str(path)
    try:
        text = read_text_input(path, what="stage graph")
    except InputFileError as err:
        message = str(err).removeprefix(f"{Path(path)}: ")
        raise InvalidConfigError([Problem(shown, 1, 1, "(file)", message)]) from None
    return load_config_text(text, shown, strict=strict)


def _to_native(tree: Any, report: ProblemReport, stem: str) -> dict[str, Any] | None:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if tree is None:
        report.error_at(
            (1, 1), "(file)", "the file is empty; expected a stage graph mapping or a plugin list"
        )
        return None
    if isinstance(tree, CommentedSeq):
        return _load_plugin_list(tree, report, stem)
    if not isinstance(tree, CommentedMap):
        report.error_at(
            _node_pos(tree),
            "(file)",
            f"expected a stage graph mapping or a plugin list, got {describe_value(_plain_scalar(tree))}",
        )
        return None
    pos = _node_pos(tree)
    report.locs[()] = _Loc("", pos, pos)
    native = _to_plain(tree, (), "", report)
    assert isinstance(native, dict)
    native = _without_extensions(native)
    if not native and not report.errors:
        report.error_at(
            pos, "(file)", "the file declares nothing; expected `stages` and `section` and/or `plan_mode`"
        )
        return None
    return native


def _fast_locations(text: str) -> dict[NativePath, _Loc]:
    """Positions of a text the fast path already parsed (a second, positioning pass)."""
    located = _fast_native(text)
    if located is None:  # cannot happen: the same text parsed a moment ago
        raise AssertionError("the libyaml fast path refused a text it had accepted")
    return located[1]


def _without_extensions(native: dict[str, Any]) -> dict[str, Any]:
    """``native`` without its ``x-…`` top-level keys: the user's own (a home for YAML anchors),
    as in Compose files."""
    return {k: v for k, v in native.items() if not k.startswith(EXTENSION_PREFIX)}


def _structure(value: object, cl: type[Any], npath: NativePath, report: ProblemReport) -> Any:
    try:
        return _CONVERTER.structure(value, cl)
    except Exception as exc:
        if isinstance(exc, BaseValidationError | ForbiddenExtraKeysError | _TypeProblem):
            _walk_cattrs(exc, cl, npath, report)
            return None
        raise


def positioned_problems(
    report: ProblemReport,
    cl: type[Any],
    *,
    converter: cattrs.Converter | None = None,
    npath: NativePath = (),
    value: object = attrs.NOTHING,
) -> tuple[Any, list[Problem]]:
    """Structure a YAML document (or part of one) into the attrs class ``cl`` and report every
    cattrs validation problem at its position in the file.

    ``report``: a ``ProblemReport`` from ``ProblemReport.from_yaml(text, path)`` (or
    ``from_tree``); ``value`` defaults to the data at ``npath`` of ``report.data``.
    ``converter``: a ``cattrs.Converter`` built with ``detailed_validation=True``, best
    ``strict_converter()`` plus your own hooks (a plain cattrs converter works but lets Python
    wording through, e.g. "'int' object is not iterable"); default: the stage-graph loader's
    converter. Leaf messages: the text of the ``TypeError``/``ValueError`` the hooks raise;
    unknown keys are listed with the class's keys and a "did you mean"; missing keys say
    ``required key is missing``.

    Returns ``(instance or None, report.problems)``: the instance when structuring succeeded,
    and every error the report holds so far (earlier syntax errors included), sorted by
    position, each ``Problem`` printing as ``PATH:LINE:COLUMN: KEY: message``. Never raises
    for bad input; exceptions other than cattrs validation errors (bugs in hooks) propagate.
    """
    if value is attrs.NOTHING:
        value = report.data
        for part in npath:
            value = value[part] if isinstance(value, dict | list) else None  # type: ignore[index]
    conv = converter if converter is not None else _CONVERTER
    try:
        obj = conv.structure(value, cl)
    except (BaseValidationError, ForbiddenExtraKeysError, TypeError, ValueError) as exc:
        _walk_cattrs(exc, cl, npath, report, plain=converter is not None)
        obj = None
    return obj, report.problems


def normalised(config: ConfigFile | GraphConfig | PlanModeConfig) -> dict[str, Any]:
    """A plain, JSON-able dict of what ``config`` means (input of the graph fingerprint).

    Defaults are resolved (``initial`` → the initial stage; ``targets: None`` → the explicit
    list of every other stage) and documentation-only fields (``description``) are left out,
    so two files that behave the same normalise the same. Edges are ``{"to", "guards"}``.
    A ``ConfigFile`` gives ``{"graph": …|None, "plan_mode": …|None}``.
    """
    if isinstance(config, ConfigFile):
        return {
            "graph": normalised(config.graph) if config.graph is not None else None,
            "plan_mode": normalised(config.plan_mode) if config.plan_mode is not None else None,
        }
    if isinstance(config, PlanModeConfig):
        return {"section": config.section}
    return {
        "name": config.name,
        "initial": config.initial_stage,
        "section": config.section,
        "handoff_dir": config.handoff_dir,
        "min_handoff_tokens": config.min_handoff_tokens,
        "language": config.language,
        "stages": [
            {
                "name": s.name,
                "instruction": s.instruction,
                "targets": [{"to": e.target, "guards": list(e.guards)} for e in config.edges_from(s.name)],
            }
            for s in config.stages
        ],
    }
