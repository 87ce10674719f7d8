"""Who a request is: reviewer tokens (stored hashed) or a trusted proxy header; and whether a
review's logged rules let that reviewer answer.

A reviewers file is YAML ``reviewers: {name: {token_sha256: <64 hex>, groups: [names]}}``;
``authenticate`` hashes the given token and compares in constant time, with one refusal text
for an unknown name and a wrong token; ``login_stamp`` binds a web login to the token it was
made with, so rotating or removing that token ends the login. ``refusal(rules, reviewer,
groups)`` applies the rules a review request logged (``approvers``: names and ``@group``s) and
refuses, failing closed, rules it cannot read.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.errors import ReviewRefusedError
from fsm_stage.reviews import _team
from fsm_stage.reviews._team import Reviewer, token_sha256

__all__ = ["Reviewer", "Reviewers", "load_reviewers", "login_stamp", "refusal", "token_sha256"]

@attrs.frozen
class Reviewers:
    """The reviewers of a reviewers file, by name (``reviews._team.Reviewer``s), for a web login:
    ``authenticate`` answers None instead of raising."""

    by_name: Mapping[str, Reviewer] = attrs.field(factory=dict)

    def authenticate(self, name: str, token: str) -> Reviewer | None:
        """The reviewer ``name`` when ``token`` hashes to the stored hash, else None (one
        constant-time check, ``reviews._team.Reviewers.authenticate``)."""
        try:
            return _team.Reviewers(self.by_name).authenticate(name, token)
        except ReviewRefusedError:
            return None

    def logged_in(self, name: object, stamp: object) -> str | None:
        """``name`` when it is a reviewer whose current token is the one ``stamp`` (a
        ``login_stamp`` kept in the session cookie) was made with, else None."""
        if not isinstance(name, str) or not isinstance(stamp, str) or name not in self.by_name:
            return None
        current = login_stamp(self.by_name[name])
        return name if current is not None and hmac.compare_digest(current, stamp) else None

    def groups_of(self, name: str) -> tuple[str, ...]:
        """The groups of ``name`` (() for an unknown name)."""
        reviewer = self.by_name.get(name)
        return reviewer.groups if reviewer is not None else ()


def login_stamp(reviewer: Reviewer) -> str | None:
    """What a session cookie keeps of the token ``reviewer`` logged in with: a digest of its
    stored hash (hex, 32 chars; the cookie is signed, not secret, so never the hash itself).
    None for a reviewer who cannot authenticate."""
    if reviewer.token_sha256 is None:
        return None
    return hashlib.sha256(b"fsm_stage inbox login\0" + reviewer.token_sha256.encode()).hexdigest()[:32]


def load_reviewers(path: str | Path) -> Reviewers:
    """Read a reviewers file (``reviews._team.load_reviewers``: one-line ``UserError``s)."""
    return Reviewers(_team.load_reviewers(path).by_name)


def refusal(rules: Mapping[str, Any] | None, reviewer: str | None, groups: tuple[str, ...]) -> str | None:
    """Why a review's logged ``rules`` do not let ``reviewer`` (member of ``groups``) answer it,
    as one line, or None. No rules or no ``approvers``: anyone may. Rules that cannot be read
    (``reviews._team.rules_problem``) refuse everyone (fail closed). ``reviewer`` None (nobody
    named): only that readability check (``vote_review`` then refuses rules that need a name)."""
    problem = _team.rules_problem(rules)
    if problem is not None:
        return f"this review's rules cannot be read ({problem}); nobody may answer it here"
    if rules is None:
        return None
    approvers = rules.get("approvers")
    if not approvers:
        return None
    if reviewer is None:
        return None
    if reviewer.startswith("@"):
        return f"{reviewer} is a group, not a reviewer"
    if _team.listed(approvers, reviewer, groups):
        return None
    return f"{reviewer} is not among the approvers of this review ({', '.join(approvers)})"
