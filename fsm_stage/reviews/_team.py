"""Reviewers for teams: who a reviewer is, and whether a review's rules let them answer.

``load_reviewers(path)`` reads a reviewers file (YAML: ``reviewers: {name: {token_sha256,
groups}}``); tokens are stored hashed (``token_sha256(token)``) and checked in constant time
(``Reviewers.authenticate``). ``refusal(rules, reviewer, requester, reviewers)`` says why a
review's logged rules (``config.review_rules.rules_json``) do not let ``reviewer`` approve, or
None; ``rules_problem`` says why logged rules cannot be read (then nobody may answer: fail
closed). ``deadline_at`` is when a review expires. Every refusal is one line (``ReviewRefusedError``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from fsm_stage.constants import MAX_DEADLINE_SECONDS, REVIEW_ANSWER, REVIEW_EXPIRED_BY, REVIEWER_NAME_PATTERN
from fsm_stage.errors import ReviewRefusedError, UserError
from fsm_stage.log.events import NewEvent, wall_clock_ms

#: A reviewer name (also what ``approvers`` lists); names equal up to case are one person.
REVIEWER_NAME_RE = re.compile(REVIEWER_NAME_PATTERN)
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

    def groups_of(self, name: str) -> frozenset[str]:
        """The groups of ``name`` (names equal up to case are one person; empty when unknown)."""
        person = name.casefold()
        return frozenset(g for r in self.by_name.values() if r.name.casefold() == person for g in r.groups)


def _at(node: object, key: object) -> str:
    """``:LINE:COLUMN`` of ``key`` in a round-trip loaded mapping, or ``""`` when there is no
    such position (not a loaded mapping, or no such key)."""
    try:
        line, column = node.lc.key(key)  # type: ignore[attr-defined]
    except (AttributeError, KeyError, TypeError):
        return ""
    return f":{line + 1}:{column + 1}"


def load_reviewers(path: str | Path) -> Reviewers:
    """Read a reviewers file::

        reviewers:
          alice: {token_sha256: <hex>, groups: [leads]}
          bob:   {token_sha256: <hex>}

    Raises ``UserError`` with one line, ``FILE:LINE:COLUMN: KEY: message`` where the problem has
    a position, for a file that cannot be read or has the wrong shape."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    p = Path(path)
    try:
        if p.stat().st_size > MAX_REVIEWERS_FILE:
            raise UserError(f"{p}: reviewers file larger than {MAX_REVIEWERS_FILE} bytes")
        data = YAML(typ="rt", pure=True).load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as err:
        mark = err.problem_mark if isinstance(err, MarkedYAMLError) else None
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        problem = (err.problem if isinstance(err, MarkedYAMLError) else None) or str(err).splitlines()[0]
        raise UserError(f"{where}: cannot read reviewers file: {problem}") from None
    entries = data.get("reviewers") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or set(data) - {"reviewers"}:
        extra = sorted(set(data) - {"reviewers"}, key=str) if isinstance(data, dict) else []
        where = _at(data, extra[0] if extra else "reviewers")
        raise UserError(f"{p}{where}: expected a mapping with one key "
                        "`reviewers: {name: {token_sha256, groups}}`")
    out: dict[str, Reviewer] = {}
    for name, entry in entries.items():
        where = f"{p}{_at(entries, name)}: reviewers.{name}"
        if not isinstance(name, str) or not REVIEWER_NAME_RE.fullmatch(name):
            raise UserError(f"{where}: a reviewer name matches {REVIEWER_NAME_RE.pattern}")
        twin = next((n for n in out if n.casefold() == name.casefold()), None)
        if twin is not None:
            raise UserError(f"{where}: {name} and {twin} are one reviewer (names equal up to case are "
                            "one person); keep one entry")
        if not isinstance(entry, dict) or set(entry) - {"token_sha256", "groups"}:
            raise UserError(f"{where}: expected {{token_sha256: <64 hex>, groups: [names]}}")
        digest, groups = entry.get("token_sha256"), entry.get("groups", [])
        if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise UserError(f"{p}{_at(entry, 'token_sha256')}: reviewers.{name}.token_sha256: expected 64 "
                            "lowercase hex digits (the token's sha256: printf %s TOKEN | sha256sum)")
        if not isinstance(groups, list) or not all(isinstance(g, str) and REVIEWER_NAME_RE.fullmatch(g)
                                                   for g in groups):
            raise UserError(f"{p}{_at(entry, 'groups')}: reviewers.{name}.groups: "
                            "expected a list of group names")
        out[str(name)] = Reviewer(str(name), None if digest is None else str(digest),
                                  tuple(str(g) for g in groups))
    return Reviewers(out)


#: The keys a review request's logged rules may hold (``config.review_rules.rules_json``).
RULE_KEYS = frozenset({"approvers", "quorum", "notRequester", "deadlineSeconds", "onDeadline", "notify"})
#: The ``by`` of the answer that closes a review at its deadline (``expiry_spec``).
EXPIRED_BY = REVIEW_EXPIRED_BY
#: What the review fold records for logged ``rules`` that are not a mapping (``rules_problem``
#: reports it: an unknown key).
UNREADABLE_RULES_KEY = "invalid"


def rules_problem(rules: Mapping[str, Any] | None) -> str | None:
    """Why a review's logged ``rules`` cannot be read, as one line, or None (readable, or no
    rules: anyone). Unreadable: not a mapping (the fold's ``{"invalid": true}``), a key outside
    ``RULE_KEYS`` (a newer writer's rule this reader cannot enforce), ``approvers`` or ``notify``
    not a list of non-empty strings, ``quorum`` not a positive int, ``notRequester`` not a bool,
    ``onDeadline`` not ``keep``/``dismiss``, any rule null, ``approvers`` empty (the config writes
    none of these). An unreadable deadline expires at once (``deadline_at``). Every answer path
    refuses a review whose rules cannot be read."""
    if rules is None:
        return None
    if not isinstance(rules, Mapping) or UNREADABLE_RULES_KEY in rules:
        return "its logged rules are not a mapping"
    unknown = sorted((k for k in rules if k not in RULE_KEYS), key=str)
    if unknown:
        return f"its logged rules hold a rule this reader does not know ({str(unknown[0])[:40]!r})"
    nulls = [k for k in RULE_KEYS if k in rules and rules[k] is None]
    if nulls:
        return f"its logged {sorted(nulls)[0]} is null"
    if rules.get("approvers") == []:
        return "its logged approvers name nobody"
    for key in ("approvers", "notify"):
        names = rules.get(key)
        if names is not None and not (isinstance(names, list)
                                      and all(isinstance(n, str) and n for n in names)):
            return f"its logged {key} is not a list of non-empty strings"
    quorum = rules.get("quorum", 1)
    if not isinstance(quorum, int) or isinstance(quorum, bool) or quorum < 1:
        return "its logged quorum is not a positive whole number"
    if not isinstance(rules.get("notRequester", False), bool):
        return "its logged notRequester is not true or false"
    if rules.get("onDeadline", "dismiss") not in ("keep", "dismiss"):
        return "its logged onDeadline is not keep or dismiss"
    return None


def quorum_of(rules: Mapping[str, Any] | None) -> int:
    """The distinct approvals a review's logged ``rules`` need: their ``quorum``, else 1 (no
    rules, no quorum, or one that is not a whole number above 1: ``rules_problem`` says why)."""
    quorum = rules.get("quorum") if isinstance(rules, Mapping) else None
    return quorum if isinstance(quorum, int) and not isinstance(quorum, bool) and quorum > 1 else 1


def may_answer(rules: Mapping[str, Any] | None, name: str, reviewers: Reviewers | None) -> bool:
    """Whether ``rules.approvers`` (names and ``@group``s) includes ``name`` (no approvers:
    anyone). A group needs ``reviewers`` to resolve; without it only names match. ``name`` must
    be a reviewer name (``REVIEWER_NAME_RE``): a group's ``@name`` is never a person. Names
    equal up to case are one person."""
    approvers = (rules or {}).get("approvers")
    if not approvers:
        return True
    if not isinstance(name, str) or not REVIEWER_NAME_RE.fullmatch(name):
        return False  # "@leads" is a group, never a person
    return listed(approvers, name, reviewers.groups_of(name) if reviewers is not None else ())


def listed(approvers: Iterable[object], name: str, groups: Collection[str]) -> bool:
    """Whether ``approvers`` (names and ``@group``s) name ``name``, or a group of ``groups``
    (the groups ``name`` belongs to). Names equal up to case are one person."""
    person = name.casefold()
    return any(isinstance(a, str) and (a.casefold() == person or (a.startswith("@") and a[1:] in groups))
               for a in approvers)


def names_groups(rules: object) -> bool:
    """Whether logged review ``rules`` list an ``@group`` among their approvers (which only the
    reviewers file resolves)."""
    approvers = rules.get("approvers") if isinstance(rules, Mapping) else None
    return isinstance(approvers, list) and any(isinstance(a, str) and a.startswith("@") for a in approvers)


def refusal(rules: Mapping[str, Any] | None, reviewer: str, *, requester: str | None,
            reviewers: Reviewers | None, outcome: str) -> str | None:
    """Why ``rules`` do not let ``reviewer`` give ``outcome``, as one line, or None."""
    if not may_answer(rules, reviewer, reviewers):
        approvers = (rules or {})["approvers"]
        unresolved = reviewers is None and names_groups(rules)
        hint = ("; @groups resolve only with the reviewers file (--reviewers FILE, reviewers=, a "
                "scenario's reviewers:)") if unresolved else ""
        return f"{reviewer} is not among the approvers of this review ({', '.join(approvers)}){hint}"
    if outcome == "approve" and (rules or {}).get("notRequester"):
        if requester is None:  # who started it is unknown: nobody can be told apart from them
            return ("not_requester: the session does not record who started it as a reviewer name "
                    "(its header's extra.requester), so no approval can be told apart from theirs")
        if reviewer.casefold() == requester.casefold():  # one person, however an IdP spells them
            return f"{reviewer} started this session and may not approve its reviews (not_requester)"
    return None


def deadline_seconds(rules: Mapping[str, Any] | None) -> float | None:
    """The logged ``deadlineSeconds`` of ``rules`` when readable: a positive finite number up
    to ``MAX_DEADLINE_SECONDS`` (not a bool); None otherwise (absent or unreadable)."""
    seconds = (rules or {}).get("deadlineSeconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) \
            and 0 < seconds <= MAX_DEADLINE_SECONDS:
        return float(seconds)
    return None


def deadline_at(rules: Mapping[str, Any] | None, asked_ms: int) -> int | None:
    """Epoch ms when a review asked at ``asked_ms`` expires under ``rules`` (None: never, when
    the rules log no ``deadlineSeconds`` key). A logged deadline that is not a positive finite
    number up to ``MAX_DEADLINE_SECONDS`` (zero, negative, NaN, null, a string, a huge int, one
    above what the config allows) expires at once: a deadline nobody can read never means "no
    deadline"."""
    if rules is None or not isinstance(rules, Mapping) or "deadlineSeconds" not in rules:
        return None
    seconds = deadline_seconds(rules)
    return asked_ms if seconds is None else asked_ms + int(seconds * 1000)


#: ``fsm/review/vote {id, reviewer, option}``: one approval toward a review's quorum.
REVIEW_VOTE = "fsm/review/vote"
#: Header ``extra`` key naming the person who started the session (``not_requester``).
REQUESTER_KEY = "requester"


@attrs.frozen
class VoteResult:
    """What an answer did: the logged ``answer`` (None while a quorum is not reached), the
    distinct approvers who ``votes`` so far and how many are ``needed``."""

    answer: Any
    votes: tuple[str, ...] = ()
    needed: int = 1


@attrs.frozen
class TeamDecision:
    """``decide``'s verdict: ``refusal`` (one line, or None), ``expiry`` (the answer that closes
    an expired review, logged before refusing), ``before`` (votes to log), ``complete`` (log the
    answer now), the ``names`` it is by, the ``votes`` so far and the quorum ``needed``;
    ``voted_before``: the refusal is a second vote by the same reviewer."""

    refusal: str | None = None
    expiry: Any = None
    before: tuple[Any, ...] = ()
    complete: bool = True
    names: tuple[str, ...] = ()
    votes: tuple[str, ...] = ()
    needed: int = 1
    voted_before: bool = False


def requester_of(session: Any) -> str | None:
    """The person who started ``session`` (its header's ``extra["requester"]``), or None when it
    records none or a value that is no reviewer name (``REVIEWER_NAME_RE``: ``""``, ``"bob "``,
    a number), which ``not_requester`` cannot tell apart from anyone."""
    value = session.header.extra.get(REQUESTER_KEY)
    return value if isinstance(value, str) and REVIEWER_NAME_RE.fullmatch(value) else None


def vote_options(session: Any, record: Any) -> dict[str, str | None]:
    """Each distinct voter on ``record`` (vote order) and the approve option their first vote
    logged (None: a vote that logged none, as written before votes carried options)."""
    out: dict[str, str | None] = {}
    events = session.events
    for i in range(record.seq + 1, len(events)):
        ev = events[i]
        if ev.type == REVIEW_VOTE and isinstance(ev.data, dict) and ev.data.get("id") == record.id:
            name, option = ev.data.get("reviewer"), ev.data.get("option")
            if isinstance(name, str) and name not in out:
                out[name] = option if isinstance(option, str) else None
    return out


def decide(session: Any, record: Any, outcome: str, *, reviewer: str | None, reviewers: Reviewers | None,
           vote: bool, now_ms: int | None = None, option: str | None = None) -> TeamDecision:
    """Whether ``reviewer`` may give ``outcome`` to ``record`` under its logged rules, now.

    Expired (past ``deadlineSeconds``): the ``onDeadline`` answer (``by: "deadline"``) is the
    ``expiry`` and the answer is refused. Rules naming approvers, ``notRequester`` or a quorum
    need a named ``reviewer``. A quorum above 1 needs ``vote`` (``vote_review``): an approval
    adds a vote (logging ``option``, the approve option it chose) and completes once enough
    distinct reviewers voted, all for one option (a vote for another option than the counted
    votes' is refused: no voter's choice is dropped); keep and dismiss complete at once."""
    rules: Mapping[str, Any] = record.rules or {}
    names = (reviewer,) if reviewer is not None else ()
    deadline = deadline_at(rules, record.time)
    now = wall_clock_ms() if now_ms is None else now_ms
    if deadline is not None and now >= deadline:
        expiry = expiry_spec(record, rules, len(vote_options(session, record)))
        seconds = deadline_seconds(rules)
        shown = f"{seconds:g} s" if seconds is not None else "unreadable, so expired at once"
        return TeamDecision(f"review {record.id} expired (deadline {shown}); "
                            f"it was closed as {expiry.data['outcome']}", expiry)
    problem = rules_problem(record.rules)
    if problem is not None:
        return TeamDecision(f"review {record.id}: {problem}; nobody may answer it (fail closed)")
    quorum = quorum_of(rules)
    if reviewer is None:
        if rules.get("approvers") or rules.get("notRequester") or quorum > 1:
            return TeamDecision("its rules need a named reviewer (answer as NAME: --as NAME on the "
                                "command line, reviewer= from Python)")
        return TeamDecision()
    if not isinstance(reviewer, str) or not REVIEWER_NAME_RE.fullmatch(reviewer):
        return TeamDecision(f"{str(reviewer)[:70]!r} is not a reviewer name ({REVIEWER_NAME_RE.pattern})")
    requester = requester_of(session)
    why = refusal(rules, reviewer, requester=requester, reviewers=reviewers, outcome=outcome)
    if why is not None:
        return TeamDecision(why)
    if quorum == 1 or outcome != "approve":  # an approval under no quorum is the one vote it needs
        return TeamDecision(names=names, votes=names if outcome == "approve" else (), needed=quorum)
    if not vote:
        return TeamDecision(f"needs {quorum} approvals: answer with vote_review")
    chosen = vote_options(session, record)
    logged = tuple(chosen)
    counted = _counted(logged, rules, requester, reviewers)
    other = next((o for o in chosen.values() if o is not None and o != option), None)
    if option is not None and other is not None:  # every logged vote, counted now or not
        return TeamDecision(f"the votes so far approve with {other!r}: a quorum approves one option "
                            f"(vote {other!r}, or keep with feedback)")
    person = reviewer.casefold()
    if any(v.casefold() == person for v in logged):
        if len(counted) >= quorum and any(v.casefold() == person for v in counted):
            # enough votes count now (a reviewers file resolved a group member's earlier vote,
            # say): the approval completes without a new vote, so no team is left stuck
            return TeamDecision(complete=True, names=counted, votes=counted, needed=quorum)
        return TeamDecision(f"{reviewer} already voted to approve ({len(counted)} of {quorum})",
                            votes=counted, needed=quorum, voted_before=True)
    votes = (*counted, reviewer)
    data = {"id": record.id, "reviewer": reviewer, **({"option": option} if option is not None else {})}
    spec = NewEvent(REVIEW_VOTE, data, ignorable=True)
    return TeamDecision(before=(spec,), complete=len(votes) >= quorum, names=votes, votes=votes,
                        needed=quorum)


def _counted(logged: tuple[str, ...], rules: Mapping[str, Any], requester: str | None,
             reviewers: Reviewers | None) -> tuple[str, ...]:
    """The logged votes that count toward a quorum now: each voter a reviewer name the rules
    let approve (an approver, not the requester), one per person (names equal up to case are
    one person). A vote the rules would refuse (written by hand, or a group member counted
    without the reviewers file) does not count: fail closed."""
    seen: set[str] = set()
    out = []
    for name in logged:
        key = name.casefold()
        if key in seen or not REVIEWER_NAME_RE.fullmatch(name):
            continue
        if refusal(rules, name, requester=requester, reviewers=reviewers, outcome="approve") is None:
            seen.add(key)
            out.append(name)
    return tuple(out)


def expiry_spec(record: Any, rules: Mapping[str, Any], votes: int = 0) -> Any:
    """The answer that closes ``record`` at its deadline: ``onDeadline`` (keep or dismiss), by
    ``deadline``, its ``feedback`` saying no reviewer answered in time, or, under a quorum with
    ``votes`` approvals logged, that the quorum was not reached (so the model never reads it as
    a person's decision); an expired review never approves."""
    outcome = "keep" if rules.get("onDeadline") == "keep" else "dismiss"
    option = record.options[-1] if outcome == "keep" and record.options else None
    seconds = deadline_seconds(rules)
    within = f" ({seconds:g} s)" if seconds is not None else ""
    quorum = quorum_of(rules)
    feedback = (f"The review's quorum was not reached before its deadline{within}: {votes} of {quorum} "
                "approvals; nobody decided on it." if votes and quorum > 1 else
                f"No reviewer answered before the review's deadline{within}; nobody decided on it.")
    return NewEvent(REVIEW_ANSWER, {"id": record.id, "outcome": outcome, "option": option, "shape": None,
                                    "feedback": feedback, "by": EXPIRED_BY}, ignorable=True)


def with_reviewers(spec: Any, names: tuple[str, ...]) -> Any:
    """The answer event ``spec`` carrying the authenticated ``reviewers`` (unchanged when none)."""
    if not names:
        return spec
    return attrs.evolve(spec, data={**spec.data, "reviewers": list(names)})


def overdue(records: Iterable[Any], now_ms: int) -> list[Any]:
    """The review ``records`` (open ``ReviewRecord``s) whose deadline passed at ``now_ms``
    (epoch ms), in order; a logged deadline that cannot be read counts as passed."""
    out = []
    for record in records:
        deadline = deadline_at(record.rules, record.time)
        if deadline is not None and now_ms >= deadline:
            out.append(record)
    return out


def expire_overdue(session: Any, *, now_ms: int | None = None) -> list[str]:
    """Close every open review of ``session`` whose deadline passed (one conditional append
    each: of racing readers one writes it); returns the ids closed. A fork's inherited reviews
    are not its own (``as_fork``): they are never closed in it."""
    from fsm_stage.errors import AppendConflictError
    from fsm_stage.reviews._fold import session_reviews

    now = wall_clock_ms() if now_ms is None else now_ms
    closed: list[str] = []
    for record in overdue(session_reviews(session).open, now):
        try:
            expire(session, record)
            closed.append(record.id)
        except AppendConflictError:
            continue  # another reader closed it (or wrote meanwhile): the next read decides
    return closed


def expire(session: Any, record: Any) -> None:
    """Close the open review ``record`` of ``session`` as its deadline does (``expiry_spec``),
    by one append conditional on the session's end; whether the deadline passed is the caller's
    to decide. Raises ``AppendConflictError`` when the session moved meanwhile (nothing
    written) and what the log's append raises."""
    votes = len(vote_options(session, record))
    session.append_many([expiry_spec(record, record.rules or {}, votes)], expect_last_seq=session.last_seq)
