"""Positioned-YAML toolkit: parse a file, keep every key's line and column, report problems.

``problems``  the one-line ``FILE:LINE:COL: key: message`` record (``Problem``) and paths.
``parse``     ruamel round-trip parse to plain data with positions (the reference path).
``fast``      the libyaml shortcut for plain one-mapping documents (same result, ~20x faster).
``report``    ``ProblemReport``: one file's data, positions, errors and warnings.
``structure`` strict cattrs structuring with every validation problem positioned.

Nothing here knows a particular file format: key names, shorthands and wording come in as
parameters (``structure.Vocabulary``).
"""

from fsm_stage._yaml.fast import c_parser, fast_parse
from fsm_stage._yaml.parse import Renamer, node_pos, parse_yaml, plain_scalar, to_plain
from fsm_stage._yaml.problems import Loc, NativePath, Problem, describe_value, join, one_line
from fsm_stage._yaml.report import ProblemReport
from fsm_stage._yaml.structure import (
    PLAIN_VOCABULARY,
    Vocabulary,
    fields_by_key,
    key_suggestion,
    positioned_problems,
    strict_converter,
    unknown_key_message,
    walk_cattrs,
)

__all__ = [
    "PLAIN_VOCABULARY",
    "Loc",
    "NativePath",
    "Problem",
    "ProblemReport",
    "Renamer",
    "Vocabulary",
    "c_parser",
    "describe_value",
    "fast_parse",
    "fields_by_key",
    "join",
    "key_suggestion",
    "node_pos",
    "one_line",
    "parse_yaml",
    "plain_scalar",
    "positioned_problems",
    "strict_converter",
    "to_plain",
    "unknown_key_message",
    "walk_cattrs",
]
