"""``ProblemReport``: the positioned problems and warnings of one YAML file.

Parse a text (``ProblemReport.from_yaml``) or a loaded round-trip tree (``from_tree``) into
plain data plus the position of every key and value, then report problems by path
(``error``, ``warn``); ``problems`` / ``warning_list`` give them sorted, duplicates removed.
Structure the data into attrs classes with ``fsm_stage._yaml.structure.positioned_problems``.
"""

from __future__ import annotations

from collections.abc import Callable

from fsm_stage._yaml.parse import node_pos, parse_yaml, to_plain
from fsm_stage._yaml.problems import Loc, NativePath, Problem, join, one_line


class ProblemReport:
    """Positioned problems and warnings of one YAML file.

    Usage for a file of your own attrs classes::

        report = ProblemReport.from_yaml(text, "scenario.yaml")   # syntax errors are problems
        obj, problems = positioned_problems(report, Scenario, converter=my_converter)
        report.error(("steps", 3, "id"), "duplicate call id")      # your own rules, positioned
        if report.problems: raise ConfigError(report.problems)

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
        self.locs: dict[NativePath, Loc] = {}
        #: computes ``locs`` on first use (the fast path positions a file only when it reports)
        self.locate: Callable[[], dict[NativePath, Loc]] | None = None
        #: the document as plain Python data (``from_yaml``/``from_tree``); None if unparsable
        self.data: object = None
        #: ``(mapping npath, key)`` of required keys an unknown key of that mapping is reported
        #: as a misspelling of ("did you mean"): not reported as missing too
        self.misspelt: set[tuple[NativePath, str]] = set()

    @classmethod
    def from_yaml(cls, text: str, path: str) -> ProblemReport:
        """Parse ``text`` with ruamel.yaml (round trip, duplicate keys refused) into ``data``,
        recording the position of every key and value. YAML syntax errors and tags become
        problems (KEY ``(yaml)``); ``data`` is then None (syntax error) or the untagged value."""
        report = cls(path)
        ok, tree = parse_yaml(text, report)
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
        pos = node_pos(tree)
        self.locs[()] = Loc("", pos, pos)
        self.data = to_plain(tree, (), "", self)

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
        """A problem at 1-based ``pos`` under the display ``key`` (empty: ``(file)``)."""
        self.errors.append(Problem(self.path, pos[0], pos[1], one_line(key or "(file)"), one_line(message)))

    def error(self, npath: NativePath, message: str, *, at_key: bool = False) -> None:
        """A problem with the value at ``npath`` (or with the key itself when ``at_key``)."""
        loc = self.loc(npath)
        self.error_at(loc.key if at_key else loc.value, loc.display, message)

    def warn(self, npath: NativePath, message: str) -> None:
        """A warning about the value at ``npath``."""
        loc = self.loc(npath)
        self.warnings.append(
            Problem(self.path, *loc.value, one_line(loc.display), one_line(message), "warning")
        )

    def loc(self, npath: NativePath) -> Loc:
        """The location of ``npath``, or of its nearest located ancestor (a missing key)."""
        if self.locate is not None:
            self.locs, self.locate = self.locate(), None
        probe = npath
        while probe not in self.locs and probe:
            probe = probe[:-1]
        base = self.locs.get(probe, Loc("", (1, 1), (1, 1)))
        if probe == npath:
            return base
        display = base.display
        for part in npath[len(probe) :]:
            display = join(display, part)
        return Loc(display, base.value, base.value)

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
