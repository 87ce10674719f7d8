"""``fsm-stage db init``, ``export`` and ``import``: the PostgreSQL store's commands.

``db init DSN`` creates or migrates the fsm_stage schema (``fsm_stage.log.pg_schema``) in the
database at DSN (a libpq URL; a ``session`` parameter is ignored). ``export LOCATION -o
FILE.jsonl [--force]`` writes a stored session as a DSH JSONL file (atomically);
``import FILE.jsonl LOCATION [--force]`` stores a JSONL session log in PostgreSQL, the same
bytes either way (``fsm_stage.log.pg_transfer``). Exit 0 on success, 1 for invalid input
(one line: unreachable server, missing psycopg, no or newer schema, unknown session, an
existing output or session without ``--force``), 2 for usage errors.
"""

from __future__ import annotations

from pathlib import Path

import click

from fsm_stage.errors import UserError
from fsm_stage.fileio import atomic_write, output_error


def _pg_location(location: str, what: str) -> str:
    from fsm_stage.log.postgres import SCHEMES

    scheme = location.partition(":")[0].lower()
    if scheme not in SCHEMES:
        raise UserError(f"{what} {location!r} is not a PostgreSQL URL (postgresql://USER@HOST:PORT/DB?session=ID)")
    return location


@click.group("db")
def db() -> None:
    """The PostgreSQL session store's database (schema set-up)."""


@db.command("init")
@click.argument("dsn")
def db_init(dsn: str) -> None:
    """Create or migrate the fsm_stage schema in the database at DSN (postgresql://…)."""
    from fsm_stage.errors import LogFormatError
    from fsm_stage.log.pg_connect import connect, db_error, psycopg_module, redact, split_location
    from fsm_stage.log.pg_schema import migrate

    conninfo, _ = split_location(_pg_location(dsn, "DSN"))
    where = redact(conninfo)
    psycopg = psycopg_module()
    with connect(conninfo) as conn:
        try:
            old, new = migrate(conn)
        except LogFormatError as err:
            raise LogFormatError(f"{where}: {err}") from None
        except psycopg.Error as err:
            raise db_error(where, "db init", err, conn) from None
    if old is None:
        click.echo(f"{where}: created the fsm_stage schema (version {new})")
    elif old == new:
        click.echo(f"{where}: fsm_stage schema version {new} is up to date")
    else:
        click.echo(f"{where}: migrated the fsm_stage schema from version {old} to {new}")


@click.command("export")
@click.argument("location")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The JSONL file to write (DSH session-log format).")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
def export_cmd(location: str, output: Path, force: bool) -> None:
    """Write the session at LOCATION (postgresql://…?session=ID) to a JSONL file, byte for byte."""
    from fsm_stage.log.pg_transfer import export_jsonl

    data = export_jsonl(_pg_location(location, "LOCATION"))
    if output.exists() and not force:
        raise UserError(f"{output}: already exists; pass --force to replace it")
    try:
        atomic_write(output, data)
    except OSError as err:
        raise output_error(output, err, what="session log") from None
    lines = data.count(b"\n")
    click.echo(f"{output}: wrote {lines} line(s), {len(data)} bytes")


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("location")
@click.option("--force", is_flag=True, help="Replace the session when LOCATION already has it.")
def import_cmd(file: Path, location: str, force: bool) -> None:
    """Store the JSONL session log FILE at LOCATION (postgresql://…[?session=ID]), byte for byte."""
    from fsm_stage.cli.log_cmds import check_log_input
    from fsm_stage.log.pg_transfer import import_jsonl
    from fsm_stage.log.postgres import redact

    _pg_location(location, "LOCATION")
    check_log_input(file)
    res = import_jsonl(file.read_bytes(), location, source=str(file), replace=force)
    for warning in res.warnings:
        click.echo(f"fsm-stage: warning: {warning}", err=True)
    click.echo(f"{redact(location)}: imported session {res.session!r}: "
               f"{res.events} event(s) in {res.rows} row(s)")


COMMANDS = [db, export_cmd, import_cmd]
