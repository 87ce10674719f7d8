"""``fsm-stage review`` and ``fsm-stage fork``: answer durable reviews and fork a log.

``review LOG`` lists the open reviews (id, kind, from → target, call id, options, payload
hash, age, and the payload: the plan, the handoff document, or a tool call's arguments; every
text passes through ``text.visible``, so a model-written escape sequence can never drive the
reviewer's terminal); ``review LOG --approve ID
[--option LABEL]``, ``--keep ID [--feedback TEXT]`` or ``--dismiss ID`` records an answer
(``fsm_stage.reviews._answer.answer_review``, ``by: "cli"``); with ``--as NAME --reviewers
FILE`` the reviewer is authenticated first (their token from ``--token-file`` or
``FSM_STAGE_REVIEWER_TOKEN``, checked in constant time against the reviewers file) and the
answer goes through ``vote_review``, so the review's rules (approvers, quorum,
not_requester, deadline) decide; a refusal is one line, exit 1. LOG is any ``open_log``
location: a JSONL file (opened waiting up to 10 s for the writer lock, so racing processes
queue) or ``postgresql://…?session=ID`` (the answer is a conditional append; a loser
re-folds); either way exactly one answer wins, and a lost race, an unknown id or a changed
payload is one line, exit 1. ``fork LOG --at SEQ -o NEW`` writes a DSH-style fork
(``fork_log``; LOG and NEW are files or PostgreSQL locations). ``--json`` prints one object
with ``format_version`` first (keys in docs/reviews.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import click

from fsm_stage.cli import JSON_FORMAT_VERSION
from fsm_stage.cli._reviewer import TOKEN_ENV, Identity, identity, text_option
from fsm_stage.cli._wake import wake_log, webhooks
from fsm_stage.cli.inputs import STDIN, display_name, shown_as, spooled
from fsm_stage.cli.log_cmds import check_log_input
from fsm_stage.cli.progress import Progress
from fsm_stage.constants import TOOL_CALL
from fsm_stage.errors import ReviewRefusedError, UserError
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
    review_state,
    reviewed_document,
    vote_review,
)
from fsm_stage.reviews._channel import Option, Question, ReviewDismissed
from fsm_stage.reviews._edits import kept_diff
from fsm_stage.reviews._fold import MAX_REVIEW_DOCUMENT_BYTES, ReviewAnswer, ReviewRecord
from fsm_stage.reviews._team import VoteResult, deadline_at, quorum_of, rules_problem
from fsm_stage.reviews._terminal import TerminalReviewChannel
from fsm_stage.runtime import wording
from fsm_stage.runtime.session import Session
from fsm_stage.text import deadline_text, review_route, visible

__all__ = ["COMMANDS", "ask_rows", "fork", "listing", "on_terminal", "review"]

def _check_location(location: str) -> str:
    """``location`` as messages show it; refuses an unreadable LOG file (one line)."""
    if is_postgres_location(location):
        return redact(location)
    check_log_input(Path(location))
    return location


@contextlib.contextmanager
def _input(location: str) -> Iterator[str]:
    """``location`` as ``_read`` takes it: a PostgreSQL URL as given, ``-`` or a pipe spooled."""
    if is_postgres_location(location):
        yield location
        return
    with spooled(location) as path:
        yield str(path)


def _read(location: str, progress: Progress) -> ReadResult:
    if is_postgres_location(location):
        from fsm_stage.log.postgres import read_postgres

        return read_postgres(location)
    path = Path(location)
    progress.phase("reading log", path.stat().st_size)
    return read_log(path, on_progress=progress)


def _tool_arguments(session: Session, call_id: str) -> str | None:
    """The exact ``arguments`` text of the logged ``tool/call`` ``call_id`` (what a tool
    review's ``payloadSha256`` hashes), None when the call is not in the log."""
    for ev in reversed(session.events):
        if ev.type == TOOL_CALL and isinstance(ev.data, Mapping) and ev.data.get("callId") == call_id:
            raw = ev.data.get("arguments")
            return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    return None


def _payload(session: Session, record: ReviewRecord) -> str | None:
    """What the reviewer is shown: the plan, a tool call's argument text, or a stage review's
    handoff document — the copy stored in the request when it hashes to ``payloadSha256`` (a
    reviewer anywhere reads the exact text asked about), else the file at ``handoffPath``."""
    if record.kind == "plan":
        return plan_text(session, record.call_id)
    if record.kind == "tool":
        return _tool_arguments(session, record.call_id)
    if record.handoff_path is None:
        return None
    try:
        return reviewed_document(session, record)
    except (OSError, UnicodeDecodeError) as err:
        if record.document_omitted:
            return (f"(handoff document unreadable here: {err}; not stored with the review: larger than "
                    f"{MAX_REVIEW_DOCUMENT_BYTES} bytes)")
        return f"(handoff document unreadable: {err})"


def listing(session: Session) -> list[dict[str, Any]]:
    """The open reviews of ``session`` as ``review --json`` lists them (one dict each; ``rules``
    as logged or None, ``deadline_ms`` epoch ms or None)."""
    now = time.time() * 1000
    out = []
    state = review_state(session)
    for r in open_reviews(session):
        since = session.events[r.seq].time
        out.append({"id": r.id, "kind": r.kind, "from": r.from_, "target": r.target, "call_id": r.call_id,
                    "options": list(r.options), "shape": r.shape, "handoff_path": r.handoff_path,
                    "payload_sha256": r.payload_sha256, "since_seq": r.seq,
                    "age_seconds": max(0, round((now - since) / 1000)) if since is not None else None,
                    "rules": dict(r.rules) if r.rules is not None else None,
                    "deadline_ms": deadline_at(r.rules, r.time),
                    "payload": _payload(session, r), "kept_diff": kept_diff(state, r)})
    return out


def _rules_line(rules: Mapping[str, Any] | None, deadline_ms: int | None, now_ms: int) -> str | None:
    """Who may answer a review and until when, as one line (None: anyone, no deadline)."""
    if rules is None:
        return None
    problem = rules_problem(rules)
    if problem is not None:
        return f"rules: {problem}; nobody may answer it"
    parts = []
    if rules.get("approvers"):
        parts.append("approvers " + ", ".join(rules["approvers"]))
    if (quorum := quorum_of(rules)) != 1:
        parts.append(f"quorum {quorum}")
    if rules.get("notRequester"):
        parts.append("not the requester")
    if deadline_ms is not None:
        then = rules.get("onDeadline", "dismiss")
        parts.append(f"deadline {deadline_text(deadline_ms, now_ms)} (then {then})")
    return "rules: " + "; ".join(visible(p) for p in parts) if parts else None


def _human(rows: list[dict[str, Any]]) -> str:
    """The listing as text; every logged string is shown through ``visible`` (one line each)."""
    if not rows:
        return "no open reviews"
    now = int(time.time() * 1000)
    lines: list[str] = []
    for r in rows:
        v = {k: visible(str(r[k])) for k in ("id", "kind", "call_id", "payload_sha256")}
        where = visible(review_route(str(r["kind"]), str(r["from"]), str(r["target"]), arrow="->"))
        lines.append(f"{v['id']}  {v['kind']}: {where}  (call {v['call_id']}, "
                     f"since seq {r['since_seq']}"
                     + (f", {r['age_seconds']} s ago)" if r["age_seconds"] is not None else ")"))
        lines.append(f"  options: {' | '.join(visible(str(o)) for o in r['options'])}; "
                     f"sha256 {v['payload_sha256']}")
        rules = _rules_line(r["rules"], r["deadline_ms"], now)
        if rules is not None:
            lines.append(f"  {rules}")
        if r["kind"] == "tool" and r["payload"] is not None:
            lines.append("  arguments:")
        if r["payload"] is not None:
            lines.extend("  > " + visible(line) for line in str(r["payload"]).split("\n"))
        kept = r.get("kept_diff")
        if kept is not None:
            lines.append(f"  changes since the version kept in review {visible(kept['review'])}:")
            lines.extend("  | " + visible(line) for line in (kept["diff"] or "(no changes)").split("\n"))
    return "\n".join(lines)


def _record(log: str, review_id: str, outcome: str, *, feedback: str | None, option: str | None,
            who: Identity | None, edited: str | None = None) -> VoteResult:
    """Log one answer (``by: "cli"``; ``"cli:NAME"`` as ``who``, as ``inbox approve-all``): as
    ``who`` through ``vote_review`` (the review's rules decide; under a quorum an approval may
    only add a vote), else ``answer_review``; then, when the review closed and ``log`` belongs
    to a fleet store, wake its session (``_wake``). What opening the log for writing reported
    (a torn last line cut and saved beside it) is printed first, answered or refused."""
    with webhooks(), open_location(log) as stored:
        for warning in getattr(stored, "warnings", ()):
            click.echo(visible(f"fsm-stage: warning: {warning}"), err=True)
        if who is None:
            result = VoteResult(answer_review(stored, review_id, outcome, feedback=feedback, option=option,
                                              by="cli", edited=edited))
        else:
            result = vote_review(stored, review_id, outcome, reviewer=who.name, reviewers=who.reviewers,
                                 feedback=feedback, option=option, by=f"cli:{who.name}", edited=edited)
    if result.answer is not None:  # the review is closed: a fleet session waiting on it resumes now
        wake_log(log, review_id)
    return result


def _edited(source: str) -> str:
    """The edited document of ``--edited FILE`` (``-``: standard input), UTF-8, at most
    ``MAX_REVIEW_DOCUMENT_BYTES``; ``UserError`` (one line) otherwise."""
    try:
        if source == "-":
            raw = sys.stdin.buffer.read(MAX_REVIEW_DOCUMENT_BYTES + 1)
        else:
            with Path(source).open("rb") as handle:
                raw = handle.read(MAX_REVIEW_DOCUMENT_BYTES + 1)
        if len(raw) > MAX_REVIEW_DOCUMENT_BYTES:
            raise UserError(f"review: --edited {source}: larger than {MAX_REVIEW_DOCUMENT_BYTES} bytes; "
                            "nothing was written")
        return raw.decode("utf-8")
    except OSError as err:
        raise UserError(f"review: --edited {source}: cannot read it ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise UserError(f"review: --edited {source}: not UTF-8 text (byte {err.start})") from None


def _answer_json(answer: ReviewAnswer | None) -> dict[str, Any] | None:
    if answer is None:
        return None
    return {"id": answer.id, "outcome": answer.outcome, "option": answer.option, "shape": answer.shape,
            "feedback": answer.feedback, "by": answer.by, "reviewers": list(answer.reviewers),
            "edited_sha256": answer.edited_sha256 if answer.edited is not None else None, "seq": answer.seq}


def _done_line(review_id: str, result: VoteResult, who: Identity | None) -> str:
    """What one recorded answer (or vote) did, as one line."""
    answer = result.answer
    if answer is None:
        name = who.name if who is not None else "?"
        return (f"review {review_id}: approval by {name} recorded ({len(result.votes)} of {result.needed}); "
                "the review stays open")
    chosen = f" ({answer.option})" if answer.option else ""
    by = f" by {', '.join(answer.reviewers)}" if answer.reviewers else ""
    edits = " with edits" if answer.edited is not None else ""
    return f"review {answer.id}: {answer.outcome}{chosen}{edits}{by}, logged at seq {answer.seq}"


@click.command()
@click.argument("log")
@click.option("--approve", "approve", metavar="ID", default=None, help="Approve review ID.")
@click.option("--option", "option", metavar="LABEL", default=None,
              help="With --approve: the approve option (e.g. 'Approve and keep the conversation').")
@click.option("--edited", "edited_file", metavar="FILE", default=None,
              help="With --approve: approve this edited document instead (a full switch's handoff "
                   "document or a plan; - reads standard input).")
@click.option("--keep", "keep", metavar="ID", default=None, help="Keep (decline) review ID.")
@click.option("--feedback", "feedback", metavar="TEXT", default=None,
              help="With --keep: the reviewer's comments.")
@click.option("--dismiss", "dismiss", metavar="ID", default=None, help="Dismiss review ID.")
@click.option("--as", "as_name", metavar="NAME", default=None,
              help="Answer as reviewer NAME (authenticated; the review's rules decide).")
@click.option("--token-file", "token_file", metavar="FILE", default=None,
              help=f"With --as: a file holding the reviewer's token (default: ${TOKEN_ENV}).")
@click.option("--reviewers", "reviewers_file", metavar="FILE", default=None,
              help="With --as: the reviewers file (reviewers: {name: {token_sha256, groups}}).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--list", "as_list", is_flag=True,
              help="Only list the open reviews, also on a terminal (no questions).")
@click.option("--language", type=click.Choice(["en", "zh"]), default="en", show_default=True,
              help="Language of the interactive review.")
def review(log: str, approve: str | None, option: str | None, edited_file: str | None, keep: str | None,
           feedback: str | None,
           dismiss: str | None, as_name: str | None, token_file: str | None, reviewers_file: str | None,
           as_json: bool, as_list: bool, language: str) -> None:
    """List the open reviews of LOG, or answer one (--approve / --keep / --dismiss ID).

    On a terminal (standard input and output), without --json or --list, each open review is
    asked interactively and the answer recorded. With --as NAME (and --reviewers FILE, the
    token from --token-file or $FSM_STAGE_REVIEWER_TOKEN) the answer is NAME's and the
    review's rules decide whether it counts. LOG is a session log file or a
    postgresql://…?session=ID location."""
    given = (("approve", approve), ("keep", keep), ("dismiss", dismiss))
    actions = [(o, i) for o, i in given if i is not None]
    if log == STDIN and actions:
        raise click.UsageError("review -: standard input can be listed, not answered; give the log file")
    shown = display_name(log) if log == STDIN else _check_location(log)
    if len(actions) > 1:
        raise click.UsageError("give one of --approve, --keep, --dismiss")
    if option is not None and not approve:
        raise click.UsageError("--option goes with --approve")
    if feedback is not None and not keep:
        raise click.UsageError("--feedback goes with --keep")
    if edited_file is not None and not approve:
        raise click.UsageError("--edited goes with --approve")
    for name, value in (("--approve", approve), ("--option", option), ("--keep", keep),
                        ("--feedback", feedback), ("--dismiss", dismiss)):
        text_option(name, value)
    who = identity(as_name, token_file, reviewers_file)
    edited = _edited(edited_file) if edited_file is not None else None
    if not actions:
        with Progress(0) as progress, _input(log) as source:  # a bar while a large log is read
            res = _read(source, progress)
            progress.phase("folding reviews", 1)
            rows = listing(Session(MemoryLog(res.header, res.events)))
            warnings = shown_as(res.warnings, source, log)
        if not as_json:
            for warning in warnings:  # a damaged line can hide the reviews after it: say so
                click.echo(visible(f"fsm-stage: warning: {warning}"), err=True)
        if rows and not (as_json or as_list) and on_terminal():
            _ask_each(log, rows, language, who)
            return
        if as_json:
            click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": shown, "open": rows,
                                   "warnings": warnings}, ensure_ascii=False))
        else:
            click.echo(_human(rows))
        return
    ((outcome, review_id),) = actions
    result = _record(log, review_id, outcome, feedback=feedback, option=option, who=who, edited=edited)
    if as_json:
        vote = ({"reviewer": who.name, "votes": list(result.votes), "needed": result.needed}
                if who is not None else None)
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": shown,
                               "answer": _answer_json(result.answer), "vote": vote}, ensure_ascii=False))
    else:
        click.echo(visible(_done_line(review_id, result, who)))


def on_terminal() -> bool:
    """Whether standard input and output are both a terminal (an interactive review can run)."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _question(row: dict[str, Any], language: str) -> Question:
    """The terminal question for one listed review (texts from the ``runtime`` catalog)."""
    names = {"id": row["id"], "kind": row["kind"], "source": row["from"], "target": row["target"]}
    payload = row["payload"]
    if payload is not None and row["kind"] == "tool":
        payload = f"```json\n{payload}\n```"
    kept = row.get("kept_diff")
    if kept is not None and kept["diff"]:
        payload = (f"{payload}\n\nChanges since the version kept in review {kept['review']}:\n"
                   f"```diff\n{kept['diff']}\n```")
    context = ({"from": row["from"], "to": row["target"], "handoff_path": row["handoff_path"]}
               if row["kind"] == "stage" else None)
    return Question(f"review-{row['id']}", wording.text("terminal.review_header", language, **names),
                    wording.text("terminal.review_question", language, **names),
                    tuple(Option(label, "") for label in row["options"]), detail=payload, context=context,
                    intent={"kind": "cli-review", "approve": row["options"][0]} if row["options"] else None)


#: ``answer(row, outcome, option, feedback)``: record one interactive answer and print what it did.
AnswerRow = Callable[[dict[str, Any], str, "str | None", "str | None"], None]


def ask_rows(rows: Iterable[dict[str, Any]], language: str, answer: AnswerRow) -> None:
    """Ask each listed review (``listing`` rows, taken one at a time from ``rows``) with the
    terminal review (after the review's rules line, when it has rules: ``_rules_line``) and
    pass the choice to ``answer``: an approve option approves, the keep option or typed
    feedback keeps (never consent, B80). The end of input leaves the rest open; Ctrl-C stops at
    once (``KeyboardInterrupt``: exit 130); nothing unanswered is written."""
    channel = TerminalReviewChannel(language=language)
    for row in rows:
        rules = _rules_line(row["rules"], row["deadline_ms"], int(time.time() * 1000))
        if rules is not None:  # who may answer and until when, before the question
            click.echo(rules)
        question = _question(row, language)
        try:
            (reply,) = asyncio.run(channel.ask([question], None))  # type: ignore[arg-type]
        except ReviewDismissed as exc:
            if exc.interrupted:
                raise KeyboardInterrupt from None
            click.echo(wording.text("terminal.review_left_open", language, id=row["id"]))
            return
        options = list(row["options"])
        label = reply.selected[0] if reply.selected else None
        if label is not None and label in options[:-1]:
            answer(row, "approve", label, None)
        else:  # the keep option, or feedback typed with nothing selected (never consent, B80)
            answer(row, "keep", None, reply.custom)


def _ask_each(log: str, rows: list[dict[str, Any]], language: str, who: Identity | None = None) -> None:
    """Ask every open review on the terminal (``ask_rows``) and record each answer (``by:
    "cli"``, as ``who`` when given); a refused answer is one line and the next review is asked."""
    def answer(row: dict[str, Any], outcome: str, option: str | None, feedback: str | None) -> None:
        try:
            result = _record(log, row["id"], outcome, feedback=feedback, option=option, who=who)
        except ReviewRefusedError as err:
            click.echo(visible(f"fsm-stage: {err}"), err=True)
            return
        click.echo(visible(_done_line(row["id"], result, who)))

    ask_rows(rows, language, answer)


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

    LOG and NEW are session log files or postgresql://… locations (LOG may be ``-``: standard
    input; NEW is always a new log, never standard output)."""
    if output == STDIN:
        raise click.UsageError("fork: -o - is standard output; the fork is a new log: name a file or "
                               "a postgresql:// location")
    if log == STDIN:
        with spooled(log) as path:
            _fork(str(path), display_name(log), at, output, as_json)
        return
    _fork(log, _check_location(log), at, output, as_json)


def _fork(log: str, shown: str, at: int, output: str, as_json: bool) -> None:
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
