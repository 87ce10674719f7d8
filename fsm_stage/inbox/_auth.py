"""Who a request is: reviewer tokens (stored hashed) or a trusted proxy header; and whether a
review's logged rules let that reviewer answer.

A reviewers file is YAML ``reviewers: {name: {token_sha256: <64 hex>, groups: [names]}}``;
``authenticate`` hashes the given token and compares in constant time, with one refusal text
for an unknown name and a wrong token. ``refusal(rules, reviewer, groups)`` applies the rules a
review request logged (``approvers``: names and ``@group``s) and refuses, failing closed, rules
it cannot read.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.errors import UserError

__all__ = ["Reviewer", "Reviewers", "load_reviewers", "refusal", "token_sha256"]

#: A reviewer or group name.
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
#: Largest reviewers file read (bytes).
MAX_REVIEWERS_FILE = 1 << 20


def token_sha256(token: str) -> str:
    """Hex sha256 of a reviewer token (what the reviewers file stores)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@attrs.frozen
class Reviewer:
    """A reviewer: ``name``, hex sha256 of the token (None: cannot log in), ``groups``."""

    name: str
    token_sha256: str | None = None
    groups: tuple[str, ...] = ()


@attrs.frozen
class Reviewers:
    """The reviewers of a reviewers file, by name."""

    by_name: Mapping[str, Reviewer] = attrs.field(factory=dict)

    def authenticate(self, name: str, token: str) -> Reviewer | None:
        """The reviewer ``name`` when ``token`` hashes to the stored hash, else None (the
        comparison runs in constant time, also for an unknown name)."""
        reviewer = self.by_name.get(name)
        expected = reviewer.token_sha256 if reviewer is not None and reviewer.token_sha256 else "0" * 64
        ok = hmac.compare_digest(expected, token_sha256(token))
        return reviewer if ok and reviewer is not None and reviewer.token_sha256 else None

    def groups_of(self, name: str) -> tuple[str, ...]:
        """The groups of ``name`` (() for an unknown name)."""
        reviewer = self.by_name.get(name)
        return reviewer.groups if reviewer is not None else ()


def load_reviewers(path: str | Path) -> Reviewers:
    """Read a reviewers file (see module docstring). Raises ``UserError`` (one line) for a file
    that cannot be read or has the wrong shape."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    p = Path(path)
    try:
        if p.stat().st_size > MAX_REVIEWERS_FILE:
            raise UserError(f"{p}: reviewers file larger than {MAX_REVIEWERS_FILE} bytes")
        data = YAML(typ="safe", pure=True).load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as err:
        raise UserError(f"{p}: cannot read reviewers file: {str(err).splitlines()[0]}") from None
    entries = data.get("reviewers") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or set(data) - {"reviewers"}:
        raise UserError(f"{p}: expected a mapping with one key "
                        f"`reviewers: {{name: {{token_sha256, groups}}}}`")
    out: dict[str, Reviewer] = {}
    for name, entry in entries.items():
        where = f"{p}: reviewers.{name}"
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise UserError(f"{where}: a reviewer name matches {NAME_RE.pattern}")
        if not isinstance(entry, dict) or set(entry) - {"token_sha256", "groups"}:
            raise UserError(f"{where}: expected {{token_sha256: <64 hex>, groups: [names]}}")
        digest, groups = entry.get("token_sha256"), entry.get("groups", [])
        if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise UserError(f"{where}.token_sha256: expected 64 lowercase hex digits")
        if not isinstance(groups, list) \
                or not all(isinstance(g, str) and NAME_RE.fullmatch(g) for g in groups):
            raise UserError(f"{where}.groups: expected a list of group names")
        out[name] = Reviewer(name, digest, tuple(groups))
    return Reviewers(out)


def refusal(rules: Mapping[str, Any] | None, reviewer: str, groups: tuple[str, ...]) -> str | None:
    """Why a review's logged ``rules`` do not let ``reviewer`` (member of ``groups``) answer it,
    as one line, or None. No rules or no ``approvers``: anyone may. Rules that are not a
    mapping, or approvers that are not a list of names, refuse everyone (fail closed)."""
    if rules is None:
        return None
    if not isinstance(rules, Mapping) or rules.get("invalid"):
        return "this review's rules cannot be read; nobody may answer it here"
    approvers = rules.get("approvers")
    if approvers is None or approvers == []:
        return None
    if not isinstance(approvers, list) or not all(isinstance(a, str) for a in approvers):
        return "this review's approvers cannot be read; nobody may answer it here"
    if reviewer in approvers or any(a.startswith("@") and a[1:] in groups for a in approvers):
        return None
    return f"{reviewer} is not among the approvers of this review ({', '.join(approvers)})"
