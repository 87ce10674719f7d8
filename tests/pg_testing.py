"""A throwaway PostgreSQL cluster for tests and benchmarks (never for production data).

``TempCluster.start()`` runs Debian's server binaries (``/usr/lib/postgresql/*/bin``) as the
``postgres`` OS user (the server refuses root): ``initdb`` in a fresh temporary folder owned
by that user, then ``pg_ctl start`` listening only on a Unix socket in that folder
(``listen_addresses=''``). ``stop()`` stops the server and removes the folder. The tests'
session fixture and ``bench/bench_postgres.py`` share this one helper.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

PG_USER = "postgres"
PG_PORT = 5432


BIN_ENV = "FSM_STAGE_PG_BIN"
"""Environment variable naming the folder of ``initdb``/``pg_ctl`` (overrides the Debian search)."""


def server_bin_dir() -> Path | None:
    """The folder in ``$FSM_STAGE_PG_BIN`` when set, else the newest
    ``/usr/lib/postgresql/<N>/bin``, holding ``initdb`` and ``pg_ctl``; None when there is none."""
    if os.environ.get(BIN_ENV):
        bindir = Path(os.environ[BIN_ENV])
        return bindir if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists() else None
    found = []
    for initdb in glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        bindir = Path(initdb).parent
        if (bindir / "pg_ctl").exists():
            try:
                found.append((int(bindir.parent.name), bindir))
            except ValueError:
                continue
    return max(found)[1] if found else None


def unavailable_reason() -> str | None:
    """Why a throwaway cluster cannot start here (None when it can)."""
    if server_bin_dir() is None:
        where = os.environ.get(BIN_ENV) or "/usr/lib/postgresql/*/bin"
        return f"PostgreSQL server binaries not found ({where}/initdb; apt-get install postgresql)"
    try:
        import pwd

        pwd.getpwnam(PG_USER)
    except KeyError:
        return f"no {PG_USER!r} OS user to run the server as (useradd {PG_USER})"
    if shutil.which("runuser") is None and os.geteuid() == 0:
        return "runuser not found (needed to run the server as the postgres user)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'fsm_stage[postgres]')"
    return None


class TempCluster:
    """A running throwaway cluster; ``dsn`` is its libpq URL (``postgresql://postgres@/postgres?host=…``).

    ``fsync=False`` turns the server's fsync off (fast tests; benchmarks keep it on).
    Raises ``RuntimeError`` (with the server's output) when initdb or start fails.
    """

    def __init__(self, folder: Path, bindir: Path) -> None:
        self.folder = folder
        self.bindir = bindir
        self.data = folder / "data"
        self.opts = ""

    @property
    def dsn(self) -> str:
        """The libpq URL of the ``postgres`` database over the cluster's Unix socket."""
        return f"postgresql://{PG_USER}@/postgres?host={self.folder}&port={PG_PORT}"

    def url(self, session: str, db: str = "postgres") -> str:
        """The ``open_log`` location of ``session`` in database ``db``."""
        return f"postgresql://{PG_USER}@/{db}?host={self.folder}&port={PG_PORT}&session={session}"

    @classmethod
    def start(cls, *, fsync: bool = False) -> TempCluster:
        """initdb + start; see the class docs."""
        bindir = server_bin_dir()
        if bindir is None:
            raise RuntimeError(unavailable_reason() or "no PostgreSQL server binaries")
        folder = Path(tempfile.mkdtemp(prefix="fsm-pg-"))
        os.chmod(folder, 0o755)
        if os.geteuid() == 0:
            shutil.chown(folder, PG_USER, PG_USER)
        self = cls(folder, bindir)
        try:
            self._run(str(bindir / "initdb"), "-D", str(self.data), "-U", PG_USER, "--auth=trust",
                      "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
            opts = f"-k {folder} -c listen_addresses='' -p {PG_PORT} -c max_connections=60"
            if not fsync:
                opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            self.opts = opts
            self._run(str(bindir / "pg_ctl"), "-D", str(self.data), "-l", str(folder / "server.log"),
                      "-o", opts, "-w", "-t", "60", "start")
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, *argv: str) -> None:
        cmd = list(argv)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", PG_USER, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=self.folder, check=False)
        if proc.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr.strip()} {tail}")

    def stop_server(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def start_server(self) -> None:
        """Start the server again after ``stop_server`` (same data, socket and options)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"),
                  "-o", self.opts, "-w", "-t", "60", "start")

    def restart(self) -> None:
        """Restart the server (fast): every open connection is cut, the data stays."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"),
                  "-m", "fast", "-w", "-t", "60", "restart")

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove the folder; idempotent."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> TempCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
