"""Stage records and folds (S13–S23): host fold, record test, client fold, shared constants."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fsm_stage.constants import STAGE_SOURCE_KINDS, STAGE_SUMMARY_RE
from fsm_stage.log.events import Event
from fsm_stage.log.projections import fold_stage, fold_stage_records, stage_from_event

T = 1_700_000_000_000


def msg(summary: Any = None, *, kind: str = "stage-switch", form: str = "notice", seq: int = 0,
        type: str = "user/message", extra: dict[str, Any] | None = None, time: int = T) -> Event:
    source: dict[str, Any] = {"kind": kind, "form": form}
    if summary is not None:
        source["summary"] = summary
    if extra:
        source.update(extra)
    content = [{"type": "text", "text": str(summary)}]
    data = {"id": f"m{seq}", "role": "user", "content": content, "source": source}
    return Event(type, seq, time, data, surface_op="append" if type == "user/message" else None)


def plain(text: str, seq: int = 0) -> Event:
    content = [{"type": "text", "text": text}]
    data = {"id": "u", "role": "user", "content": content, "source": {"kind": "user"}}
    return Event("user/message", seq, T, data, surface_op="append")


def test_empty_log_folds_to_none_S13() -> None:
    """S13."""
    assert fold_stage([]) is None


def test_end_prefix_S14() -> None:
    """S14: end=1 sees only the first record."""
    events = [msg("Current stage: alpha", seq=0), msg("Current stage: beta", seq=1)]
    assert fold_stage(events, end=1) == "alpha"
    assert fold_stage(events, end=0) is None


def test_last_record_wins_S15() -> None:
    """S15."""
    assert fold_stage([msg("Current stage: alpha", seq=0), msg("Current stage: beta", seq=1)]) == "beta"


def test_migrated_legacy_kind_S16() -> None:
    """S16: plugin:stage-switch records fold."""
    assert fold_stage([msg("Current stage: gamma", kind="plugin:stage-switch")]) == "gamma"


def test_handoff_notice_summary_S17() -> None:
    """S17: 'Stage switched to gamma' is a record too."""
    assert fold_stage([msg("Current stage: alpha", seq=0), msg("Stage switched to gamma", seq=1)]) == "gamma"


def test_foreign_and_malformed_are_ignored_S18() -> None:
    """S18: plain user text, a foreign plugin's notice and a malformed summary fold to None."""
    events = [plain("Current stage: alpha", 0), msg("Current stage: ghost", kind="other-plugin", seq=1),
              msg("Stage switched to NOT A STAGE", seq=2)]
    assert fold_stage(events) is None


def test_record_test_edge_cases_S19() -> None:
    """S19a–e: malformed records don't reset; wrong form, missing/non-string summary, trailing text,
    the retired wrapper and non-user/message events are not records."""
    # (a)
    assert fold_stage([msg("Current stage: alpha", seq=0), msg("Current stage: Bad!", seq=1)]) == "alpha"
    # (b)
    assert stage_from_event(msg("Current stage: alpha", form="prompt")) is None
    assert stage_from_event(msg(None)) is None
    assert stage_from_event(msg(42)) is None
    # (c)
    assert stage_from_event(msg("Current stage: alpha\n")) is None
    assert stage_from_event(msg("Current stage: alpha ")) is None
    # (d)
    wrapper = msg("Current stage: alpha", kind="plugin", extra={"plugin": "stage-switch"})
    assert stage_from_event(wrapper) is None
    # (e)
    assert stage_from_event(msg("Current stage: alpha", type="assistant/message")) is None
    assert stage_from_event(msg("Current stage: alpha")) == "alpha"


def test_client_fold_both_kinds_S20() -> None:
    """S20: records of both producer kinds with their stage, seq, time and switch flag."""
    entries = [
        {"type": "event", "event": msg("Current stage: route", seq=1, time=T + 1)},
        {"type": "event",
         "event": msg("Stage switched to design", kind="plugin:stage-switch", seq=2, time=T + 2)},
    ]
    assert [r.to_json() for r in fold_stage_records(entries)] == [
        {"stage": "route", "seq": 1, "time": T + 1, "switched": False},
        {"stage": "design", "seq": 2, "time": T + 2, "switched": True},
    ]


def test_client_fold_ignores_others_S21() -> None:
    """S21: human messages, the legacy wrapper, other producers, transient entries, turn events."""
    compact = msg("checkpoint", kind="plugin", extra={"plugin": "compact"})
    entries: list[dict[str, Any]] = [
        {"type": "event", "event": plain("hello")},
        {"type": "event",
         "event": msg("Current stage: route", kind="plugin", extra={"plugin": "stage-switch"})},
        {"type": "event", "event": compact},
        {"type": "transient", "chunk": {"text": "Current stage: route"}},
        {"type": "event", "event": Event("turn/start", 5, T, {"turn": 1})},
    ]
    assert fold_stage_records(entries) == []


def test_client_fold_ignores_broken_contract_S22() -> None:
    """S22: summary 'bogus', 'Current stage: Not A Stage!', form prompt, no summary."""
    entries = [{"type": "event", "event": e} for e in (
        msg("bogus"), msg("Current stage: Not A Stage!"), msg("Current stage: route", form="prompt"),
        msg(None))]
    assert fold_stage_records(entries) == []


def test_shared_contract_constants_S23() -> None:
    """S23: one kind set and one regex (no flags), used by both folds."""
    assert sorted(STAGE_SOURCE_KINDS) == ["plugin:stage-switch", "stage-switch"]
    assert STAGE_SUMMARY_RE.pattern == r"^(?:Current stage: |Stage switched to )([a-z][a-z0-9_-]*)$"
    assert STAGE_SUMMARY_RE.flags & ~0x20 == 0  # only re.UNICODE (the str default), no user flags


_summaries = st.one_of(
    st.sampled_from(["alpha", "beta", "x-1", "Bad", "a b", ""]).flatmap(
        lambda n: st.sampled_from(
            [f"Current stage: {n}", f"Stage switched to {n}", f"Current stage: {n}\n"])),
    st.none(),
    st.text(max_size=12),
)
_events = st.lists(
    st.tuples(_summaries, st.sampled_from([*sorted(STAGE_SOURCE_KINDS), "plugin", "user"]),
              st.sampled_from(["notice", "prompt"]), st.sampled_from(["user/message", "assistant/message"])),
    max_size=12,
)


@given(_events)
def test_host_and_client_folds_agree_S23(spec: list[tuple[Any, str, str, str]]) -> None:
    """S23: for any event list, the host fold equals the client fold's last record."""
    events = [msg(s, kind=k, form=f, type=t, seq=i) for i, (s, k, f, t) in enumerate(spec)]
    records = fold_stage_records([{"type": "event", "event": e} for e in events])
    assert fold_stage(events) == (records[-1].stage if records else None)
    for r in records:
        assert r.switched == events[r.seq].data["source"]["summary"].startswith("Stage switched to ")
