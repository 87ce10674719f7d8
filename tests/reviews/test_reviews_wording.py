"""Every text a reviewer sees comes from the catalogs, in English and Chinese: the stage
review's "Approve and keep the conversation" description, the tool-policy ``ask`` review, the
``fsm-stage review`` dialog; and a kept conversation tells the model where its saved handoff is."""

from __future__ import annotations

from pathlib import Path

import pytest
from rig import Rig, run

from fsm_stage.config import load_config_text
from fsm_stage.constants import APPROVE_KEEP_CONVERSATION_LABEL
from fsm_stage.errors import ReviewPending
from fsm_stage.log.events import MemoryLog, SessionHeader
from fsm_stage.policy import Decision, PolicyState
from fsm_stage.policy._ask import review_question
from fsm_stage.prompts import load_catalog
from fsm_stage.reviews import SuspendingReviewChannel, answer_review, build_review_question
from fsm_stage.runtime import wording
from fsm_stage.runtime.tools import ToolCall
from fsm_stage.stage_switch import CATALOG_NAME

GRAPH = ("name: g\nsection: go\nlanguage: {lang}\nstages:\n  - {{name: a, instruction: A.}}\n"
         "  - {{name: b, instruction: B.}}\n")


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_keep_conversation_option_is_described_in_the_review_language(lang: str) -> None:
    question = build_review_question(load_catalog(CATALOG_NAME, lang), "implement", "# Handoff")
    (option,) = [o for o in question.options if o.label == APPROVE_KEEP_CONVERSATION_LABEL]
    assert option.description == wording.text("stage_review.keep_conversation_description", lang)
    assert _has_cjk(option.description or "") is (lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("scope", ["stage", "plan mode"])
def test_a_tool_policy_ask_review_speaks_the_graph_language(lang: str, scope: str) -> None:
    graph = load_config_text(GRAPH.format(lang=lang)).graph
    state = PolicyState("a", scope == "plan mode", None, None, graph)
    call = ToolCall.of("apply_patch", {"patch": "x"}, id="c1")
    question = review_question(call, Decision("ask", "ask: apply_patch", scope), state)
    texts = [question.header, question.question, *(o.description or "" for o in question.options)]
    assert all(_has_cjk(t) is (lang == "zh") for t in texts), texts
    assert "apply_patch" in question.question and [o.label for o in question.options] == ["Approve", "Deny"]
    assert question.detail is not None and '"patch"' in question.detail


def test_every_reviewer_text_exists_in_both_languages() -> None:
    for name in ("runtime", "tool_policy"):
        en, zh = load_catalog(name), load_catalog(name, "zh")
        for key in ("stage_review.keep_conversation_description", "terminal.review_header",
                    "terminal.review_question", "terminal.review_left_open") if name == "runtime" else (
                "review.header", "review.question", "review.approve_description", "review.deny_description",
                "review.where_stage", "review.where_plan_mode"):
            assert _has_cjk(zh.raw(key)) and not _has_cjk(en.raw(key)), (name, key)


def test_keeping_the_conversation_says_the_saved_handoff_is_unused(tmp_path: Path) -> None:
    rig = Rig(MemoryLog(SessionHeader(id="s-1", cwd=str(tmp_path))), SuspendingReviewChannel())
    rig.open_turn()
    rig.step()
    with pytest.raises(ReviewPending) as pending:
        run(rig.call(rig.goto_call("implement", "# Handoff\nwhat was done")))
    answer_review(rig.session, pending.value.review_id, "approve", option=APPROVE_KEEP_CONVERSATION_LABEL)
    result = run(rig.resume(rig.goto_call("implement", "# Handoff\nwhat was done")))
    (record,) = [r for r in rig.reviews().records.values() if r.kind == "stage"]
    assert record.handoff_path is not None and Path(record.handoff_path).is_file()
    assert "was not saved" not in result.text and record.handoff_path in result.text, result.text
    assert "keep the conversation" in result.text
