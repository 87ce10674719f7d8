"""``fsm-stage trace``: a whole session log as one trace (``fsm_stage.observe.build_trace``).

``trace LOG`` prints the span tree (name, duration, the main attributes); ``--json`` prints
``{format_version, trace_id, spans, otlp}`` where ``otlp`` is the OTLP/JSON export request;
``--otlp URL`` posts the trace to an OTLP/HTTP traces endpoint. LOG is a JSONL file, ``-``, or
``postgresql://…?session=ID``. The ids derive from the session id, so exporting the same log
twice gives the same trace (a backend keeps one copy).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from fsm_stage.cli import JSON_FORMAT_VERSION
from fsm_stage.cli.log_cmds import check_log_input
from fsm_stage.log.dsh import ReadResult
from fsm_stage.log.locations import read_location
from fsm_stage.log.postgres import is_postgres_location
from fsm_stage.observe import Span, Trace, build_trace
from fsm_stage.observe.otlp import otlp_json, post_otlp, shown_endpoint
from fsm_stage.text import visible

__all__ = ["COMMANDS", "trace"]

#: attributes shown in the text tree, in this order (short label first)
_SHOWN = (("stage", "fsm_stage.stage"), ("plan", "fsm_stage.plan_mode"), ("tool", "gen_ai.tool.name"),
          ("kind", "fsm_stage.review.kind"), ("from", "fsm_stage.transition.from"),
          ("to", "fsm_stage.transition.to"), ("outcome", "fsm_stage.review.outcome"),
          ("by", "fsm_stage.review.reviewer"), ("wait", "fsm_stage.review.wait_seconds"),
          ("resumes", "fsm_stage.session.resumes"), ("open", "fsm_stage.open"))


def _read(location: str) -> ReadResult:
    if is_postgres_location(location):
        from fsm_stage.log.postgres import read_postgres

        return read_postgres(location)
    if location != "-":
        check_log_input(Path(location))
    return read_location(location)


def _line(span: Span, depth: int) -> str:
    ms = (span.end_ns - span.start_ns) / 1e6
    shown = " ".join(f"{label}={span.attributes[key]}" for label, key in _SHOWN if key in span.attributes)
    err = f" ERROR({span.error})" if span.error else ""
    return visible(f"{'  ' * depth}{span.name} {ms:.0f}ms {shown}".rstrip() + err)


def _tree(t: Trace) -> list[str]:
    children: dict[str | None, list[Span]] = {}
    for span in t.spans:
        children.setdefault(span.parent_id, []).append(span)
    lines = [f"trace {t.trace_id} (session {visible(t.session_id)}, {len(t.spans)} spans)"]
    stack = [(s, 0) for s in reversed(children.get(None, []))]
    while stack:
        span, depth = stack.pop()
        lines.append(_line(span, depth))
        lines.extend(visible(f"{'  ' * (depth + 1)}* {e.name} "
                             + " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in e.attributes.items()
                                        if k.startswith(("fsm_stage.transition", "fsm_stage.review.applied",
                                                         "gen_ai.tool.name", "fsm_stage.policy"))))
                     for e in span.events)
        stack.extend((c, depth + 1) for c in reversed(children.get(span.span_id, [])))
    return lines


@click.command("trace")
@click.argument("log")
@click.option("--json", "as_json", is_flag=True,
              help="Print the spans and the OTLP/JSON request as one object.")
@click.option("--otlp", "otlp_url", metavar="URL", help="POST the trace to an OTLP/HTTP traces endpoint "
              "(e.g. http://127.0.0.1:4318/v1/traces).")
def trace(log: str, as_json: bool, otlp_url: str | None) -> None:
    """Rebuild the session LOG as one trace (turns, steps, tool calls, reviews, transitions)."""
    if as_json and otlp_url is not None:
        raise click.UsageError("--json and --otlp are exclusive")
    if otlp_url is not None:
        shown = shown_endpoint(otlp_url)  # a bad URL is refused before the log is read
    read = _read(log)
    t = build_trace(read.header, read.events)
    if otlp_url is not None:
        encoding = post_otlp(t, otlp_url)
        click.echo(f"exported {len(t.spans)} spans of trace {t.trace_id} to {visible(shown)} ({encoding})")
    elif as_json:
        spans = [{"name": s.name, "span_id": s.span_id, "parent_id": s.parent_id, "start_ns": s.start_ns,
                  "end_ns": s.end_ns, "attributes": s.attributes, "error": s.error,
                  "events": [{"name": e.name, "time_ns": e.time_ns, "attributes": dict(e.attributes)}
                             for e in s.events]} for s in t.spans]
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "trace_id": t.trace_id,
                               "session_id": t.session_id, "spans": spans, "otlp": otlp_json(t)},
                              ensure_ascii=False))
    else:
        click.echo("\n".join(_tree(t)))


COMMANDS = (trace,)
