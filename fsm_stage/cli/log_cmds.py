"""``fsm-stage state``: fold a session log (DSH or fsm_stage) and print what it says.

``state LOG [--graph GRAPH] [--at SEQ] [--json] [--strict] [--checkpoint-dir DIR]`` prints the
header, the event count, the open turn, plan mode ``{active, pending}``, the current stage
(the graph's initial stage when the log has none and ``--graph`` is given), what the last
``request/header`` told the model, the surface length and any warnings (torn tail, unknown
event types, surface problems, invalid ``plan/mode`` payloads; ``--strict`` refuses such a
log). ``--at SEQ`` folds only events ``0..SEQ``; ``--checkpoint-dir`` keeps projection
checkpoints (``fsm_stage.log.checkpoints``) so a later read folds only new events. LOG and
``--graph`` may be ``-``; a non-seekable LOG is spooled (``fsm_stage.cli.inputs``). A progress
bar (``fsm_stage.cli.progress``) shows on a terminal after half a second. Exit status follows
the CLI convention (``fsm_stage.cli``); docs/cli.md lists the JSON keys."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from fsm_stage.cli import JSON_FORMAT_VERSION
from fsm_stage.cli.inputs import display_name, shown_as, spooled
from fsm_stage.cli.progress import Progress
from fsm_stage.cli.spend_view import spend_line as _spend_line
from fsm_stage.cli.spend_view import spend_report as _spend
from fsm_stage.errors import LogFormatError, UserError
from fsm_stage.log.checkpoints import CheckpointStore, cold_fold
from fsm_stage.log.dsh import ReadResult, read_log
from fsm_stage.log.dsh.opening import BodyScan, gc_paused, open_session_log, scan_body, unknown_types_warning
from fsm_stage.log.dsh.records import LAZY_ROWS, RecordDecoder, unknown_keys_warning
from fsm_stage.log.events import Event, SessionHeader
from fsm_stage.log.projections import (
    OpenTurn,
    PlanModeProblems,
    PlanModeProblemsState,
    PlanView,
    Projection,
    StageProjection,
    StageState,
    ToldProjection,
    routes,
)
from fsm_stage.log.projections.spend import SPEND_FOLD
from fsm_stage.log.surface import LogWriteError, Surface
from fsm_stage.reviews._fold import REVIEW_FOLD, ReviewState, as_fork
from fsm_stage.text import review_route, visible

#: Events folded between two progress updates.
_FOLD_CHUNK = 1 << 16


def snake_keys(obj: Any) -> Any:
    """``obj`` with every dict key turned from camelCase into snake_case, recursively."""
    if isinstance(obj, dict):
        return {re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", k).lower(): snake_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [snake_keys(v) for v in obj]
    return obj


def check_log_input(path: Path, name: str | None = None) -> None:
    """Refuse a LOG that cannot be opened with the convention's one line
    (``NAME: cannot read session log: reason``, a ``UserError``; ``name`` defaults to the path).
    The content is judged by the reader (a session log is read in binary, possibly zstd, so
    not ``read_text_input``)."""
    shown = str(path) if name is None else name
    if path.is_dir():
        raise UserError(f"{shown}: cannot read session log: it is a directory")
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise UserError(f"{shown}: cannot read session log: no such file") from None
    except (OSError, ValueError) as err:
        reason = err.strerror.lower() if isinstance(err, OSError) and err.strerror else str(err)
        raise UserError(f"{shown}: cannot read session log: {reason}") from None


def _read(path: Path, strict: bool, progress: Progress) -> ReadResult:
    progress.phase("reading log", path.stat().st_size)
    return read_log(path, strict=strict, on_progress=progress)


def _initial_stage(graph: str | None) -> tuple[str | None, set[str] | None, Any]:
    if graph is None:
        return None, None, None
    from fsm_stage.cli.inputs import read_text_arg
    from fsm_stage.config import load_config_text

    cfg = load_config_text(read_text_arg(graph, what="stage graph"), display_name(graph))
    if cfg.graph is None:
        raise UserError(
            f"{display_name(graph)}: declares no stage graph (only plan mode); --graph needs a stage graph"
        )
    return cfg.graph.initial_stage, {s.name for s in cfg.graph.stages}, cfg


def _graph_fingerprint(graph: str | None) -> str | None:
    """``"sha256:<hex>"`` of the ``--graph`` file's stage graph (None without ``--graph``)."""
    if graph is None:
        return None
    from fsm_stage.cli.inputs import read_text_arg
    from fsm_stage.config import load_config_text
    from fsm_stage.graph import compile_graph

    cfg = load_config_text(read_text_arg(graph, what="stage graph"), display_name(graph))
    return None if cfg.graph is None else "sha256:" + compile_graph(cfg.graph).fingerprint


def _projections() -> tuple[Projection[Any], ...]:
    return (PlanView(), OpenTurn(), StageProjection(), ToldProjection(), PlanModeProblems(), REVIEW_FOLD,
            SPEND_FOLD)


def _plan_mode_warnings(path: str | None, state: PlanModeProblemsState, *, strict: bool) -> list[str]:
    """One warning per invalid ``plan/mode`` record (the folds keep the last valid record's
    value); with ``strict`` the first one is a ``LogFormatError``."""
    if state.count == 0:
        return []
    where = f"{path}: " if path else ""
    if strict:
        more = f" (and {state.count - 1} more)" if state.count > 1 else ""
        raise LogFormatError(f"{where}invalid plan/mode record: {state.first[0]}{more}")
    warnings = [f"{where}{p}; plan mode keeps the last valid plan/mode record" for p in state.first]
    if state.count > len(state.first):
        warnings.append(f"{state.count - len(state.first)} more invalid plan/mode record(s)")
    return warnings


def _assemble(
    header: SessionHeader,
    states: Mapping[str, Any],
    *,
    total: int,
    folded: int,
    at: int | None,
    graph: str | None,
    surface: dict[str, Any] | None,
    warnings: list[str],
    torn: int | None,
    unknown: Mapping[str, int],
    source: str | None,
    strict: bool,
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    plan, turn, stage, told = PlanView(), OpenTurn(), StageProjection(), ToldProjection()
    warnings.extend(_plan_mode_warnings(source, states[PlanModeProblems.key], strict=strict))
    initial, names, cfg = _initial_stage(graph)
    stage_state: StageState = states[stage.key]
    current: str | None
    stage_source: str | None
    if stage_state.stage is not None:
        current, stage_source = stage_state.stage, "log"
        if names is not None and current not in names:
            warnings.append(f"stage {current!r} from the log is not a stage of {graph}")
    else:
        current, stage_source = initial, ("graph initial" if initial is not None else None)
    reviews: ReviewState = as_fork(states[REVIEW_FOLD.key], header.seed_length)
    review_view = REVIEW_FOLD.view(reviews)
    recorded = review_view["graph"]
    fp = _graph_fingerprint(graph)
    if fp is not None and recorded is not None and (was := recorded["fingerprint"]) != fp:
        warnings.append(f"the log was recorded with graph {recorded['name']!r} {was[:19]}…, "
                        f"{graph} is {fp[:19]}…: the graph changed since (GraphChangedError on resume)")
    plan_view = snake_keys(plan.view(states[plan.key]))
    plan_view["pending_exit"] = review_view["pending"]["plan"] is not None
    from fsm_stage.reviews._visits import stale_approvals
    stale = stale_approvals(reviews, states[SPEND_FOLD.key])  # budget reviews of an ended visit
    out = {
        "format_version": JSON_FORMAT_VERSION,
        "header": snake_keys({k: v for k, v in header.to_json(absent_as_null=True).items() if k != "type"}),
        "events": total,
        "folded_events": folded,
        "at": at,
        "turn": snake_keys(turn.view(states[turn.key])),
        "plan_mode": plan_view,
        "stage": {
            "current": current,
            "pending": review_view["pending"]["stage"],
            "source": stage_source,
            "at_last_header": stage_state.stage_at_last_header,
            "has_stage_prompt": stage_state.has_stage_prompt,
        },
        "last_header": snake_keys(told.view(states[told.key])),
        "reviews": {"open": review_view["open"], "approved": [
            {**e, "stale": e["id"] in stale} for e in review_view["approved"]]},
        "graph": recorded,
        "surface": surface,
        "torn_tail_offset": torn,
        "unknown_types": dict(unknown),
        "warnings": warnings,
    }
    out["spend"] = _spend(states[SPEND_FOLD.key], cfg, current)
    tools = _tool_policy(cfg, current, bool(plan.view(states[plan.key]).get("active")))
    if tools is not None:  # the tool policy of the current stage (and plan mode)
        out["stage"]["tools"] = tools
    if checkpoint is not None:
        out["checkpoint"] = checkpoint
    return out


def _tool_policy(cfg: Any, stage: str | None, plan_active: bool) -> str | None:
    """The tool policy in effect (``fsm_stage.policy.PolicyState.describe``); None without
    ``--graph`` or when nothing is restricted."""
    if cfg is None or cfg.graph is None or stage is None:
        return None
    from fsm_stage.policy._gate import PolicyState, plan_policy, stage_policy

    state = PolicyState(stage, plan_active, stage_policy(cfg.graph, stage),
                        plan_policy(cfg.plan_mode, cfg.graph), cfg.graph)
    return state.describe() if state.restricted else None


def _fold_all(
    events: list[Event] | tuple[Event, ...], progress: Progress, warnings: list[str]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every projection's state and the surface summary (None, with a warning, when the surface
    fold fails), reporting ``folding`` progress in chunks of ``_FOLD_CHUNK`` events."""
    projections = _projections()
    n = len(events)
    progress.phase("folding", n * (len(projections) + 1))
    done = 0
    states: dict[str, Any] = {}
    for p in projections:
        state, apply = p.init(), p.apply
        for lo in range(0, n, _FOLD_CHUNK):
            for ev in events[lo : lo + _FOLD_CHUNK]:
                state = apply(state, ev)
            progress(done + min(lo + _FOLD_CHUNK, n))
        states[p.key] = state
        done += n
    s = Surface()
    surface: dict[str, Any] | None
    try:
        for lo in range(0, n, _FOLD_CHUNK):
            s.extend(events[lo : lo + _FOLD_CHUNK])
            progress(done + min(lo + _FOLD_CHUNK, n))
        surface = {
            "nodes": len(s),
            "replace_generation": s.replace_generation,
            "head_is_system": s.head_is_system,
        }
    except LogWriteError as err:
        surface = None
        warnings.append(f"surface fold failed: {err}")
    progress.close()
    return states, surface


def state_report(
    res: ReadResult,
    *,
    at: int | None = None,
    graph: str | None = None,
    strict: bool = False,
    source: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The ``state`` command's data as a JSON-able dict (see module docstring).

    Raises ``UserError`` when ``at`` is past the last seq or the graph cannot be loaded, and
    (``strict``) ``LogFormatError`` for a ``plan/mode`` record with an invalid payload, which is
    otherwise a warning (B105–B108); ``source`` (the log's path) prefixes those messages;
    ``progress`` gets a ``folding`` phase counting events times folds.
    """
    total = len(res.events)
    if at is not None and at >= total:
        last = "the log has no events" if total == 0 else f"the last seq is {total - 1}"
        raise UserError(f"--at {at} is past the end of the log ({last})")
    events = res.events if at is None else res.events[: at + 1]
    warnings = list(res.warnings)
    bar = Progress(0, enabled=False) if progress is None else progress
    states, surface = _fold_all(events, bar, warnings)
    return _assemble(
        res.header,
        states,
        total=total,
        folded=len(events),
        at=at,
        graph=graph,
        surface=surface,
        warnings=warnings,
        torn=res.torn_tail_offset,
        unknown=res.unknown_types,
        source=source,
        strict=strict,
    )


def streamed_report(
    path: Path,
    *,
    at: int | None = None,
    graph: str | None = None,
    strict: bool = False,
    source: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """``state_report`` of the log file at ``path`` in one streaming pass.

    Reads like ``read_log`` (same decoder, torn-tail and corruption rules, warnings) but folds
    every event into the projections and the surface as it is decoded, so no event list is
    ever held: memory stays flat at any log size. Events after ``at`` are still decoded and
    counted (the report's ``events``; ``--at`` past the end is the same ``UserError``).
    """
    name = str(path) if source is None else source
    opened = (session := open_session_log(path, strict=strict)).log
    fh, warnings = opened.stream, opened.warnings
    bar = Progress(0, enabled=False) if progress is None else progress
    bar.phase("reading and folding log", path.stat().st_size)
    projections = _projections()
    states: list[Any] = [p.init() for p in projections]
    applies = [p.apply for p in projections]
    # Each event goes only to the projections whose ``READS`` name its type (all of them, and
    # the surface, when it has a surface op); packed chunk rows and plain events of types no
    # projection reads are checked, then skipped by their span (never built).
    route = routes(projections)
    by_type, every = route.by_type, route.every
    surface: Surface | None = Surface()
    surface_error: str | None = None
    last = -1 if at is None else at
    total = 0
    with fh:
        decoder = RecordDecoder(source=str(path), strict=strict, lazy_packed=route.skip_packed,
                                unread=route.unread)
        scan = BodyScan(offset=session.body_start, line_no=1, warnings=warnings)
        with gc_paused():
            for n, (off, _raw, evs) in enumerate(scan_body(iter(fh), decoder, scan), 1):
                if n % 4096 == 0:
                    bar(off)
                total += len(evs)
                if type(evs) in LAZY_ROWS or (at is not None and evs[0].seq > last):
                    continue
                for ev in evs:
                    if at is not None and ev.seq > last:
                        break
                    if by_type is None or ev.surface_op is not None or ev.source_event_seqs is not None:
                        targets = every
                        if surface is not None:
                            try:
                                surface.apply(ev)
                            except LogWriteError as err:
                                surface, surface_error = None, str(err)
                    else:
                        targets = by_type.get(ev.type, ())
                    for i in targets:
                        states[i] = applies[i](states[i], ev)
        bar(scan.offset)
    if at is not None and at >= total:
        tail = "the log has no events" if total == 0 else f"the last seq is {total - 1}"
        raise UserError(f"--at {at} is past the end of the log ({tail})")
    torn = scan.offset if opened.torn and scan.torn_tail_offset is None else scan.torn_tail_offset
    if decoder.unknown:
        warnings.append(unknown_types_warning(str(path), decoder.unknown))
    if decoder.unknown_keys:  # the same warnings, in the same order, as ``read_log``
        warnings.append(unknown_keys_warning(str(path), decoder))
    warnings = list(warnings)
    summary: dict[str, Any] | None = None
    if surface is not None:
        summary = {"nodes": len(surface), "replace_generation": surface.replace_generation,
                   "head_is_system": surface.head_is_system}
    else:
        warnings.append(f"surface fold failed: {surface_error}")
    return _assemble(
        session.header,
        {p.key: st for p, st in zip(projections, states, strict=True)},
        total=total,
        folded=total if at is None else at + 1,
        at=at,
        graph=graph,
        surface=summary,
        warnings=warnings,
        torn=torn,
        unknown=dict(decoder.unknown),
        source=name,
        strict=strict,
    )


def checkpointed_report(
    path: Path,
    store_dir: Path,
    *,
    graph: str | None = None,
    strict: bool = False,
    source: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The ``state`` data from a checkpointed cold read (``cold_fold``): seeks to the last
    checkpoint's watermark and folds only newer events, then saves a fresh checkpoint in
    ``store_dir``. The surface is not folded in this mode (it needs every node), so
    ``surface`` is None; ``checkpoint`` says whether the read resumed and from which seq.
    """
    bar = Progress(0, enabled=False) if progress is None else progress
    bar.phase("reading and folding log", path.stat().st_size)
    res = cold_fold(path, _projections(), store=CheckpointStore(store_dir), strict=strict, on_progress=bar)
    bar.close()
    note = {
        "resumed_from": res.resumed_from,
        "events_folded": res.events_applied,
        "note": res.checkpoint_note,
    }
    return _assemble(
        res.header,
        res.states,
        total=res.last_seq + 1,
        folded=res.last_seq + 1,
        at=None,
        graph=graph,
        surface=None,
        warnings=list(res.warnings),
        torn=res.torn_tail_offset,
        unknown=res.unknown_types,
        source=str(path) if source is None else source,
        strict=strict,
        checkpoint=note,
    )


def _dash(v: Any) -> str:
    return "-" if v is None else str(v)


def _human(path: str, r: dict[str, Any]) -> str:
    """The state report as text; each line through ``visible`` (a log is any file: no logged
    string — session id, cwd, stage, warnings — may carry an escape sequence to the terminal)."""
    return "\n".join(visible(line) for line in _human_lines(path, r))


def _human_lines(path: str, r: dict[str, Any]) -> list[str]:
    h = r["header"]
    lines = [
        f"log:          {path}",
        f"session:      {h['id']}",
        f"  cwd {_dash(h['cwd'])}, origin {_dash(h['origin'])}, depth {h['delegation_depth']}, "
        f"parent {_dash(h['parent_session'])}, version {_dash(h['version'])}",
    ]
    if r["at"] is None:
        span = f" (seq 0–{r['events'] - 1})" if r["events"] else ""
        lines.append(f"events:       {r['events']}{span}")
    else:
        lines.append(f"events:       {r['events']}; folded {r['folded_events']} (seq 0–{r['at']}, --at)")
    t = r["turn"]
    lines.append(f"turn:         {'open (turn ' + _dash(t['turn']) + ')' if t['open'] else 'idle'}")
    pm = r["plan_mode"]
    lines.append(
        f"plan mode:    {'active' if pm['active'] else 'inactive'}"
        f"{', change pending' if pm['pending'] else ''}  (active={str(pm['active']).lower()}, "
        f"pending={str(pm['pending']).lower()})"
    )
    st = r["stage"]
    if st["current"] is None:
        lines.append("stage:        - (no stage record; pass --graph to use the graph's initial stage)")
    else:
        lines.append(
            f"stage:        {st['current']}"
            + (" (graph initial; no stage record)" if st["source"] == "graph initial" else "")
            + (f", approved switch to {st['pending']} pending (applied at the next step)"
               if st["pending"] else "")
        )
    if st.get("tools") is not None:
        lines.append(f"tools:        {st['tools']}")
    for key, label in (("stage", "stage spend:"), ("plan_mode", "plan spend:")):
        sp = r.get("spend", {}).get(key)
        if sp is not None:
            lines.append(f"{label:<14}{_spend_line(sp)}")
    if pm["pending_exit"]:
        lines.append("              approved plan-mode exit pending (applied at the next step)")
    for rv in r["reviews"]["open"]:
        where = review_route(rv["kind"], rv["from"], rv["target"], arrow="->")
        lines.append(f"open review:  {rv['id']} ({rv['kind']}: {where}, since seq {rv['since_seq']}); "
                     "answer with fsm-stage review")
    for rv in r["reviews"].get("approved", ()):
        when = "never applied: its stage visit ended" if rv.get("stale") else "applied at the next step"
        lines.append(f"approved:     {rv['id']} ({rv['kind']}: {rv['option']}); {when}")
    if r["graph"] is not None:
        lines.append(f"graph:        {r['graph']['name']} {r['graph']['fingerprint']}")
    told = r["last_header"]
    if told is None:
        lines.append("last header:  - (no request/header yet)")
    else:
        lines.append(
            f"last header:  seq {told['seq']} ({_dash(told['reason'])}): plan mode "
            f"{'active' if told['plan_active'] else 'inactive'}, stage {_dash(told['stage'])}"
        )
    sf = r["surface"]
    lines.append(
        "surface:      - (not folded in a checkpointed read)"
        if sf is None and "checkpoint" in r
        else "surface:      -"
        if sf is None
        else f"surface:      {sf['nodes']} node{'s' if sf['nodes'] != 1 else ''}"
        f" ({sf['replace_generation']} replace{'s' if sf['replace_generation'] != 1 else ''})"
    )
    cp = r.get("checkpoint")
    if cp is not None:
        lines.append(
            f"checkpoint:   resumed after seq {cp['resumed_from']}, folded {cp['events_folded']} new event(s)"
            if cp["resumed_from"] is not None
            else f"checkpoint:   full fold of {cp['events_folded']} event(s) ({cp['note']}); checkpoint saved"
        )
    if r["warnings"]:
        lines.append("warnings:")
        lines.extend(f"  - {w}" for w in r["warnings"])
    return lines


@click.command()
@click.argument("log", type=click.Path(allow_dash=True))
@click.option(
    "--graph",
    "graph",
    type=click.Path(allow_dash=True),
    default=None,
    help="Stage-graph YAML ('-': stdin); its initial stage is shown when the log has no stage record.",
)
@click.option(
    "--at",
    "at",
    type=click.IntRange(min=0),
    default=None,
    metavar="SEQ",
    help="Fold only events 0..SEQ (time travel).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--strict", is_flag=True, help="Refuse unknown event types without ignorable:true, as DSH does."
)
@click.option(
    "--checkpoint-dir",
    "checkpoint_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep projection checkpoints here: later reads seek to the tail (no surface fold; not with --at).",
)
def state(
    log: str, graph: str | None, at: int | None, as_json: bool, strict: bool, checkpoint_dir: Path | None
) -> None:
    """Fold a session log and print its state (header, turn, plan mode, stage, surface).

    LOG may be '-' (standard input), a pipe or a FIFO: it is spooled to a temporary file.
    Exit 0 on success, 1 for invalid input (unreadable LOG or GRAPH, not a session log,
    corruption, --at past the end), 2 for usage errors (unknown option, --at -1).
    """
    from fsm_stage.log.postgres import is_postgres_location

    if is_postgres_location(log):  # LOG is postgresql://…?session=ID (read from the store)
        if checkpoint_dir is not None:
            raise click.UsageError("--checkpoint-dir works on files, not on a PostgreSQL location")
        from fsm_stage.log.postgres import read_postgres, redact

        name = redact(log)
        res = read_postgres(log, strict=strict)
        report = state_report(res, at=at, graph=graph, strict=strict, source=name)
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": name, **report},
                              ensure_ascii=False, indent=2) if as_json else _human(name, report))
        return
    if log == "-" and graph == "-":
        raise click.UsageError("LOG and --graph cannot both be '-' (standard input)")
    if checkpoint_dir is not None and at is not None:
        raise click.UsageError("--at folds a prefix and cannot use --checkpoint-dir")
    name = display_name(log)
    with Progress(0) as progress, spooled(log) as path:
        check_log_input(path, name)
        if checkpoint_dir is not None:
            report = checkpointed_report(
                path, checkpoint_dir, graph=graph, strict=strict, source=name, progress=progress
            )
        else:
            report = streamed_report(path, at=at, graph=graph, strict=strict, source=name,
                                     progress=progress)
        report["warnings"] = shown_as(report["warnings"], path, log)  # <stdin>, not the spool
    if as_json:
        click.echo(json.dumps({"format_version": JSON_FORMAT_VERSION, "path": name, **report},
                              ensure_ascii=False, indent=2))
    else:
        click.echo(_human(name, report))


@click.command()
@click.argument("log", type=click.Path(dir_okay=False))
def repair(log: str) -> None:
    """Make LOG writable again after a damaged line, losing no intact line.

    Drops the damaged line alone when the rest then reads cleanly, else cuts the log at it;
    every removed byte is saved first to LOG.damaged-<ms> (docs/hardening.md). Refused while
    another writer holds LOG.
    """
    from fsm_stage.log.jsonl import JsonlLog

    try:
        click.echo(JsonlLog.repair(log))
    except FileNotFoundError:
        raise UserError(f"{log}: no such session log") from None


COMMANDS = [state, repair]
