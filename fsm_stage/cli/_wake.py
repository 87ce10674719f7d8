"""Answers the command line logs wake the fleet session they answer (docs/fleet.md) and post
the review's webhooks (docs/reviews.md).

``webhooks()`` is the block inside which review notifications go out (the graph's ``notify``
rules; ``$FSM_STAGE_WEBHOOK_SECRET`` signs them, ``$FSM_STAGE_INBOX_URL`` links the inbox).

``waker(location)`` is the fleet's ``on_answer`` hook for a store (None without a fleet
there); ``wake_log(log, review_id)`` wakes the session of one log after ``fsm-stage review``
answered it, when that log belongs to a fleet store (a JSONL file in a store folder, a
``postgresql://…?session=ID`` URL), and says in one line when the wake-up failed (the answer
stands; the session then sees it at its next poll)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from fsm_stage.errors import UserError

#: Environment variable holding the secret that signs review webhooks (unset: unsigned).
WEBHOOK_SECRET_ENV = "FSM_STAGE_WEBHOOK_SECRET"
#: Environment variable naming the inbox's address, linked from each notification.
INBOX_URL_ENV = "FSM_STAGE_INBOX_URL"


@contextlib.contextmanager
def webhooks() -> Iterator[None]:
    """Post review notifications for what is logged inside the block (``notify_webhooks``);
    what is queued is delivered when the block ends (at most 10 s)."""
    from fsm_stage.reviews import notify_webhooks

    secret = os.environ.get(WEBHOOK_SECRET_ENV)
    stop = notify_webhooks(secret.encode("utf-8") if secret else None,
                           inbox_url=os.environ.get(INBOX_URL_ENV) or None)
    try:
        yield
    finally:
        stop()


def waker(location: str | Path) -> Any:
    """The fleet's wake-up hook for ``location`` (None without a fleet there)."""
    from fsm_stage.fleet.wake import fleet_waker

    try:
        return fleet_waker(location)
    except UserError:
        return None  # not a fleet store


def wake_log(log: str, review_id: str) -> None:
    """Wake the fleet session of ``log`` on ``review_id`` (nothing when ``log`` is no fleet's)."""
    from fsm_stage.log.postgres import is_postgres_location, split_location

    if log == "-":
        return
    if is_postgres_location(log):
        location, session = split_location(log)
        if session is None:
            return
    else:
        path = Path(log)
        location, session = str(path.parent), path.stem
    hook = waker(location)
    if hook is None:
        return
    try:
        why = hook(session, review_id)
    finally:
        hook.close()
    if why is not None:
        click.echo(f"fsm-stage: the answer is logged; waking the fleet session failed ({why}); it "
                   "sees the answer at its next poll", err=True)
