"""Token meter: the documented heuristic, the pluggable tokenizer, surface-only pricing (S63, S64)."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from fsm_stage.log.events import MemoryLog, Replace, SessionHeader
from fsm_stage.runtime.session import Session
from fsm_stage.tokens import (
    DEFAULT_PER_MESSAGE_OVERHEAD,
    IMAGE_TOKENS,
    HeuristicTokenMeter,
    TokenMeter,
    visible_text,
)


def _user(text: str) -> dict[str, object]:
    content = [{"type": "text", "text": text}]
    return {"id": "m", "role": "user", "content": content, "source": {"kind": "user"}}


def _session() -> Session:
    return Session(MemoryLog(SessionHeader(id="agent-1", cwd="/workspace"), clock=lambda: 0))


def test_heuristic_is_four_chars_per_token_plus_overhead() -> None:
    """One message of 1080 chars is priced ceil(1080/4) + overhead (S63's 'well above 100')."""
    s = _session()
    s.append_message(_user("x" * 1080))
    meter = HeuristicTokenMeter()
    assert isinstance(meter, TokenMeter)
    assert meter.surface_tokens(s) == math.ceil(1080 / 4) + DEFAULT_PER_MESSAGE_OVERHEAD
    assert meter.surface_tokens(s) >= 100


def test_short_surface_is_cheap_S64() -> None:
    """S64's 'short' surface stays below a threshold of 100."""
    s = _session()
    s.append_message(_user("short"))
    assert HeuristicTokenMeter().surface_tokens(s) < 100


def test_only_the_visible_surface_is_priced() -> None:
    """Archived (replaced) nodes cost nothing: only what the model sees is counted."""
    s = _session()
    a = s.append_message(_user("a" * 4000))
    b = s.append_message(_user("b" * 4000))
    meter = HeuristicTokenMeter()
    before = meter.surface_tokens(s)
    s.append_message(_user("notice"), surface_op=Replace(a.seq, b.seq), source_event_seqs=[a.seq, b.seq])
    after = meter.surface_tokens(s)
    assert after == math.ceil(len("notice") / 4) + DEFAULT_PER_MESSAGE_OVERHEAD
    assert after < before
    # events without a surface op (turn markers, headers) are never priced
    s.append("turn/start", {"turn": 1})
    assert meter.surface_tokens(s) == after


def test_pluggable_tokenizer_replaces_the_character_rule() -> None:
    seen: list[str] = []

    def words(text: str) -> int:
        seen.append(text)
        return len(text.split())

    s = _session()
    s.append_message(_user("one two three"))
    meter = HeuristicTokenMeter(words, per_message_overhead=0)
    assert meter.surface_tokens(s) == 3
    assert seen == ["one two three"]


def test_tool_calls_results_and_images_are_priced() -> None:
    s = _session()
    s.append("assistant/message", {"message": {"role": "assistant", "content": [
        {"type": "text", "text": "calling"},
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": {"path": "a.py"}},
    ]}}, surface_op="append")
    ev = s.append("tool/result", {"message": {"role": "user", "content": [
        {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "print(1)"}]},
    ]}}, surface_op="append")
    img = s.append_message({"id": "i", "role": "user", "content": [{"type": "image", "attachment": {}}],
                            "source": {"kind": "user"}})
    text, extra = visible_text(ev)
    assert text == "print(1)" and extra == 0
    assert visible_text(img) == ("", IMAGE_TOKENS)
    meter = HeuristicTokenMeter(per_message_overhead=0)
    total = meter.surface_tokens(s)
    assert total == (
        math.ceil(len('calling\nread\n{"path": "a.py"}') / 4) + math.ceil(len("print(1)") / 4) + IMAGE_TOKENS
    )


def test_meter_over_a_bare_event_log() -> None:
    log = MemoryLog(SessionHeader(id="x"), clock=lambda: 0)
    log.append("user/message", _user("abcdefgh"), surface_op="append")
    assert HeuristicTokenMeter(per_message_overhead=1).surface_tokens(log) == 3


@pytest.mark.parametrize("kwargs", [{"chars_per_token": 0}, {"per_message_overhead": -1}])
def test_bad_parameters_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HeuristicTokenMeter(**cast(Any, kwargs))


def test_cjk_and_full_width_characters_count_one_token_each() -> None:
    """Second fresh user: ≈4 characters per token undercounts CJK heavily (a Chinese character is
    about one token). Each CJK ideograph, kana, hangul and full-width character counts 1; the
    rest of the text keeps the Latin rule."""
    meter = HeuristicTokenMeter()
    assert meter.count_text("实现一个命令行参数") == 9
    assert meter.count_text("ひらがなカタカナ") == 8
    assert meter.count_text("한국어") == 3
    assert meter.count_text("ＡＢＣ，。") == 5  # full-width forms and CJK punctuation
    # mixed: 8 Latin characters (ceil(8/4) = 2) + 4 ideographs
    assert meter.count_text("abcdefgh阶段切换") == 2 + 4
    assert meter.count_text("x" * 1080) == 270  # pure Latin text is unchanged


def test_other_non_latin_scripts_count_at_half_the_latin_ratio() -> None:
    """Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai… (code points from U+0370 on, outside the
    one-token-each class) count at chars_per_token / 2 characters per token."""
    meter = HeuristicTokenMeter()
    assert meter.count_text("привет") == 3  # ceil(6 / 2)
    assert meter.count_text("नमस्ते") == math.ceil(len("नमस्ते") / 2)
    # 7 Latin characters (spaces included), 3 Cyrillic, 2 ideographs
    assert meter.count_text("hello мир 世界") == math.ceil(7 / 4) + math.ceil(3 / 2) + 2
    assert HeuristicTokenMeter(chars_per_token=8).count_text("привет") == math.ceil(6 / 4)
    # Latin with accents (Latin-1 / Latin Extended) stays Latin
    assert meter.count_text("déjà vu") == math.ceil(7 / 4)


def test_surface_price_of_a_chinese_message() -> None:
    s = _session()
    s.append_message(_user("请为命令行添加问候选项"))
    assert HeuristicTokenMeter().surface_tokens(s) == 11 + DEFAULT_PER_MESSAGE_OVERHEAD
