"""``fsm-stage review`` and ``fsm-stage fork``: answer durable reviews and fork a log.

``review LOG`` lists the open reviews (id, kind, from → target, call id, options, payload
hash, age, and the payload: the plan, or the handoff document); ``review LOG --approve ID
[--option LABEL]``, ``--keep ID [--feedback TEXT]`` or ``--dismiss ID`` records an answer
(``fsm_stage.reviews._answer.answer_review``, ``by: "cli"``). LOG is any ``open_log``
location: a JSONL file (opened waiting up to 10 s for the writer lock, so racing processes
queue) or ``postgresql://…?session=ID`` (the answer is a conditional append; a loser
re-folds); either way exactly one answer wins, and a lost race, an unknown id or a changed
payload is one line, exit 1. ``fork LOG --at SEQ -o NEW`` writes a DSH-style fork
(``fork_log``; LOG and NEW are files or PostgreSQL locations). ``--json`` prints one object
with ``format_version`` first (keys in docs/reviews.md).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from fsm_stage.cli import JSON_FORMAT_VERSION
from fsm_stage.cli.log_cmds import check_log_input
from fsm_stage.errors import UserError
from fsm_stage.fileio import output_error
from fsm_stage.log.dsh import ReadResult, read_log
from fsm_stage.log.memory import MemoryLog
from fsm_stage.log.postgres import is_postgres_location, redact, split_location
from fsm_stage.reviews._answer import (
    answer_review,
    fork_log,
    open_location,
    open_reviews,
    pg_location,
    plan_text,
    read_handoff_document,
)
from fsm_stage.reviews._fold import ReviewRecord
from fsm_stage.runtime.session import Session

__all__ = ["COMMANDS", "fork", "review"]

def _check_location(location: str) -> str:
    """``location`` as messages show it; refuses an unreadable LOG file (one line)."""
    if is_postgres_location(location):
        return redact(location)
    check_log_input(Path(location))
    return location


def _read(location: str) -> ReadResult:
    if is_postgres_location(location):
        from fsm_stage.log.postgres import read_postgres

        return read_postgres(location)
    return read_log(Path(location))


def _payload(session: Session, record: ReviewRecord) -> str | None:
    if record.kind == "plan":
        return plan_text(session, record.call_id)
    if record.handoff_path is None:
        return None
    try:
        return read_handoff_document(session, record.handoff_path)
    except (OSError, UnicodeDecodeError) as err:
        return f"(handoff document unreadable: {err})"


def _listing(session: Session) -> list[dict[str, Any]]:
    now = time.time() * 1000
    out = []
    for r in open_reviews(session):
        since = session.events[r.seq].time
        out.append({"id": r.id, "kind": r.kind, "from": r.from_, "target": r.target, "call_id": r.call_id,
                    "options": list(r.options), "shape": r.shape, "handoff_path": r.handoff_path,
                    "payload_sha256": r.payload_sha256, "since_seq": r.seq,
                    "age_seconds": max(0, round((now - since) / 1000)) if since is not None else None,
                    "payload": _payload(session, r)})
    return out


def _human(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no open reviews"
    lines: list[str] = []
    for r in rows:
        lines.append(f"{r['id']}  {r['kind']}: {r['from']} -> {r['target']}  (call {r['call_id']}, "
                     f"since seq {r['since_seq']}"
                     + (f", {r['age_seconds']} s ago)" if r["age_seconds"] is not None else ")"))
        lines.append(f"  options: {' | '.join(r['options'])}; sha256 {r['payload_sha256']}")
        if r["payload"] is not None:
            lines.extend("  > " + line for line in str(r["payload"]).splitlines())
    return "\n".join(lines)


@click.command()
@click.argument("log")
@click.option("--approve", "approve", metavar="ID", default=None, help="Approve review ID.")
@click.option("--option", "option", metavar="LABEL", default=None,
              help="With --approve: the approve option (e.g. 'Approve and keep the conversation').")
@click.option("--keep", "keep", metavar="ID", default=None, help="Keep (decline) review ID.")
@click.option("--feedback", "feedback", metavar="TEXT", default=None,
              help="With --keep: the reviewer's comments.")
@click.option("--dismiss", "dismiss", metavar="ID", default=None, help="Dismiss review ID.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def review(log: str, approve: str | None, option: str | None, keep: str | None, feedback: str | None,
           dismiss: str | None, as_json: bool) -> None:
    """List the open reviews of LOG, or answer one (--approve / --keep / --dismiss ID).

    LOG is a session log file or a postgresql://…?session=ID location."""
    shown = _check_location(log)
    given = (("approve", approve), ("keep", keep), ("dismiss", dismiss))
    actions = [(o, i) for o, i in given if i is not None]
    if len(actions) > 1:
        raise click.UsageError("give one of --approve, --keep, --dismiss")
    if option is not None and not approve:
        raise click.UsageError("--option goes with --approve")
    if feedback is not None and not keep:
        raise click.UsageError("--feedback goes with --keep")
    if not actions:
        res = _read(log)
        rows = _listing(Session(MemoryLog(res.header, res.events)))
        if as_json:
            click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": shown, "open": rows},
                                  ensure_ascii=False))
        else:
            click.echo(_human(rows))
        return
    ((outcome, review_id),) = actions
    with open_location(log) as stored:
        answer = answer_review(stored, review_id, outcome, feedback=feedback, option=option, by="cli")
    data = {"id": answer.id, "outcome": answer.outcome, "option": answer.option, "shape": answer.shape,
            "feedback": answer.feedback, "by": answer.by, "seq": answer.seq}
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": shown, "answer": data},
                              ensure_ascii=False))
    else:
        click.echo(f"review {answer.id}: {answer.outcome}"
                   + (f" ({answer.option})" if answer.option else "") + f", logged at seq {answer.seq}")


def _same_log(a: str, b: str) -> bool:
    if is_postgres_location(a) or is_postgres_location(b):
        return is_postgres_location(a) and is_postgres_location(b) and split_location(a) == split_location(b)
    return Path(a).resolve() == Path(b).resolve()


@click.command()
@click.argument("log")
@click.option("--at", "at", type=click.IntRange(min=0), required=True, metavar="SEQ",
              help="The last event the fork inherits.")
@click.option("-o", "--output", "output", required=True, metavar="NEW",
              help="The fork's log: a new file, or postgresql://… (?session=ID, default a new id).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def fork(log: str, at: int, output: str, as_json: bool) -> None:
    """Fork LOG after event SEQ into NEW (open reviews and unused approvals are not inherited).

    LOG and NEW are session log files or postgresql://… locations."""
    shown = _check_location(log)
    if _same_log(output, log):
        raise UserError(f"fork: -o {redact(output)} is the source log; choose a new one")
    try:
        child = fork_log(log, at, output)
    except OSError as err:
        raise output_error(Path(output), err, what="fork") from err
    try:
        header = child.header
        events = len(child.events)
    finally:
        close = getattr(child.log, "close", None)
        if callable(close):
            close()
    where = redact(pg_location(output, header.id)) if is_postgres_location(output) else output
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": where, "id": header.id,
                               "parent_session": header.parent_session, "seed_length": header.seed_length,
                               "events": events}))
    else:
        click.echo(f"forked {shown} after seq {at} into {where} (session {header.id}, {events} events)")


COMMANDS = (review, fork)
