"""The measurements behind ``settled bench``: each section returns a plain dict.

Theory of operation. The machine this runs on is shared and noisy, so no
figure is trusted alone: every rate is measured next to a baseline in the
same run and reported with the ratio between them, which drifts much less
than either rate.

- ``impl``: queries settled end to end by the SQLite implementation
  (draft, the user's yes, confirm, one worker to ``succeeded`` with its
  notification) next to a bare ``BEGIN IMMEDIATE; INSERT; COMMIT`` loop on
  a file in the same directory, opened with the same settings. The two are
  interleaved in rounds so a burst of noise hits both. The number of write
  transactions per query is counted by wrapping ``impl.shared._db.write`` during one
  query, so ``ratio_to_raw_commits`` says how much of the raw commit rate the
  protocol uses (1.0 would mean commits are all it costs). Four worker
  processes then race over one database, and every query must have run on
  the platform exactly once.
- ``lockstep``: the conformance kit against the implementation, next to a
  no-op state machine with the same rule shape, same settings and seed.
- ``trace_check``: the trace checker next to a bare ``json.loads`` pass
  over the same file (``ratio_to_json_parse`` = check seconds / parse
  seconds), and the same runs logged under 1,000 worker names next to 2
  (``many_workers_ratio`` = events/s with 1,000 names / events/s with 2).
- ``explore``: the table explorer on the single query machine (``single_seconds``: the
  median of ``single_runs`` searches, each from a fresh declaration, its evaluators
  compiled anew; ``spin_ratio`` divides that median by one run of SPIN's ``pan``) next to
  the ``transitions`` oracle on the same model; then the query system (queries
  sharing the task's version and the worker processes), reduced by symmetry,
  with the number of concrete states the reduced ones stand for, and the floor
  under its seconds in CPython, on the graph it built: its
  ``system_successor_entries``, given, each produced by one int-keyed dict hit
  and deduplicated against a visited set like the search's, in a bare loop
  (``system_floor_seconds``; ``system_seconds_over_floor`` = system_seconds /
  system_floor_seconds).

The files go to a real directory on disk (the system temp directory unless
told otherwise, never a RAM disk by default): the commits are the point. The
lockstep kit keeps its own choice of directory (a RAM disk where there is
one), since that is what ``settled verify`` runs on.

This module runs the sections in order and assembles the report; each section is its
own module (:mod:`._bench_impl`, :mod:`._bench_lockstep`, :mod:`._bench_trace`,
:mod:`._bench_explore`), with the sizes they share in :mod:`._bench_sizes`.
"""

from __future__ import annotations

import os
import platform as host
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from settled._bench_explore import bench_explore
from settled._bench_impl import bench_impl, filesystem_of
from settled._bench_lockstep import bench_lockstep
from settled._bench_sizes import FULL, QUICK, Say, Sizes
from settled._bench_trace import bench_trace_check
from settled._demo_approval import bench_approval
from settled._demo_ledger import bench_ledger
from settled.conformance._bundled._races import bench as bench_concurrent

__all__ = ["run_bench"]


def bench_approval_section(directory: Path, sizes: Sizes = FULL,
                           say: Say = lambda _: None) -> dict[str, Any]:
    say(f"approval: approved writes, then recovery lookups, {sizes.approval_seconds:g}s")
    figures: dict[str, Any] = bench_approval(directory, sizes.approval_seconds)
    return figures


def bench_ledger_section(directory: Path, sizes: Sizes = FULL,
                         say: Say = lambda _: None) -> dict[str, Any]:
    say(f"ledger: three-call turns, then recoveries of half-run turns, {sizes.ledger_seconds:g}s")
    figures: dict[str, Any] = bench_ledger(directory, sizes.ledger_seconds)
    return figures


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": host.python_version()}


@contextmanager
def _postgres(store: str | None, warn: Say) -> Iterator[tuple[str | None, str | None]]:
    """(URL, None) for the PostgreSQL figures, or (None, why they are skipped).

    ``store`` None: a throwaway cluster of our own when the server binaries are
    here (fsync on: the commits are the point); ``"sqlite"``: skipped on request.
    """
    if store == "sqlite":
        reason = "skipped on request (--store sqlite)"
    elif store is not None:
        yield store, None
        return
    else:
        from settled.impl.shared._pgcluster import Cluster, ClusterError, find_binaries

        if find_binaries() is not None:
            try:
                cluster = Cluster(durable=True)
                url = cluster.start()
            except ClusterError as exc:
                reason = f"the throwaway cluster did not start: {exc}"
            else:
                try:
                    yield url, None
                finally:
                    cluster.stop()
                return
        else:
            reason = ("no PostgreSQL server binaries found (install PostgreSQL, set "
                      "SETTLED_PG_BIN, or pass --store postgresql://...)")
    warn(f"bench: PostgreSQL figures SKIPPED: {reason}")
    yield None, reason


def run_bench(quick: bool = False, directory: Path | None = None,
              say: Say = lambda _: None, store: str | None = None,
              warn: Say = lambda line: print(line, file=sys.stderr)) -> dict[str, Any]:
    """Every section, in one run, in a fresh folder under ``directory`` (default: the temp dir).

    ``store``: the PostgreSQL URL for the ``impl.postgres`` figures; None starts a
    throwaway cluster when the binaries are here; ``"sqlite"`` skips them.
    ``warn`` gets the one line that says PostgreSQL was skipped (stderr even
    under --json).
    """
    sizes = QUICK if quick else FULL
    start = time.perf_counter()
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="settled-bench-", dir=directory) as tmp:
        base = Path(tmp)
        kind = filesystem_of(base)
        if kind in ("tmpfs", "ramfs"):
            say(f"warning: {base} is on {kind}; commit figures will not include the disk")
        report: dict[str, Any] = {"machine": machine()}
        with _postgres(store, warn) as (url, skipped):
            report["impl"] = bench_impl(base / "impl", sizes, say, url, skipped)
        report["lockstep"] = bench_lockstep(sizes, say)
        say("concurrent campaigns and linearizability")
        concurrent, report["linearizability"] = bench_concurrent(quick)
        report["lockstep"].update(concurrent)
        report["trace_check"] = bench_trace_check(base / "trace", sizes, say)
        report["explore"] = bench_explore(sizes, say)
        report["approval"] = bench_approval_section(base / "approval", sizes, say)
        report["ledger"] = bench_ledger_section(base / "ledger", sizes, say)
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report
