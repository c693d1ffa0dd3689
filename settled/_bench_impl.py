"""The ``impl`` section of ``settled bench``: queries settled end to end by the implementation.

Queries per second with one worker, next to bare ``BEGIN IMMEDIATE; INSERT; COMMIT``
transactions on a file in the same directory, interleaved round by round; the write
transactions one query costs, counted by module (:func:`count_transactions`); and worker
processes racing over one store, 1 to 8 of them, on SQLite and on PostgreSQL, every query
run on the platform exactly once. Its own room: it is the only section that drives the
implementation's stores and worker processes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from settled._bench_sizes import FULL, Say, Sizes, _rate, _ratio
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.query._store import QueryStore, utc_now
from settled.impl.query._worker import Worker
from settled.impl.shared import _db, _pg
from settled.impl.shared._errors import Busy
from settled.model import QueryState

__all__ = ["bench_impl", "count_transactions", "filesystem_of"]

SESSION, USER, ZONE = "bench-session", "bench-user", "Asia/Shanghai"
YES = "run it"  # the user's whole confirming message, quoted back by confirm (Q5)
LEASE_SECONDS = 30
RACERS = 4
WORKER_COUNTS = (1, 2, 4, 8)  # worker processes racing over one store, side by side per store


@dataclass
class _World:
    """One store, its platform and one worker, with a task and a run to confirm from."""

    store: QueryStore
    worker: Worker
    platform: SyntheticPlatform
    task_id: str
    run_id: str

    def authorize(self) -> str:
        """The user's side of one query: draft (checked by the platform), a yes, confirm."""
        draft = self.store.request_query(self.task_id, APP_MONTHLY_SQL)
        message = self.store.receive_message(SESSION, USER, YES, (utc_now(), ZONE),
                                             task_id=self.task_id)
        self.store.confirm(draft.query_id, draft.draft_version, draft.condition_version, YES,
                           message.message_id, self.run_id)
        return str(draft.query_id)

    def settle_one(self) -> str:
        query_id = self.authorize()
        self.worker.run_until_idle()
        return query_id


@contextmanager
def _world(directory: Path, store_url: str | None = None) -> Iterator[_World]:
    """``store_url``: a PostgreSQL store (a fresh schema in it); default a file in ``directory``."""
    # auto_complete_after_polls=1: the worker's first lookup finds the query
    # finished, so a query settles with one submit and one lookup.
    directory.mkdir(parents=True, exist_ok=True)
    scratch = None if store_url is None else _pg.scratch_store(store_url, "bench")
    at: Path | str = scratch or directory / "store.db"
    with SyntheticPlatform(directory / "platform", auto_complete_after_polls=1) as platform, \
            QueryStore(at, platform) as store, \
            Worker(at, platform, "w1", LEASE_SECONDS) as worker:
        task = store.create_task(USER, SESSION, {"month": "2026-01", "channel": "app"})
        yield _World(store, worker, platform, task.task_id, store.start_run(SESSION))
    if scratch is not None:
        _pg.release_store(scratch, "bench")


@contextmanager
def count_transactions() -> Iterator[Counter[str]]:
    """Count the write transactions committed through ``impl.shared._db.write``, by opening module.

    The implementation's modules import ``write`` by name, so each module's
    binding is swapped for a counting wrapper and put back afterwards. A
    transaction that rolls back is not counted.
    """
    counts: Counter[str] = Counter()
    original = _db.write
    swapped: list[Any] = [m for name, m in list(sys.modules.items())
                          if name.startswith("settled.impl.") and getattr(m, "write", None) is original]
    for module in swapped:
        module.write = _counting(original, counts, _owner(module.__name__))
    try:
        yield counts
    finally:
        for module in swapped:
            module.write = original


def _owner(module: str) -> str:
    """Who commits: ``worker`` for every room of the worker (``_worker``, ``_worker_lease``,
    ...), ``store`` for every part of the query store (one module per concept), else the
    module's own name (``platform``)."""
    name = module.rsplit(".", 1)[-1].lstrip("_")
    if name.startswith("worker_"):
        return "worker"
    if module.startswith("settled.impl.query.") and name not in ("worker", "events", "schema"):
        return "store"
    return name


def _counting(original: Callable[[sqlite3.Connection], AbstractContextManager[sqlite3.Connection]],
              counts: Counter[str], owner: str) -> Callable[..., Any]:
    @contextmanager
    def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        with original(conn) as inside:
            yield inside
        counts[owner] += 1  # reached only after COMMIT

    return write


def _raw_commits(conn: sqlite3.Connection, n: int) -> float:
    """Seconds for ``n`` bare write transactions of one small row each."""
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO raw (n, payload) VALUES (?, ?)", (i, "x" * 64))
        conn.execute("COMMIT")
    return time.perf_counter() - start


def _one_worker(world: _World, raw: sqlite3.Connection, sizes: Sizes,
                say: Say) -> tuple[float, float, list[str]]:
    """(query seconds, raw commit seconds, query ids), interleaved round by round."""
    query_seconds = raw_seconds = 0.0
    ids: list[str] = []
    for r in range(1, sizes.rounds + 1):
        say(f"impl: round {r}/{sizes.rounds}: {sizes.raw_commits_per_round} raw commits, "
            f"{sizes.queries_per_round} queries with one worker")
        raw_seconds += _raw_commits(raw, sizes.raw_commits_per_round)
        start = time.perf_counter()
        ids += [world.settle_one() for _ in range(sizes.queries_per_round)]
        query_seconds += time.perf_counter() - start
    return query_seconds, raw_seconds, ids


def _settled_check(store: QueryStore, platform: SyntheticPlatform, task_id: str,
                   ids: list[str]) -> int:
    """Every query succeeded with one notification; returns the duplicate executions."""
    states = Counter(store.query(q).state for q in ids)
    if states != Counter({QueryState.SUCCEEDED: len(ids)}):
        raise RuntimeError(f"bench: not every query succeeded: {dict(states)}")
    notes = Counter(n.query_id for n in store.notifications(task_id))
    if any(notes[q] != 1 for q in ids):
        raise RuntimeError("bench: a settled query does not have exactly one notification")
    return sum(max(0, platform.executions(q) - 1) for q in ids)


def _race_worker(store_path: str, platform_dir: str, name: str, ready: Any) -> None:
    """One of the racing worker processes: open everything, wait for the start, run dry."""
    try:
        with SyntheticPlatform(platform_dir, auto_complete_after_polls=1) as platform, \
                Worker(store_path, platform, name, LEASE_SECONDS) as worker:
            platform.check(APP_MONTHLY_SQL)  # opens the orders sandbox before the clock starts
            ready.wait(timeout=120)
            while True:
                try:
                    worker.run_until_idle()
                    return
                except Busy:
                    continue  # "nothing was written, retry the same call"
    except BaseException:
        ready.abort()  # the parent and the other racers stop waiting at once
        raise


def _race(directory: Path, n: int, say: Say, racers_n: int = RACERS,
          store_url: str | None = None) -> tuple[float, int]:
    """(wall seconds for ``racers_n`` worker processes to settle ``n`` queued queries, duplicates)."""
    with _world(directory, store_url) as world:
        ids = [world.authorize() for _ in range(n)]
        kind = "SQLite" if store_url is None else "PostgreSQL"
        say(f"impl: {n} queries queued on {kind}; {racers_n} worker processes race over them")
        # fork: the racers start in milliseconds and never import a main module.
        # They open their own connections and never touch the parent's (SQLite
        # forbids using a connection on both sides of a fork), and a forked
        # multiprocessing child leaves through os._exit, so it closes none either.
        context = multiprocessing.get_context("fork")
        ready = context.Barrier(racers_n + 1)
        racers = [context.Process(target=_race_worker, name=f"settled-bench-p{i}", args=(
            str(world.store.path), str(world.platform.directory), f"p{i}", ready))
            for i in range(racers_n)]
        for p in racers:
            p.start()
        # Every racer has opened its files: start the clock. A broken barrier
        # means one failed while opening; its exit code says so below.
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(timeout=120)
        start = time.perf_counter()
        for p in racers:
            p.join(timeout=600)
        seconds = time.perf_counter() - start
        for p in racers:
            if p.is_alive():  # hung: a bug to report, not a figure to wait for
                p.terminate()
                p.join()
        failed = [p.name for p in racers if p.exitcode != 0]
        if failed:
            raise RuntimeError(f"bench: worker process(es) {failed} failed; see their stderr")
        return seconds, _settled_check(world.store, world.platform, world.task_id, ids)


def bench_impl(directory: Path, sizes: Sizes = FULL, say: Say = lambda _: None,
               store_url: str | None = None, skipped: str | None = None) -> dict[str, Any]:
    """Queries per second end to end, commits they need, worker processes racing on each store.

    ``store_url``: the PostgreSQL server for the ``postgres`` figures (None:
    they are skipped, and ``skipped`` says why).
    """
    directory.mkdir(parents=True, exist_ok=True)
    raw = _db.connect(directory / "raw-commits.db")
    try:
        raw.execute("CREATE TABLE raw (n INTEGER NOT NULL, payload TEXT NOT NULL)")
        with _world(directory / "one-worker") as world:
            warm = world.settle_one()  # first-use costs stay out of every figure
            with count_transactions() as counts:
                counted = world.settle_one()
            query_s, raw_s, ids = _one_worker(world, raw, sizes, say)
            ids += [warm, counted]
            duplicates = _settled_check(world.store, world.platform, world.task_id, ids)
    finally:
        raw.close()
    pg_counts = _pg_commits(directory / "pg-one-worker", store_url)
    scaling = _scaling(directory / "scaling", sizes, say, store_url)
    per_query, queries = sum(counts.values()), sizes.rounds * sizes.queries_per_round
    qps, raw_rate = _rate(queries, query_s), _rate(sizes.rounds * sizes.raw_commits_per_round, raw_s)
    sqlite = scaling["sqlite"]
    sqlite["commits_per_query"] = _agent_commits(counts)
    postgres: dict[str, Any] = {"skipped": skipped or "no PostgreSQL store given"}
    if store_url is not None and pg_counts is not None:
        postgres = scaling["postgres"]
        postgres["commits_per_query"] = _agent_commits(pg_counts)
        postgres["commits_by_module"] = dict(sorted(pg_counts.items()))
    return {"queries_per_second_1_worker": qps,
            "queries_per_second_4_workers": sqlite["queries_per_second"]["4"],
            "duplicate_executions": duplicates + sqlite["duplicate_executions"],
            "raw_commits_per_second": raw_rate,
            "transactions_per_query": per_query,
            "commits_per_query": {"sqlite": sqlite["commits_per_query"],
                                  "postgres": postgres.get("commits_per_query")},
            "ratio_to_raw_commits": _ratio(qps * per_query, raw_rate),
            "transactions_by_module": dict(sorted(counts.items())),
            "queries_1_worker": queries, "queries_4_workers": sizes.race_queries,
            "queries_per_race": sizes.race_queries,
            "sqlite": sqlite, "postgres": postgres,
            "filesystem": filesystem_of(directory)}


def _agent_commits(counts: Counter[str]) -> int:
    """Commits of the agent's own store (the store and worker modules), not the platform's."""
    return sum(n for module, n in counts.items() if module != "platform")


def _pg_commits(directory: Path, store_url: str | None) -> Counter[str] | None:
    """The commits of one happy-path query on PostgreSQL, by module (None without a server)."""
    if store_url is None:
        return None
    with _world(directory, store_url) as world:
        world.settle_one()
        with count_transactions() as counts:
            world.settle_one()
    return counts


def _scaling(directory: Path, sizes: Sizes, say: Say, store_url: str | None) -> dict[str, Any]:
    """Queries/s at each process count, the two stores interleaved count by count."""
    stores = {"sqlite": None} if store_url is None else {"sqlite": None, "postgres": store_url}
    rates: dict[str, dict[str, float]] = {kind: {} for kind in stores}
    dupes = dict.fromkeys(stores, 0)
    for n in WORKER_COUNTS:
        for kind, url in stores.items():
            seconds, duplicates = _race(directory / f"{kind}-{n}", sizes.race_queries, say, n, url)
            rates[kind][str(n)] = _rate(sizes.race_queries, seconds)
            dupes[kind] += duplicates
    return {kind: {"queries_per_second": rates[kind],
                   # what 8 worker processes settle per second, divided by what 1 settles
                   "scaling_8_over_1": _ratio(rates[kind]["8"], rates[kind]["1"]),
                   "duplicate_executions": dupes[kind],
                   "worker_processes": list(WORKER_COUNTS)} for kind in stores}


def filesystem_of(path: Path) -> str:
    """The file system type holding ``path`` (from /proc/mounts), or "unknown"."""
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    resolved = str(path.resolve())
    found = [(len(point), kind) for point, kind in mounts
             if resolved == point or resolved.startswith(point.rstrip("/") + "/")]
    return max(found)[1] if found else "unknown"
