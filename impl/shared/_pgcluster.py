"""A throwaway PostgreSQL cluster: ``initdb`` and ``pg_ctl`` in a temporary folder.

For tests, ``settled verify --store temp-postgres`` and the bench.
:func:`find_binaries` looks for the server binaries: in ``$SETTLED_PG_BIN``
alone when it is set, else next to ``initdb`` on the PATH, then in
``/usr/lib/postgresql/<version>/bin``, newest first.
:class:`Cluster` initialises a data folder, starts the server on a Unix
socket inside the same folder (no TCP port, nothing to collide with), creates
the ``settled`` database and hands out its URL; :meth:`Cluster.stop` stops the
server and deletes the folder.

PostgreSQL refuses to run as root, so when this process is root the folder is
given to the ``postgres`` user (or ``$SETTLED_PG_USER``) and every server
command runs through ``runuser -u <user> --``. The server keeps
``fsync=on`` and ``synchronous_commit=on``: the commits are what the store
relies on and what the bench measures (``initdb --no-sync`` only skips
syncing the template files it writes once). ``durable=False`` turns the
server's ``fsync`` off, for test campaigns of thousands of commits on a
shared disk: a process killed with ``kill -9`` loses nothing either way (the
server survives it), only a power cut would, and no test cuts the power.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final
from urllib.parse import quote

__all__ = ["Cluster", "ClusterError", "find_binaries"]

DATABASE: Final = "settled"
SUPERUSER: Final = "settled"
START_TIMEOUT: Final = 60


class ClusterError(RuntimeError):
    """The throwaway cluster could not be set up; the message names the step and its output."""


def find_binaries() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None if there is none."""
    wanted = os.environ.get("SETTLED_PG_BIN")
    candidates: list[Path] = [Path(wanted)] if wanted else []
    if wanted:  # said explicitly: that folder or nothing, never a silent fallback
        return candidates[0] if _complete(candidates[0]) else None
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: -int(p.name))
        candidates += [v / "bin" for v in versions]
    return next((folder for folder in candidates if _complete(folder)), None)


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres"))


class Cluster:
    """One throwaway cluster; use as a context manager or call start()/stop()."""

    def __init__(self, binaries: Path | None = None, directory: Path | None = None,
                 max_connections: int = 100, durable: bool = True) -> None:
        found = binaries or find_binaries()
        if found is None:
            raise ClusterError("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found; "
                               "install PostgreSQL or set SETTLED_PG_BIN to their folder")
        self.binaries = found
        self._parent = directory
        self.max_connections = max_connections
        self.durable = durable
        self.folder: Path | None = None
        self._user = self._server_user()

    @staticmethod
    def _server_user() -> str | None:
        if os.geteuid() != 0:
            return None
        name = os.environ.get("SETTLED_PG_USER", "postgres")
        try:
            pwd.getpwnam(name)
        except KeyError as exc:
            raise ClusterError(f"running as root and there is no user {name!r} to run the server "
                               "as; create it or set SETTLED_PG_USER to a non-root user") from exc
        return name

    @property
    def data(self) -> Path:
        return self._folder / "data"

    @property
    def sockets(self) -> Path:
        return self._folder / "sock"

    @property
    def _folder(self) -> Path:
        if self.folder is None:
            raise ClusterError("the cluster is not started")
        return self.folder

    def url(self, database: str = DATABASE) -> str:
        """The URL of ``database`` on this cluster, over its Unix socket."""
        return (f"postgresql://{SUPERUSER}@/{database}"
                f"?host={quote(str(self.sockets), safe='')}")

    def _run(self, step: str, *args: str) -> None:
        command = [str(self.binaries / args[0]), *args[1:]]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT,
                              check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ClusterError(f"PostgreSQL {step} failed (exit {done.returncode}): "
                               f"{' | '.join(tail)}")

    def start(self) -> str:
        """initdb, start the server, create the database; returns its URL."""
        from ._pg import PostgresMissing, psycopg_module

        try:  # before initdb: without psycopg the cluster could not be used
            psycopg = psycopg_module()
        except PostgresMissing as exc:
            raise ClusterError(str(exc)) from None
        self.folder = Path(tempfile.mkdtemp(prefix="settled-pg-", dir=self._parent))
        try:
            self.sockets.mkdir()
            if self._user is not None:
                entry = pwd.getpwnam(self._user)
                for path in (self.folder, self.sockets):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
            self._run("initdb", "initdb", "-D", str(self.data), "-U", SUPERUSER, "-A", "trust",
                      "-E", "UTF8", "--no-locale", "--no-sync")
            fsync = "on" if self.durable else "off"
            options = (f"-k {self.sockets} -c listen_addresses='' -c fsync={fsync} "
                       f"-c synchronous_commit=on -c max_connections={self.max_connections}")
            self._run("start", "pg_ctl", "-D", str(self.data), "-o", options,
                      "-l", str(self._folder / "server.log"), "-w", "-t", str(START_TIMEOUT),
                      "start")
            with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {DATABASE}")
        except BaseException:
            self.stop()
            raise
        return self.url()

    def stop(self) -> None:
        """Stop the server (if it runs) and delete the folder; safe to call twice."""
        if self.folder is None:
            return
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("stop", "pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
