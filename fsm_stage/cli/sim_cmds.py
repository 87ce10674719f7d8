"""``fsm-stage simulate`` and ``fsm-stage scenario`` (the simulator's command line).

``simulate SCENARIO... [--log OUT.jsonl] [--json] [--graph OVERRIDE] [--cwd DIR] [--full]``
    runs scenario files and prints, per model request, what the model sees and the
    prompt-cache effect; exits 1 when an ``expect:`` block fails (listing each failure).
``scenario LOG [--graph GRAPH] [--id ID]``
    prints a scenario (YAML, on stdout) replaying a recorded DSH session log.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from fsm_stage.constants import GOTO_STAGE, STAGE_SOURCE_KINDS
from fsm_stage.errors import UserError
from fsm_stage.log.dsh import read_log
from fsm_stage.resources import data_dir
from fsm_stage.scenario import ModelStep, SessionSettings, dump_scenario, load_scenario, steps_from_events
from fsm_stage.simulate import prepare, render_human, simulate


@click.command("simulate")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the DSH-shaped session log (JSONL) here (parent folders are created). "
                   "Refused while another writer holds the log, and for the scenario, its graph or any "
                   "existing file that is not a session log. One scenario only.")
@click.option("--force", is_flag=True, help="Replace an existing session log at the --log path.")
@click.option("--json", "as_json", is_flag=True, help="One JSON record per model request on stdout.")
@click.option("--graph", type=click.Path(dir_okay=False, path_type=Path),
              help="Run under this stage-graph file instead of the scenario's `graph`.")
@click.option("--cwd", type=click.Path(file_okay=False, path_type=Path),
              help="Session working directory (handoff documents land here); default: the "
                   "scenario's session.cwd, else a temporary directory.")
@click.option("--full", is_flag=True, help="Print every text in full instead of one line each.")
def simulate_cmd(scenarios: tuple[Path, ...], log_path: Path | None, force: bool, as_json: bool,
                 graph: Path | None, cwd: Path | None, full: bool) -> None:
    """Run SCENARIO (or several) and show what the model sees at every request.

    Per request: turn/step, stage, plan mode, system sections (order, name, tokens), runtime
    context entries, tools, the messages (kept from the previous request / new), and the
    prompt prefix reused from the previous request. Exits 1 when an expectation fails.
    Several scenarios run one after the other (a regression suite); all the scenario files are
    parsed before any runs.
    """
    if log_path is not None and len(scenarios) > 1:
        raise click.UsageError("--log takes one scenario")
    parsed, problems = [], []
    for path in scenarios:  # every file's mistakes are reported before anything runs
        try:
            parsed.append(load_scenario(path))
        except UserError as err:
            problems.append(str(err))
    for scenario in parsed:  # and their names checked against the graph each one runs under
        try:
            prepare(scenario, graph=graph)
        except UserError as err:
            problems.append(str(err))
    if problems:
        raise UserError("\n".join(problems))
    failed = 0
    for k, scenario in enumerate(parsed):
        work = cwd / scenario.session_id if cwd is not None and len(parsed) > 1 else cwd
        result = simulate(scenario, graph=graph, log_path=log_path, replace_log=force, cwd=work)
        if as_json:
            for record in result.records:
                click.echo(json.dumps({"scenario": scenario.path, **record.to_json()}, ensure_ascii=False))
            for warning in result.warnings:
                click.echo(f"fsm-stage: warning: {warning}", err=True)
            for failure in result.failures:
                click.echo(failure.line(), err=True)
        else:
            if k:
                click.echo("")
            click.echo(render_human(result, full=full))
        failed += bool(result.failures)
    if len(parsed) > 1 and not as_json:
        click.echo(f"\n{len(parsed) - failed} of {len(parsed)} scenarios passed")
    if failed:
        sys.exit(1)


def _default_graph(steps: list[object], stage_records: bool) -> Path:
    """The shipped graph a replay runs under by default: feature-work when the log used the stage
    switch, the plan-mode seed otherwise."""
    uses_stages = stage_records or any(
        isinstance(s, ModelStep) and any(c.tool == GOTO_STAGE for c in s.calls) for s in steps)
    name = "feature-work.yaml" if uses_stages else "seed-plan-mode.yaml"
    return data_dir("stage_graphs") / name


@click.command("scenario")
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--graph", type=str, default=None,
              help="The `graph:` to write (relative to where you save the scenario). Default: the "
                   "shipped feature-work graph when the log used the stage switch, else the plan-mode seed.")
@click.option("--id", "session_id", type=str, default=None, help="Session id (default: the log's).")
def scenario_cmd(log: Path, graph: str | None, session_id: str | None) -> None:
    """Turn a recorded session LOG into a scenario on stdout.

    Keeps user prompts, slash commands, each model answer with its tool calls, and each call's
    recorded outcome (review answers for exit_plan_mode / goto_stage, canned results for other
    tools), so `fsm-stage simulate scenario.yaml --graph NEW.yaml` re-runs the session under a
    changed graph.
    """
    res = read_log(log)
    for warning in res.warnings:
        click.echo(f"fsm-stage: warning: {warning}", err=True)
    steps = steps_from_events(res.events)
    if not steps:
        raise click.ClickException(f"{log}: no user prompts, commands or model answers to replay")
    stage_records = any(
        ev.type == "user/message" and isinstance(ev.data, dict)
        and isinstance(ev.data.get("source"), dict) and ev.data["source"].get("kind") in STAGE_SOURCE_KINDS
        for ev in res.events)
    graph_text = graph if graph is not None else str(_default_graph(list(steps), stage_records))
    session = SessionSettings(id=session_id if session_id is not None else res.header.id,
                              subagent=res.header.is_subagent)
    click.echo(dump_scenario(graph_text, session, steps, description=f"Replay of {log.name}"), nl=False)


COMMANDS = [simulate_cmd, scenario_cmd]
