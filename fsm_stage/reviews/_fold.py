"""The review fold: durable review requests, answers and redemptions (docs/reviews.md).

``ReviewFold`` folds ``fsm/review/request`` / ``answer`` / ``redeemed`` and ``fsm/graph`` into
a ``ReviewState``: every request (``records``), its answer (``answered``), whether an approval
was used (``redeemed``) and the last recorded graph fingerprint (``graph``). ``open`` = asked,
not answered; ``approved`` = answered approve, not redeemed; ``pending(kind)`` = the approved,
unredeemed review of that kind (at most one). ``REVIEW_FOLD`` is the shared instance
(``Session.read(REVIEW_FOLD)`` is O(new events)). ``plan_payload_sha256`` /
``stage_payload_sha256`` / ``tool_payload_sha256`` hash what a reviewer is shown. A
``Projection`` (``key="reviews"``). ``as_fork(state, seed_length)`` is the state a fork sees: a
review asked before the fork point and not redeemed there counts as redeemed ``forked``;
``session_reviews(session)`` and ``fold_reviews(events, seed_length)`` are the fold as a
session sees it, fork included (every reader goes through one of the three).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar

import attrs

from fsm_stage.constants import (
    APPROVE_FRESH_LABEL,
    APPROVE_KEEP_CONVERSATION_LABEL,
    GRAPH_EVENT,
    REVIEW_ANSWER,
    REVIEW_OUTCOMES,
    REVIEW_REDEEMED,
    REVIEW_REQUEST,
    TOOL_RESULT,
)
from fsm_stage.locks import process_lock
from fsm_stage.log.events import Event, answered_call_id
from fsm_stage.log.projections import fold
from fsm_stage.reviews._team import EXPIRED_BY, UNREADABLE_RULES_KEY

__all__ = ["REVIEW_FOLD", "GraphRecord", "Redemption", "ReviewAnswer", "ReviewFold", "ReviewRecord",
           "ReviewState", "as_fork", "fold_reviews", "plan_payload_sha256", "session_reviews",
           "stage_payload_sha256", "tool_payload_sha256"]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_JOURNAL: Final = process_lock()  # guards extending any Indexed journal (see ``Indexed.added``)
V = TypeVar("V")


class _Journal(Generic[V]):
    """The storage ``Indexed`` views share: entries in the order they were added, the position
    of each key and, for review records, the positions of each tool call id."""

    __slots__ = ("calls", "entries", "index")

    def __init__(self) -> None:
        self.entries: list[tuple[str, V]] = []
        self.index: dict[str, int] = {}
        self.calls: dict[str, list[int]] = {}


class Indexed(Mapping[str, V]):
    """A read-only mapping that grows by appending: ``added(key, value)`` is O(1) and returns a
    new view, while this one keeps seeing only its first ``len(self)`` entries (views share one
    journal; adding from a view that is not the newest copies its prefix first, so no view ever
    changes). Keys are unique (callers add a key once). Lookups are O(1)."""

    __slots__ = ("_journal", "_n")

    def __init__(self, journal: _Journal[V] | None = None, n: int = 0) -> None:
        self._journal: _Journal[V] = journal if journal is not None else _Journal()
        self._n = n

    @classmethod
    def of(cls, items: Mapping[str, V], call_of: Any = None) -> Indexed[V]:
        """A view holding ``items`` in order (``call_of(value)``: the tool call id to index)."""
        out: Indexed[V] = cls()
        for key, value in items.items():
            out = out.added(key, value, call_of(value) if call_of is not None else None)
        return out

    def __getitem__(self, key: str) -> V:
        i = self._journal.index.get(key)
        if i is None or i >= self._n:
            raise KeyError(key)
        return self._journal.entries[i][1]

    def __contains__(self, key: object) -> bool:
        i = self._journal.index.get(key) if isinstance(key, str) else None
        return i is not None and i < self._n

    def __iter__(self) -> Iterator[str]:
        entries = self._journal.entries
        return (entries[i][0] for i in range(self._n))

    def __len__(self) -> int:
        return self._n

    def added(self, key: str, value: V, call_id: str | None = None) -> Indexed[V]:
        """This view plus ``key → value`` (``call_id``: index it under that tool call id too).
        Threads may extend views of one journal at once (two readers folding the same new events):
        the check whether this view is the newest and the write are one step under a process-wide
        lock, so the later of two extensions of one view copies the prefix instead of adding to
        the journal the other just extended."""
        with _JOURNAL.lock:
            journal = self._journal
            if len(journal.entries) != self._n:  # a branch from an older view: copy its prefix
                journal = _Journal()
                old = self._journal
                for i in range(self._n):
                    k, v = old.entries[i]
                    journal.index[k] = i
                    journal.entries.append((k, v))
                for cid, positions in old.calls.items():
                    kept = [p for p in positions if p < self._n]
                    if kept:
                        journal.calls[cid] = kept
            journal.index[key] = len(journal.entries)
            journal.entries.append((key, value))
            if call_id is not None:
                journal.calls.setdefault(call_id, []).append(self._n)
        return Indexed(journal, self._n + 1)

    def by_call(self, call_id: str) -> Iterator[V]:
        """The values indexed under tool call ``call_id``, newest first."""
        entries, n = self._journal.entries, self._n
        for i in reversed(self._journal.calls.get(call_id, ())):
            if i < n:
                yield entries[i][1]


def plan_payload_sha256(plan: str) -> str:
    """Hex sha256 of the plan text shown to the reviewer (UTF-8)."""
    return hashlib.sha256(plan.encode("utf-8")).hexdigest()


def stage_payload_sha256(target: str, handoff: str | None) -> str:
    """Hex sha256 of ``target + "\\n" + handoff`` (``""`` when there is no document)."""
    return hashlib.sha256((target + "\n" + (handoff or "")).encode("utf-8")).hexdigest()


def edited_sha256(record: ReviewRecord, edited: str) -> str:
    """The payload hash of the edited version of ``record``'s document (the same rule as
    ``payloadSha256``: ``sha256(target + "\\n" + handoff)`` for a stage, ``sha256(plan)``)."""
    if record.kind == "plan":
        return plan_payload_sha256(edited)
    return stage_payload_sha256(record.target, edited)


def approved_shape(record: ReviewRecord, option: str | None) -> str | None:
    """The switch an approval of ``record`` with ``option`` makes: ``full`` / ``light`` for a
    stage review (the request's own shape for its plain approve option), None for another kind."""
    if record.kind != "stage":
        return None
    if option == APPROVE_FRESH_LABEL:
        return "full"
    if option == APPROVE_KEEP_CONVERSATION_LABEL:
        return "light"
    return record.shape


def contradiction(record: ReviewRecord, data: Mapping[str, Any]) -> str | None:
    """Why the logged approval ``data`` contradicts its own request ``record`` (what no answer
    writer logs: an option that is no approve option, a shape that option does not make, edits
    whose digest does not match or that the review cannot take), else None. The fold counts
    such an approval as no approval (fail closed)."""
    approve = record.options[:-1] if len(record.options) > 1 else record.options
    option = data.get("option")
    if approve and option not in approve:
        return f"{str(option)[:60]!r} is not an approve option of the request"
    shape = data.get("shape")
    if shape is not None and shape != approved_shape(record, _str(option)):
        return f"the shape {str(shape)[:20]!r} is not the one its option makes"
    edited, digest = data.get("edited"), data.get("editedSha256")
    if edited is None and digest is None:
        return None
    if (not isinstance(edited, str) or record.kind not in ("stage", "plan")
            or (record.kind == "stage" and (approved_shape(record, _str(option)) != "full"
                                            or record.handoff_path is None))):
        return "its edits are not an edited document this review can take"
    return None if digest == edited_sha256(record, edited) else "its editedSha256 does not match its edits"


def tool_payload_sha256(name: str, arguments: str) -> str:
    """Hex sha256 of ``name + "\\n" + arguments``: a tool review is bound to the tool's name and
    its exact argument text (whatever keys the arguments hold)."""
    return hashlib.sha256(f"{name}\n{arguments}".encode()).hexdigest()


def budget_payload_sha256(scope: str, label: str, since: int | None) -> str:
    """Hex sha256 of a budget review's subject: the ``scope`` (``stage`` / ``plan``), its
    ``label`` and the start (epoch ms) of the visit whose budget ran out, so an answer applies to
    that visit only."""
    return hashlib.sha256(f"budget\n{scope}\n{label}\n{since}".encode()).hexdigest()


#: Largest document stored in a review request (UTF-8 bytes); a larger one is omitted
#: (``documentOmitted: true``) and the review can then only be approved where the document is.
MAX_REVIEW_DOCUMENT_BYTES = 1 << 20


@attrs.frozen
class ReviewRecord:
    """One ``fsm/review/request``: ids, kind (``"plan"``/``"stage"``), ``from_``/``target``
    stage (plan: ``"plan"`` → ``"default"``), option labels, default ``shape``
    (``"full"``/``"light"``/None), ``handoff_path``, ``payload_sha256`` (hex), the ``turn`` and
    ``step`` it was asked in, the ``seq`` and ``time`` (epoch ms) of the request event, the
    review ``rules`` it was asked under (``config.review_rules.rules_json``; None: anyone, one
    approval, no deadline; ``{"invalid": true}`` when the logged rules are not a mapping) and
    the ``document`` the reviewer is shown (handoff document, plan, tool arguments; None when
    not stored, ``document_omitted`` when it was too large)."""

    id: str
    call_id: str
    kind: str
    from_: str
    target: str
    options: tuple[str, ...]
    shape: str | None
    handoff_path: str | None
    payload_sha256: str
    turn: int | None
    step: int | None
    seq: int
    time: int = 0
    rules: Mapping[str, Any] | None = attrs.field(default=None, eq=False)
    document: str | None = attrs.field(default=None, eq=False, repr=False)
    document_omitted: bool = False

    def to_json(self) -> dict[str, Any]:
        """The request's ``data`` as logged (camelCase keys)."""
        return {"id": self.id, "callId": self.call_id, "kind": self.kind, "from": self.from_,
                "target": self.target, "options": list(self.options), "shape": self.shape,
                "handoffPath": self.handoff_path, "payloadSha256": self.payload_sha256,
                "turn": self.turn, "step": self.step}


@attrs.frozen
class ReviewAnswer:
    """One ``fsm/review/answer``: ``outcome`` (approve/keep/dismiss), the chosen ``option``
    label, the approved ``shape``, the reviewer's ``feedback``, who answered (``by``), ``seq``,
    the authenticated ``reviewers`` whose answer (or quorum of approvals) it is, and, for an
    approval with edits, the ``edited`` document and its ``edited_sha256`` (the payload hash of
    the edited version: ``stage_payload_sha256(target, edited)`` / ``plan_payload_sha256``)."""

    id: str
    outcome: str
    option: str | None
    shape: str | None
    feedback: str | None
    by: str
    seq: int
    reviewers: tuple[str, ...] = ()
    edited: str | None = attrs.field(default=None, repr=False)
    edited_sha256: str | None = None

    @property
    def expired(self) -> bool:
        """Whether the review's deadline closed it (nobody decided: ``by: "deadline"``)."""
        return self.by == EXPIRED_BY


@attrs.frozen
class Redemption:
    """One ``fsm/review/redeemed``: ``applied`` and, when not, the ``reason``."""

    applied: bool
    reason: str | None
    seq: int


@attrs.frozen
class GraphRecord:
    """The last ``fsm/graph``: graph ``name`` and ``fingerprint`` (``"sha256:<hex>"``)."""

    name: str
    fingerprint: str
    seq: int


@attrs.frozen
class ReviewState:
    """Folded reviews (see module docstring). Mappings are read-only views keyed by review id
    (``Indexed``: each review event appends in O(1), so folding n reviews is O(n))."""

    records: Mapping[str, ReviewRecord] = attrs.field(factory=Indexed)
    answered: Mapping[str, ReviewAnswer] = attrs.field(factory=Indexed)
    redeemed: Mapping[str, Redemption] = attrs.field(factory=Indexed)
    graph: GraphRecord | None = None
    #: Ids of the records still open or approved-unredeemed, in request order (derived: the
    #: only ones ``open`` and ``approved`` look at, so they cost O(live), not O(every review)).
    live: tuple[str, ...] = attrs.field(default=(), eq=False)

    @property
    def open(self) -> tuple[ReviewRecord, ...]:
        """Requested, not answered (and not closed by a redemption, e.g. a fork), in request order."""
        records = self.records
        return tuple(records[i] for i in self.live if self._is_open(i))

    @property
    def approved(self) -> tuple[ReviewRecord, ...]:
        """Answered approve and not redeemed, in request order."""
        records = self.records
        return tuple(records[i] for i in self.live if self._is_pending(i))

    def _is_open(self, review_id: str) -> bool:
        return review_id not in self.answered and review_id not in self.redeemed

    def _is_pending(self, review_id: str) -> bool:
        if review_id in self.redeemed:
            return False
        answer = self.answered.get(review_id)
        return answer is not None and answer.outcome == "approve"

    def open_of(self, kind: str) -> ReviewRecord | None:
        """The open review of ``kind`` (the last one if a racing writer logged two)."""
        return self._last_of(kind, self._is_open)

    def pending(self, kind: str) -> ReviewRecord | None:
        """The approved, unredeemed review of ``kind`` (the last approved one), or None."""
        return self._last_of(kind, self._is_pending)

    def _last_of(self, kind: str, keep: Callable[[str], bool]) -> ReviewRecord | None:
        """The last live record of ``kind`` that ``keep`` keeps (walking the live ids backwards)."""
        records = self.records
        for i in reversed(self.live):
            if records[i].kind == kind and keep(i):
                return records[i]
        return None

    def by_call(self, call_id: str, kind: str | None = None,
                payload_sha256: str | None = None) -> ReviewRecord | None:
        """The last review requested for tool call ``call_id`` (optionally of ``kind`` and bound to
        ``payload_sha256``); O(reviews of that call) through the records' call index."""
        records = self.records
        candidates = (records.by_call(call_id) if isinstance(records, Indexed)
                      else reversed([r for r in records.values() if r.call_id == call_id]))
        return next((r for r in candidates if (kind is None or r.kind == kind)
                     and (payload_sha256 is None or r.payload_sha256 == payload_sha256)), None)


class _Overlay(Mapping[str, V]):
    """``base`` with a few ``extra`` keys on top (read-only; the base is never written)."""

    __slots__ = ("_base", "_extra")

    def __init__(self, base: Mapping[str, V], extra: Mapping[str, V]) -> None:
        self._base, self._extra = base, extra

    def __getitem__(self, key: str) -> V:
        return self._extra[key] if key in self._extra else self._base[key]

    def __contains__(self, key: object) -> bool:
        return key in self._extra or key in self._base

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (k for k in self._extra if k not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for k in self._extra if k not in self._base)


def _add(mapping: Mapping[str, V], key: str, value: V, call_id: str | None = None) -> Indexed[V]:
    """``mapping`` plus ``key → value`` as an ``Indexed`` view (O(1) when it already is one)."""
    base = mapping if isinstance(mapping, Indexed) else Indexed.of(mapping)
    return base.added(key, value, call_id)


def _rules(value: object) -> Mapping[str, Any] | None:
    """Logged review rules as the record keeps them: a mapping as is, None when absent, and
    ``{"invalid": true}`` for anything else (``_team.rules_problem``: nobody may answer)."""
    if value is None or isinstance(value, Mapping):
        return value
    return {UNREADABLE_RULES_KEY: True}


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


#: ``tool/result.data.error.code``s of a call that was closed without running on its review
#: (cancelled, closed before dispatch, repaired after a crash): the review is void.
CLOSED_CALL_CODES: Final = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH", "TOOL_NOT_STARTED",
                                      "TOOL_OUTCOME_UNKNOWN"})
#: ``Redemption.reason`` of a review whose tool call was closed before the review was used.
CALL_CLOSED: Final = "call-closed"
TOOL_KIND: Final = "tool"
"""The kind of a tool call's review (an ``ask`` rule's)."""


class ReviewFold:
    """The fold of the review and graph events (a ``Projection``; module docstring).

    A live review (open, or approved and not redeemed) whose tool call gets its ``tool/result``
    is closed as ``redeemed {applied: false, reason: "call-closed"}`` when that result closed
    the call without running it (an error code of ``CLOSED_CALL_CODES``: cancel, close_turn,
    crash repair): an approval is never used by a call that is gone, and a question about it
    never blocks later reviews of its kind. A tool review (kind ``tool``) is closed so by any
    result of its call: its approval is redeemed before the tool runs, so a result that finds it
    live settled the call without it (a policy changed since allowed or refused the call), and
    the approval must not serve a later call reusing the id."""

    key: str = "reviews"
    STATE_VERSION: int = 4
    #: Event types that can change the state: a streaming reader may skip others.
    READS: Final = frozenset({REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED, GRAPH_EVENT, TOOL_RESULT})

    def init(self) -> ReviewState:
        """The empty state."""
        return ReviewState()

    def apply(self, state: ReviewState, event: Event) -> ReviewState:
        """Fold one event; malformed review events (no string ``id``) are skipped."""
        t = event.type
        if t == TOOL_RESULT:
            return _close_calls(state, event) if state.live else state
        if t not in (REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED, GRAPH_EVENT):
            return state
        d = event.data if isinstance(event.data, Mapping) else _EMPTY
        if t == GRAPH_EVENT:
            name, fp = _str(d.get("name")), _str(d.get("fingerprint"))
            return state if fp is None else ReviewState(state.records, state.answered, state.redeemed,
                                                        GraphRecord(name or "", fp, event.seq), state.live)
        rid = _str(d.get("id"))
        if rid is None:
            return state
        if t == REVIEW_REQUEST:
            if rid in state.records:
                return state
            opts = d.get("options")
            rec = ReviewRecord(
                id=rid, call_id=_str(d.get("callId")) or "", kind=_str(d.get("kind")) or "",
                from_=_str(d.get("from")) or "", target=_str(d.get("target")) or "",
                options=tuple(o for o in opts if isinstance(o, str)) if isinstance(opts, list) else (),
                shape=_str(d.get("shape")), handoff_path=_str(d.get("handoffPath")),
                payload_sha256=_str(d.get("payloadSha256")) or "", turn=_int(d.get("turn")),
                step=_int(d.get("step")), seq=event.seq, time=event.time,
                rules=_rules(d.get("rules")),
                document=_str(d.get("document")), document_omitted=d.get("documentOmitted") is True)
            return ReviewState(_add(state.records, rid, rec, rec.call_id), state.answered, state.redeemed,
                               state.graph, (*state.live, rid))
        if rid not in state.records:
            return state
        if t == REVIEW_ANSWER:
            if rid in state.answered:
                return state  # the first answer wins; a later one (a lost race) is ignored
            names = d.get("reviewers")
            reviewers = tuple(n for n in names if isinstance(n, str)) if isinstance(names, list) else ()
            outcome, by = _str(d.get("outcome")) or "dismiss", _str(d.get("by")) or ""
            if outcome not in REVIEW_OUTCOMES:
                why: str | None = f"{outcome[:40]!r} is no review outcome"
            else:
                why = contradiction(state.records[rid], d) if outcome == "approve" else None
            if why is not None:  # no writer logs it: not an approval (shown through ``by``)
                ans = ReviewAnswer(rid, "dismiss", None, None, None, f"{by} (not an approval: {why})",
                                   event.seq, reviewers)
            else:
                ans = ReviewAnswer(rid, outcome, _str(d.get("option")), _str(d.get("shape")),
                                   _str(d.get("feedback")), by, event.seq, reviewers, _str(d.get("edited")),
                                   _str(d.get("editedSha256")))
            live = state.live if ans.outcome == "approve" else tuple(i for i in state.live if i != rid)
            return ReviewState(state.records, _add(state.answered, rid, ans), state.redeemed, state.graph,
                               live)
        if rid in state.redeemed:
            return state
        red = Redemption(d.get("applied") is True, _str(d.get("reason")), event.seq)
        return ReviewState(state.records, state.answered, _add(state.redeemed, rid, red), state.graph,
                           tuple(i for i in state.live if i != rid))

    def view(self, state: ReviewState) -> dict[str, Any]:
        """``{open: [{id, kind, from, target, since_seq}], approved: [{id, kind, target, option,
        since_seq}], pending: {stage, plan}, graph}`` (JSON); ``approved``: answered approve and
        not applied yet (the next boundary redeems them)."""
        stage, plan = state.pending("stage"), state.pending("plan")
        opened = [{"id": r.id, "kind": r.kind, "from": r.from_, "target": r.target, "since_seq": r.seq}
                  for r in state.open]
        approved = [{"id": r.id, "kind": r.kind, "target": r.target, "option": state.answered[r.id].option,
                     "since_seq": r.seq} for r in state.approved]
        return {"open": opened, "approved": approved,
                "pending": {"stage": stage.target if stage else None, "plan": plan.id if plan else None},
                "graph": None if state.graph is None else {"name": state.graph.name,
                                                           "fingerprint": state.graph.fingerprint}}

    def dump(self, state: ReviewState) -> Any:
        """The state as JSON (checkpoints): lists of the records' fields."""
        return {"records": [attrs.asdict(r) for r in state.records.values()],
                "answered": [attrs.asdict(a) for a in state.answered.values()],
                "redeemed": [{"id": k, **attrs.asdict(v)} for k, v in state.redeemed.items()],
                "graph": None if state.graph is None else attrs.asdict(state.graph)}

    def load(self, raw: Any) -> ReviewState:
        """The inverse of ``dump``; raises ``ValueError`` for anything else."""
        try:
            records = {r["id"]: ReviewRecord(**{**r, "options": tuple(r["options"])}) for r in raw["records"]}
            answered = {a["id"]: ReviewAnswer(**{**a, "reviewers": tuple(a["reviewers"])})
                        for a in raw["answered"]}
            redeemed = {r["id"]: Redemption(r["applied"], r["reason"], r["seq"]) for r in raw["redeemed"]}
            graph = None if raw["graph"] is None else GraphRecord(**raw["graph"])
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a review fold state: {err}") from err
        live = tuple(i for i in records if i not in redeemed
                     and (i not in answered or answered[i].outcome == "approve"))
        return ReviewState(Indexed.of(records, lambda r: r.call_id), Indexed.of(answered),
                           Indexed.of(redeemed), graph, live)


def _close_calls(state: ReviewState, event: Event) -> ReviewState:
    """``state`` after the ``tool/result`` ``event``: its call's live reviews closed as
    ``call-closed`` (see ``ReviewFold``). O(live reviews)."""
    call_id = answered_call_id(event)
    if call_id is None:
        return state
    d = event.data if isinstance(event.data, Mapping) else _EMPTY
    error = d.get("error")
    closed = isinstance(error, Mapping) and error.get("code") in CLOSED_CALL_CODES
    records = state.records
    gone = [i for i in state.live if records[i].call_id == call_id and records[i].seq < event.seq
            and (closed or records[i].kind == TOOL_KIND)]
    if not gone:
        return state
    redeemed = state.redeemed
    for rid in gone:
        redeemed = _add(redeemed, rid, Redemption(False, CALL_CLOSED, event.seq))
    return attrs.evolve(state, redeemed=redeemed, live=tuple(i for i in state.live if i not in gone))


def as_fork(state: ReviewState, seed_length: int | None) -> ReviewState:
    """``state`` as a fork whose header says ``seedLength = seed_length`` sees it: every review
    requested before the fork point (seq < ``seed_length``) and not redeemed there counts as
    redeemed ``applied: false, reason: "forked"`` (seq ``seed_length``), whoever wrote the fork
    and whatever was appended after the seed (an answer logged in the fork included): an
    approval is used only on the branch it was asked on. ``None`` (not a fork): ``state``.
    O(live reviews)."""
    if seed_length is None:
        return state
    stale = [i for i in state.live if state.records[i].seq < seed_length]  # live: not redeemed
    if not stale:
        return state
    forked = {rid: Redemption(False, "forked", seed_length) for rid in stale}
    gone = set(stale)
    return attrs.evolve(state, redeemed=_Overlay(state.redeemed, forked),
                        live=tuple(i for i in state.live if i not in gone))


REVIEW_FOLD: Final = ReviewFold()
"""The shared ``ReviewFold`` (one cursor per session)."""


def session_reviews(session: Any) -> ReviewState:
    """The review fold of ``session`` (a ``Session``; not refreshed here) as it sees it: in a
    fork (a header with ``seedLength``) the parent's unused reviews count as redeemed
    ``forked`` (``as_fork``)."""
    return as_fork(session.read(REVIEW_FOLD), session.header.seed_length)


def fresh_reviews(session: Any) -> ReviewState:
    """``session_reviews`` after the session caught up with other writers (``refresh()``)."""
    session.refresh()
    return session_reviews(session)


def fold_reviews(events: Sequence[Event], seed_length: int | None) -> ReviewState:
    """The review fold of ``events`` (a whole session, or its review rows) as the session whose
    header says ``seedLength = seed_length`` sees it (``as_fork``; None: not a fork)."""
    return as_fork(fold(REVIEW_FOLD, events), seed_length)
