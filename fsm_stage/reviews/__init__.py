"""Reviews: the channels a host answers through (scripted, suspending, terminal), the
questions they carry, the review fold over the log, the durable review flow, the per-kind
request shapes (plan exit, stage switch) and the offline tools ``answer_review`` /
``vote_review`` / ``open_reviews`` / ``fork_log``, with the team rules' ``Reviewers``. Every
name below loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage.reviews._answer import (
        answer_review,
        fork_log,
        open_reviews,
        review_state,
        vote_review,
    )
    from fsm_stage.reviews._channel import (
        Answer,
        Decision,
        Gate,
        Option,
        Question,
        ReviewChannel,
        ReviewDismissed,
        ScriptedReviewChannel,
        SuspendingReviewChannel,
        evaluate,
    )
    from fsm_stage.reviews._fold import (
        REVIEW_FOLD,
        ReviewAnswer,
        ReviewFold,
        ReviewRecord,
        ReviewState,
    )
    from fsm_stage.reviews._notify import Notifier, notify_webhooks
    from fsm_stage.reviews._stage import (
        Consent,
        Decline,
        build_review_question,
        evaluate_review,
    )
    from fsm_stage.reviews._team import (
        Reviewers,
        VoteResult,
        load_reviewers,
    )
    from fsm_stage.reviews._terminal import (
        TerminalReviewChannel,
    )

#: exported name -> the module (under this package) that defines it; ``__all__`` is its keys
_EXPORTS: dict[str, str] = {
    "Answer": "_channel",
    "Decision": "_channel",
    "Gate": "_channel",
    "Option": "_channel",
    "Question": "_channel",
    "ReviewChannel": "_channel",
    "ReviewDismissed": "_channel",
    "ScriptedReviewChannel": "_channel",
    "SuspendingReviewChannel": "_channel",
    "evaluate": "_channel",
    "TerminalReviewChannel": "_terminal",
    "answer_review": "_answer",
    "fork_log": "_answer",
    "open_reviews": "_answer",
    "review_state": "_answer",
    "vote_review": "_answer",
    "Notifier": "_notify",
    "notify_webhooks": "_notify",
    "Reviewers": "_team",
    "VoteResult": "_team",
    "load_reviewers": "_team",
    "REVIEW_FOLD": "_fold",
    "ReviewAnswer": "_fold",
    "ReviewFold": "_fold",
    "ReviewRecord": "_fold",
    "ReviewState": "_fold",
    "Consent": "_stage",
    "Decline": "_stage",
    "build_review_question": "_stage",
    "evaluate_review": "_stage",
}

__all__ = [
    "REVIEW_FOLD",
    "Answer",
    "Consent",
    "Decision",
    "Decline",
    "Gate",
    "Notifier",
    "Option",
    "Question",
    "ReviewAnswer",
    "ReviewChannel",
    "ReviewDismissed",
    "ReviewFold",
    "ReviewRecord",
    "ReviewState",
    "Reviewers",
    "ScriptedReviewChannel",
    "SuspendingReviewChannel",
    "TerminalReviewChannel",
    "VoteResult",
    "answer_review",
    "build_review_question",
    "evaluate",
    "evaluate_review",
    "fork_log",
    "load_reviewers",
    "notify_webhooks",
    "open_reviews",
    "review_state",
    "vote_review",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
