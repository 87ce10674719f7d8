"""The review fold: durable review requests, answers and redemptions (design B §3).

``ReviewFold`` folds ``fsm/review/request`` / ``answer`` / ``redeemed`` and ``fsm/graph`` into
a ``ReviewState``: every request (``records``), its answer (``answered``), whether an approval
was used (``redeemed``) and the last recorded graph fingerprint (``graph``). ``open`` = asked,
not answered; ``approved`` = answered approve, not redeemed; ``pending(kind)`` = the approved,
unredeemed review of that kind (at most one). ``REVIEW_FOLD`` is the shared instance
(``Session.read(REVIEW_FOLD)`` is O(new events)). ``plan_payload_sha256`` /
``stage_payload_sha256`` hash what a reviewer is shown. A ``Projection`` (``key="reviews"``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from fsm_stage.constants import GRAPH_EVENT, REVIEW_ANSWER, REVIEW_REDEEMED, REVIEW_REQUEST
from fsm_stage.log.events import Event

__all__ = ["REVIEW_FOLD", "GraphRecord", "Redemption", "ReviewAnswer", "ReviewFold", "ReviewRecord",
           "ReviewState", "plan_payload_sha256", "stage_payload_sha256"]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def plan_payload_sha256(plan: str) -> str:
    """Hex sha256 of the plan text shown to the reviewer (UTF-8)."""
    return hashlib.sha256(plan.encode("utf-8")).hexdigest()


def stage_payload_sha256(target: str, handoff: str | None) -> str:
    """Hex sha256 of ``target + "\\n" + handoff`` (``""`` when there is no document)."""
    return hashlib.sha256((target + "\n" + (handoff or "")).encode("utf-8")).hexdigest()


@attrs.frozen
class ReviewRecord:
    """One ``fsm/review/request``: ids, kind (``"plan"``/``"stage"``), ``from_``/``target``
    stage (plan: ``"plan"`` → ``"default"``), option labels, default ``shape``
    (``"full"``/``"light"``/None), ``handoff_path``, ``payload_sha256`` (hex), the ``turn`` and
    ``step`` it was asked in, and the ``seq`` of the request event."""

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

    def to_json(self) -> dict[str, Any]:
        """The request's ``data`` as logged (camelCase keys)."""
        return {"id": self.id, "callId": self.call_id, "kind": self.kind, "from": self.from_,
                "target": self.target, "options": list(self.options), "shape": self.shape,
                "handoffPath": self.handoff_path, "payloadSha256": self.payload_sha256,
                "turn": self.turn, "step": self.step}


@attrs.frozen
class ReviewAnswer:
    """One ``fsm/review/answer``: ``outcome`` (approve/keep/dismiss), the chosen ``option``
    label, the approved ``shape``, the reviewer's ``feedback``, who answered (``by``), ``seq``."""

    id: str
    outcome: str
    option: str | None
    shape: str | None
    feedback: str | None
    by: str
    seq: int


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
    """Folded reviews (see module docstring). Mappings are read-only views keyed by review id."""

    records: Mapping[str, ReviewRecord] = _EMPTY
    answered: Mapping[str, ReviewAnswer] = _EMPTY
    redeemed: Mapping[str, Redemption] = _EMPTY
    graph: GraphRecord | None = None
    #: Ids of the records still open or approved-unredeemed, in request order (derived: the
    #: only ones ``open`` and ``approved`` look at, so they cost O(live), not O(every review)).
    live: tuple[str, ...] = attrs.field(default=(), eq=False)

    @property
    def open(self) -> tuple[ReviewRecord, ...]:
        """Requested, not answered (and not closed by a redemption, e.g. a fork), in request order."""
        records = self.records
        return tuple(records[i] for i in self.live if i not in self.answered and i not in self.redeemed)

    @property
    def approved(self) -> tuple[ReviewRecord, ...]:
        """Answered approve and not redeemed, in request order."""
        records = self.records
        return tuple(records[i] for i in self.live if i not in self.redeemed and self._approved(i))

    def _approved(self, review_id: str) -> bool:
        answer = self.answered.get(review_id)
        return answer is not None and answer.outcome == "approve"

    def open_of(self, kind: str) -> ReviewRecord | None:
        """The open review of ``kind`` (the last one if a racing writer logged two)."""
        found = [r for r in self.open if r.kind == kind]
        return found[-1] if found else None

    def pending(self, kind: str) -> ReviewRecord | None:
        """The approved, unredeemed review of ``kind`` (the last approved one), or None."""
        found = [r for r in self.approved if r.kind == kind]
        return found[-1] if found else None

    def by_call(self, call_id: str, kind: str | None = None) -> ReviewRecord | None:
        """The last review requested for tool call ``call_id`` (optionally of ``kind``)."""
        found = [r for r in self.records.values()
                 if r.call_id == call_id and (kind is None or r.kind == kind)]
        return found[-1] if found else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class ReviewFold:
    """The fold of the review and graph events (a ``Projection``; module docstring)."""

    key: str = "reviews"
    STATE_VERSION: int = 1
    #: Event types that can change the state: a streaming reader may skip others.
    READS: Final = frozenset({REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED, GRAPH_EVENT})

    def init(self) -> ReviewState:
        """The empty state."""
        return ReviewState()

    def apply(self, state: ReviewState, event: Event) -> ReviewState:
        """Fold one event; malformed review events (no string ``id``) are skipped."""
        t = event.type
        if t not in (REVIEW_REQUEST, REVIEW_ANSWER, REVIEW_REDEEMED, GRAPH_EVENT):
            return state
        d = event.data if isinstance(event.data, Mapping) else _EMPTY
        if t == GRAPH_EVENT:
            name, fp = _str(d.get("name")), _str(d.get("fingerprint"))
            return state if fp is None else attrs.evolve(state, graph=GraphRecord(name or "", fp, event.seq))
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
                step=_int(d.get("step")), seq=event.seq)
            return attrs.evolve(state, records=MappingProxyType({**state.records, rid: rec}),
                                live=(*state.live, rid))
        if rid not in state.records:
            return state
        if t == REVIEW_ANSWER:
            if rid in state.answered:
                return state  # the first answer wins; a later one (a lost race) is ignored
            ans = ReviewAnswer(rid, _str(d.get("outcome")) or "dismiss", _str(d.get("option")),
                               _str(d.get("shape")), _str(d.get("feedback")), _str(d.get("by")) or "",
                               event.seq)
            live = state.live if ans.outcome == "approve" else tuple(i for i in state.live if i != rid)
            return attrs.evolve(state, answered=MappingProxyType({**state.answered, rid: ans}), live=live)
        if rid in state.redeemed:
            return state
        red = Redemption(d.get("applied") is True, _str(d.get("reason")), event.seq)
        return attrs.evolve(state, redeemed=MappingProxyType({**state.redeemed, rid: red}),
                            live=tuple(i for i in state.live if i != rid))

    def view(self, state: ReviewState) -> dict[str, Any]:
        """``{open: [{id, kind, target, since_seq}], pending: {stage, plan}, graph}`` (JSON)."""
        stage, plan = state.pending("stage"), state.pending("plan")
        opened = [{"id": r.id, "kind": r.kind, "target": r.target, "since_seq": r.seq} for r in state.open]
        return {"open": opened,
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
            answered = {a["id"]: ReviewAnswer(**a) for a in raw["answered"]}
            redeemed = {r["id"]: Redemption(r["applied"], r["reason"], r["seq"]) for r in raw["redeemed"]}
            graph = None if raw["graph"] is None else GraphRecord(**raw["graph"])
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a review fold state: {err}") from err
        live = tuple(i for i in records if i not in redeemed
                     and (i not in answered or answered[i].outcome == "approve"))
        return ReviewState(MappingProxyType(records), MappingProxyType(answered),
                           MappingProxyType(redeemed), graph, live)


REVIEW_FOLD: Final = ReviewFold()
"""The shared ``ReviewFold`` (one cursor per session)."""
