"""Review rules in stage-graph files: who may approve, how many, and until when.

``review: {approvers, quorum, not_requester, deadline, on_deadline, notify}`` at graph level
(the default of every review), on an edge (``targets: [{to, review}]``) and on ``plan_mode``.
``check_review_rules`` validates the plain data (positioned problems); ``parse_duration`` reads
a ``deadline`` (``90s``, ``15m``, ``2h``, ``1d``); ``rules_json`` is what a review request logs.
Run-time checks live in ``fsm_stage.reviews``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from fsm_stage._yaml import NativePath, ProblemReport
from fsm_stage.config.fields import FieldRule, rule_metadata
from fsm_stage.constants import MAX_DEADLINE_SECONDS, REVIEWER_NAME_PATTERN

#: A reviewer name, or ``@group`` (a group of the reviewers file).
APPROVER_PATTERN = "@?" + REVIEWER_NAME_PATTERN
#: ``<number><unit>`` with unit s, m, h or d.
DURATION_PATTERN = r"[0-9]+(?:\.[0-9]+)?[smhd]"
_APPROVER_RE = re.compile(APPROVER_PATTERN)
_DURATION_RE = re.compile(DURATION_PATTERN)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: Most approvers and webhooks one rule may list.
MAX_LIST = 64
OnDeadline = Literal["keep", "dismiss"]


def _rule(doc: str, expected: str, **kw: Any) -> dict[str, FieldRule]:
    return rule_metadata(doc, expected, **kw)


@attrs.frozen
class ReviewRulesConfig:
    """Who may answer a review and until when (docs/reviews.md, "Reviews for teams")."""

    approvers: tuple[str, ...] | None = attrs.field(default=None, metadata=_rule(
        "Reviewer names or @groups (from the reviewers file) who may answer; omit: anyone.",
        "a non-empty list of reviewer names or @groups", min_items=1, item_pattern=APPROVER_PATTERN,
        item_max_length=64))
    quorum: int = attrs.field(default=1, metadata=_rule(
        "Distinct approvers needed to approve; any keep closes the review.", "a positive whole number",
        minimum=1))
    not_requester: bool = attrs.field(default=False, metadata=_rule(
        "The person who started the session may not approve.", "true or false"))
    deadline: str | None = attrs.field(default=None, metadata=_rule(
        "How long the review stays open (90s, 15m, 2h, 1d); it never approves once expired.",
        "a duration such as 15m, 2h or 1d", pattern=DURATION_PATTERN, max_length=16))
    on_deadline: OnDeadline = attrs.field(default="dismiss", metadata=_rule(
        "What an expired review becomes: dismiss (default) or keep.", '"keep" or "dismiss"'))
    notify: tuple[str, ...] = attrs.field(default=(), metadata=_rule(
        "Webhook URLs told when the review is requested, answered or expires.",
        "a list of http(s) URLs"))


attrs.resolve_types(ReviewRulesConfig)

#: What an omitted rule means: anyone, one approval, no deadline, nobody notified.
DEFAULT_RULES = ReviewRulesConfig()


def parse_duration(text: str) -> float:
    """Seconds of a ``deadline`` (``90s``, ``15m``, ``2h``, ``1.5d``). Raises ``ValueError``."""
    if not isinstance(text, str) or not _DURATION_RE.fullmatch(text):
        raise ValueError(f"not a duration: {text!r:.40} (expected e.g. 90s, 15m, 2h, 1d)")
    return float(text[:-1]) * _UNITS[text[-1]]


def rules_json(rules: ReviewRulesConfig | None) -> dict[str, Any] | None:
    """The rules as a review request logs them (None for the default rules: nothing to log)."""
    if rules is None or rules == DEFAULT_RULES:
        return None
    out: dict[str, Any] = {}
    if rules.approvers is not None:
        out["approvers"] = list(rules.approvers)
    if rules.quorum != 1:
        out["quorum"] = rules.quorum
    if rules.not_requester:
        out["notRequester"] = True
    if rules.deadline is not None:
        out["deadlineSeconds"] = parse_duration(rules.deadline)
        out["onDeadline"] = rules.on_deadline
    if rules.notify:
        out["notify"] = list(rules.notify)
    return out


def merged_rules(default: ReviewRulesConfig | None,
                 specific: ReviewRulesConfig | None) -> ReviewRulesConfig | None:
    """``specific`` when given (an edge's or plan mode's own rules replace the graph default
    whole), else ``default``."""
    return specific if specific is not None else default


def _check_one(value: object, npath: NativePath, report: ProblemReport) -> None:
    if not isinstance(value, Mapping):
        return  # the structurer reports the type
    deadline = value.get("deadline")
    if isinstance(deadline, str) and _DURATION_RE.fullmatch(deadline) \
            and parse_duration(deadline) > MAX_DEADLINE_SECONDS:
        report.error((*npath, "deadline"), f"is too long: at most 366d, got {deadline}")
    if isinstance(deadline, str) and _DURATION_RE.fullmatch(deadline) and parse_duration(deadline) <= 0:
        report.error((*npath, "deadline"),
                     f"must be longer than zero, got {deadline} (omit it for no deadline)")
    if isinstance(deadline, str) and not _DURATION_RE.fullmatch(deadline):
        report.error((*npath, "deadline"),
                     f"{json.dumps(deadline)[:40]} is not a duration; expected e.g. 90s, 15m, 2h or 1d")
    if "on_deadline" in value and "deadline" not in value:
        report.warn((*npath, "on_deadline"), "has no effect without a `deadline`")
    quorum = value.get("quorum")
    approvers = value.get("approvers")
    if isinstance(quorum, int) and not isinstance(quorum, bool):
        if quorum < 1:
            report.error((*npath, "quorum"), f"must be a positive whole number, got {quorum}")
        elif isinstance(approvers, list) and all(isinstance(a, str) and not a.startswith("@")
                                                 for a in approvers) \
                and quorum > len({a.casefold() for a in approvers}):
            report.error((*npath, "quorum"), f"needs {quorum} distinct approvers but `approvers` names only "
                                             f"{len({a.casefold() for a in approvers})}")
    for key in ("approvers", "notify"):
        items = value.get(key)
        if isinstance(items, list) and len(items) > MAX_LIST:
            report.error((*npath, key), f"lists {len(items)} entries; at most {MAX_LIST}")
    if isinstance(approvers, list) and not approvers:
        report.error((*npath, "approvers"), "is empty; expected a non-empty list of reviewer names or "
                                            "@groups (omit `approvers` to let anyone answer)")
    if isinstance(approvers, list):
        seen: dict[str, str] = {}
        for i, a in enumerate(approvers):
            if isinstance(a, str) and not _APPROVER_RE.fullmatch(a):
                report.error((*npath, "approvers", i),
                             f"must match {APPROVER_PATTERN}, got {json.dumps(a)[:40]}")
            elif isinstance(a, str) and a.casefold() in seen and seen[a.casefold()] != a:
                report.error((*npath, "approvers", i), f"{a} and {seen[a.casefold()]} are one reviewer "
                                                       "(names equal up to case are one person)")
            elif isinstance(a, str):
                seen[a.casefold()] = a
    notify = value.get("notify")
    if isinstance(notify, list):
        for i, url in enumerate(notify):
            if isinstance(url, str) and not re.fullmatch(r"https?://[^\s/]+(?:/\S*)?", url):
                report.error((*npath, "notify", i),
                             f"must be an http:// or https:// URL, got {json.dumps(url)[:60]}")


def check_review_rules(graph: Mapping[str, Any], plan_mode: object, report: ProblemReport) -> None:
    """Positioned problems of every ``review`` mapping of a graph's plain data and its
    ``plan_mode``: the deadline grammar and bound, a quorum larger than the named approvers,
    approver names (none: an error), webhook URLs, list sizes; and a warning for an edge's or
    plan mode's rules that let anyone answer where the graph's do not (they replace them whole)."""
    _check_one(graph.get("review"), ("review",), report)
    strict_default = _restricts(graph.get("review"))
    stages = graph.get("stages")
    if isinstance(stages, list):
        for i, stage in enumerate(stages):
            targets = stage.get("targets") if isinstance(stage, Mapping) else None
            if isinstance(targets, list):
                for j, edge in enumerate(targets):
                    if (type(edge) is dict or (type(edge) is not str and isinstance(edge, Mapping))) \
                            and "review" in edge:
                        _check_one(edge.get("review"), ("stages", i, "targets", j, "review"), report)
                        _check_loosened(edge.get("review"), ("stages", i, "targets", j, "review"),
                                        strict_default, report)
    if isinstance(plan_mode, Mapping):
        _check_one(plan_mode.get("review"), ("plan_mode", "review"), report)
        if "review" in plan_mode:
            _check_loosened(plan_mode.get("review"), ("plan_mode", "review"), strict_default, report)


def _restricts(value: object) -> bool:
    """Whether plain ``review`` data limits who may answer (approvers, a quorum above 1 or
    not_requester); anything not a mapping counts as limiting (its own problem is reported)."""
    if not isinstance(value, Mapping):
        return value is not None
    quorum = value.get("quorum")
    return value.get("approvers") is not None or value.get("not_requester") is True \
        or (isinstance(quorum, int) and quorum > 1)


def _check_loosened(value: object, npath: NativePath, strict_default: bool, report: ProblemReport) -> None:
    if strict_default and isinstance(value, Mapping) and not _restricts(value):
        report.warn(npath, "replaces the graph's `review` rules whole and limits nobody: anyone may answer "
                           "these reviews (repeat the graph's approvers here to keep them)")
