"""Reviewers for teams: who a reviewer is, and whether a review's rules let them answer.

``load_reviewers(path)`` reads a reviewers file (YAML: ``reviewers: {name: {token_sha256,
groups}}``); tokens are stored hashed (``token_sha256(token)``) and checked in constant time
(``Reviewers.authenticate``). ``refusal(rules, reviewer, requester, reviewers)`` says why a
review's logged rules (``config.review_rules.rules_json``) do not let ``reviewer`` approve, or
None. ``deadline_at`` is when a review expires. Every refusal is one line (``ReviewRefusedError``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.errors import ReviewRefusedError, UserError

#: A reviewer name (also what ``approvers`` lists).
REVIEWER_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
#: Largest reviewers file read (bytes).
MAX_REVIEWERS_FILE = 1 << 20


def token_sha256(token: str) -> str:
    """Hex sha256 of a reviewer token (what the reviewers file stores)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@attrs.frozen
class Reviewer:
    """One reviewer: ``name``, the hex sha256 of their token (None: cannot authenticate) and
    their ``groups``."""

    name: str
    token_sha256: str | None = None
    groups: tuple[str, ...] = ()


@attrs.frozen
class Reviewers:
    """The reviewers of a reviewers file, by name."""

    by_name: Mapping[str, Reviewer] = attrs.field(factory=dict)

    def authenticate(self, name: str, token: str | None) -> Reviewer:
        """The reviewer ``name`` when ``token`` hashes to their stored hash. Raises
        ``ReviewRefusedError`` (one line, same text for an unknown name and a wrong token)."""
        reviewer = self.by_name.get(name)
        expected = reviewer.token_sha256 if reviewer is not None else None
        given = token_sha256(token) if isinstance(token, str) else ""
        if reviewer is None or expected is None or not hmac.compare_digest(expected, given):
            raise ReviewRefusedError(f"reviewer {name!r:.70}: unknown name or wrong token")
        return reviewer

    def members(self, group: str) -> frozenset[str]:
        """Names of the reviewers in ``group``."""
        return frozenset(r.name for r in self.by_name.values() if group in r.groups)


def load_reviewers(path: str | Path) -> Reviewers:
    """Read a reviewers file::

        reviewers:
          alice: {token_sha256: <hex>, groups: [leads]}
          bob:   {token_sha256: <hex>}

    Raises ``UserError`` with one line for a file that cannot be read or has the wrong shape."""
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
                        "`reviewers: {name: {token_sha256, groups}}`")
    out: dict[str, Reviewer] = {}
    for name, entry in entries.items():
        where = f"{p}: reviewers.{name}"
        if not isinstance(name, str) or not REVIEWER_NAME_RE.fullmatch(name):
            raise UserError(f"{where}: a reviewer name matches {REVIEWER_NAME_RE.pattern}")
        if not isinstance(entry, dict) or set(entry) - {"token_sha256", "groups"}:
            raise UserError(f"{where}: expected {{token_sha256: <64 hex>, groups: [names]}}")
        digest, groups = entry.get("token_sha256"), entry.get("groups", [])
        if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise UserError(f"{where}.token_sha256: expected 64 lowercase hex digits "
                            "(fsm-stage reviewers token prints one)")
        if not isinstance(groups, list) or not all(isinstance(g, str) and REVIEWER_NAME_RE.fullmatch(g)
                                                   for g in groups):
            raise UserError(f"{where}.groups: expected a list of group names")
        out[name] = Reviewer(name, digest, tuple(groups))
    return Reviewers(out)


def may_answer(rules: Mapping[str, Any] | None, name: str, reviewers: Reviewers | None) -> bool:
    """Whether ``rules.approvers`` (names and ``@group``s) includes ``name`` (no approvers:
    anyone). A group needs ``reviewers`` to resolve; without it only names match."""
    approvers = (rules or {}).get("approvers")
    if not approvers:
        return True
    for entry in approvers:
        if entry == name:
            return True
        if isinstance(entry, str) and entry.startswith("@") and reviewers is not None \
                and name in reviewers.members(entry[1:]):
            return True
    return False


def refusal(rules: Mapping[str, Any] | None, reviewer: str, *, requester: str | None,
            reviewers: Reviewers | None, outcome: str) -> str | None:
    """Why ``rules`` do not let ``reviewer`` give ``outcome``, as one line, or None."""
    if not may_answer(rules, reviewer, reviewers):
        listed = ", ".join((rules or {})["approvers"])
        return f"{reviewer} is not among the approvers of this review ({listed})"
    if outcome == "approve" and (rules or {}).get("notRequester") and requester is not None \
            and reviewer == requester:
        return f"{reviewer} started this session and may not approve its reviews (not_requester)"
    return None


def deadline_at(rules: Mapping[str, Any] | None, asked_ms: int) -> int | None:
    """Epoch ms when a review asked at ``asked_ms`` expires under ``rules`` (None: never)."""
    seconds = (rules or {}).get("deadlineSeconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return asked_ms + int(seconds * 1000)
    return None
