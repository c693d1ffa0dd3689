"""Which store the commands run against: SQLite files (the default) or PostgreSQL.

``--store`` (or ``$SETTLED_STORE`` when the option is not given) takes:

- nothing, or ``sqlite``: temporary SQLite files, as always;
- a ``postgresql://`` URL: an existing server; each lockstep run gets a fresh
  schema in that database and empties it afterwards (the account needs
  ``CREATE`` on the database);
- ``temp-postgres``: start a throwaway cluster for the command (``initdb`` and
  ``pg_ctl`` in a temporary folder, see ``impl/shared/_pgcluster.py``), stopped and
  deleted afterwards.

A value that is none of these, an unreachable server, or missing server
binaries are one-line errors before any work starts (exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from settled.impl.shared._pg import PostgresMissing, is_url, psycopg_module, redact

__all__ = ["ENV", "TEMP", "StoreError", "chosen", "reachable", "resolved_store"]

ENV: Final = "SETTLED_STORE"
TEMP: Final = "temp-postgres"


class StoreError(Exception):
    """The store could not be used; the message says why and what to do."""


def chosen(option: str | None) -> str | None:
    """The option's value, else ``$SETTLED_STORE``, else None (SQLite files)."""
    value = option if option is not None else os.environ.get(ENV)
    if value is None or value.strip() in ("", "sqlite"):
        return None
    return value.strip()


@contextmanager
def resolved_store(value: str | None) -> Iterator[str | None]:
    """Yield the PostgreSQL URL to use (None: SQLite files), starting a cluster for ``temp-postgres``."""
    if value is None:
        yield None
        return
    try:
        psycopg_module()
    except PostgresMissing as exc:
        raise StoreError(f"--store {redact(value)}: {exc}") from None
    if value == TEMP:
        from settled.impl.shared._pgcluster import Cluster, ClusterError

        try:
            cluster = Cluster()
            url = cluster.start()
        except ClusterError as exc:
            raise StoreError(f"--store {TEMP}: {exc}") from None
        try:
            yield url
        finally:
            cluster.stop()
        return
    if not is_url(value):
        raise StoreError(f"--store {value!r} is neither 'sqlite', {TEMP!r} nor a postgresql:// URL; "
                         "pass e.g. postgresql://user@host:5432/dbname")
    reachable(value)
    yield value


def reachable(url: str) -> None:
    """StoreError (one line) unless a connection to ``url`` works."""
    try:
        psycopg = psycopg_module()
    except PostgresMissing as exc:
        raise StoreError(f"--store {redact(url)}: {exc}") from None

    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreError(f"cannot connect to {redact(url)!r}: {first}; check the URL and that the "
                         "server runs") from None
