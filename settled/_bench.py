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
  with the number of concrete states the reduced ones stand for.

The files go to a real directory on disk (the system temp directory unless
told otherwise, never a RAM disk by default): the commits are the point. The
lockstep kit keeps its own choice of directory (a RAM disk where there is
one), since that is what ``settled verify`` runs on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import platform as host
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from itertools import accumulate, chain, count, islice
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, rule

from settled._demo_approval import bench_approval
from settled._demo_ledger import bench_ledger
from settled.conformance import _trace
from settled.conformance._bundled._races import bench as bench_concurrent
from settled.conformance._bundled._suites import query_suite
from settled.conformance._explore import explore, explore_via_transitions
from settled.conformance._explore._system import explore_system
from settled.conformance._liveness import check_machine
from settled.conformance._lockstep import MIN_STEPS
from settled.conformance._trace._tracegen import event_of
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.query._store import QueryStore, utc_now
from settled.impl.query._worker import Worker
from settled.impl.shared import _db, _pg
from settled.impl.shared._errors import Busy
from settled.model import QUERY, Config, Protocol, QueryState, Step, build_query_machine
from settled.model.systems import build_query_system

__all__ = ["FULL", "QUICK", "Sizes", "bench_explore", "bench_impl", "bench_lockstep",
           "bench_trace_check", "count_transactions", "fast_trace_lines", "run_bench"]

Say = Callable[[str], None]
SEED = 20260203
SESSION, USER, ZONE = "bench-session", "bench-user", "Asia/Shanghai"
YES = "run it"  # the user's whole confirming message, quoted back by confirm (Q5)
LEASE_SECONDS = 30
RACERS = 4
WORKER_COUNTS = (1, 2, 4, 8)  # worker processes racing over one store, side by side per store


@dataclass(frozen=True, slots=True)
class Sizes:
    rounds: int  # interleaved rounds of the impl and lockstep comparisons
    queries_per_round: int  # one-worker queries settled per round
    raw_commits_per_round: int
    race_queries: int  # queued up front for the four worker processes
    lockstep_examples: int
    lockstep_steps: int
    trace_events: int  # at least this many; generation stops at an instance boundary
    explore_bounds: tuple[int, int, int]  # build_query_machine(workers, max_epoch, max_task_version)
    system_size: tuple[int, int]  # build_query_system(queries, workers)
    transitions_max_states: int | None  # None: the oracle side explores the whole space too
    approval_seconds: float
    ledger_seconds: float = 4.0
    # searches of the single machine, each from a fresh declaration (its evaluators compiled
    # anew): its seconds are their median, since one search is a fraction of a second
    single_runs: int = 5


# A few minutes on a shared 2-core machine. The single machine is the default
# one (18,054 states) and its oracle run fits whole, so the ratio compares two
# complete runs. The system is two queries of one task with two worker
# processes, explored completely.
FULL = Sizes(rounds=3, queries_per_round=40, raw_commits_per_round=1500, race_queries=200,
             lockstep_examples=30, lockstep_steps=50, trace_events=1_000_000,
             explore_bounds=(2, 3, 3), system_size=(2, 2), transitions_max_states=None,
             approval_seconds=4.0)
QUICK = Sizes(rounds=1, queries_per_round=4, raw_commits_per_round=200, race_queries=8,
              lockstep_examples=3, lockstep_steps=MIN_STEPS + 5, trace_events=20_000,
              explore_bounds=(1, 2, 2), system_size=(1, 1), transitions_max_states=None,
              approval_seconds=0.4, ledger_seconds=0.4, single_runs=1)


def _rate(n: float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b > 0 else 0.0


# --------------------------------------------------------------------------- impl
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
    """Who commits: ``store`` for every part of the query store (one module per concept),
    else the module's own name (``worker``, ``platform``)."""
    name = module.rsplit(".", 1)[-1].lstrip("_")
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


# --------------------------------------------------------------------------- lockstep
@dataclass
class _Tally:
    steps: int = 0
    options: int = 0  # summed size of the lists the lockstep step drew its action from
    forbidden: int = 0
    forbidden_lists: int = 0


def _bench_settings(sizes: Sizes) -> settings:
    # Generation only (no shrinking, no targeting): both machines run the same
    # kind of search, and a failure in the real one is reported, not minimised.
    return settings(max_examples=sizes.lockstep_examples, stateful_step_count=sizes.lockstep_steps,
                    deadline=None, database=None, derandomize=False, phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck))


def _counted_lockstep(tally: _Tally, transport: str | None = None) -> type[RuleBasedStateMachine]:
    base = query_suite(transport=transport).lockstep("BenchLockstep")

    class Counted(base):  # type: ignore[misc, valid-type]
        """The suite's machine, counting steps and the size of what each step draws from."""

        def __init__(self) -> None:
            super().__init__()
            options, forbidden = self.run.options, self.run.forbidden_choices

            def counted_options() -> list[Any]:
                out: list[Any] = options()
                tally.steps += 1  # the step rule calls this exactly once
                tally.options += len(out) + len(out) // 4 + 1  # with the step's "forbidden" slots
                return out

            def counted_forbidden(i: int) -> list[Any]:
                out: list[Any] = forbidden(i)
                tally.forbidden, tally.forbidden_lists = tally.forbidden + len(out), tally.forbidden_lists + 1
                return out

            self.run.options, self.run.forbidden_choices = counted_options, counted_forbidden

    return Counted


def _noop_machine(tally: _Tally, size: int, forbidden: int, instances: int) -> type[RuleBasedStateMachine]:
    """The lockstep rule's shape with nothing behind it: the same draws, no model, no files."""
    slots = st.integers(0, size - 1)
    options = size - size // 5
    instance, refusals = st.integers(0, instances - 1), st.integers(0, max(forbidden, 1) - 1)

    class NoOp(RuleBasedStateMachine):
        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            tally.steps += 1
            if data.draw(slots, label="action") >= options:
                data.draw(instance, label="instance")
                data.draw(refusals, label="forbidden trigger")
                data.draw(refusals, label="forbidden")

        @invariant()
        def agrees(self) -> None:
            pass

    return NoOp


def _timed_run(machine: type[RuleBasedStateMachine], sizes: Sizes, seed: int) -> float:
    test = get_state_machine_test(machine, settings=_bench_settings(sizes), _min_steps=MIN_STEPS)  # type: ignore[no-untyped-call,unused-ignore]
    start = time.perf_counter()
    hypothesis.seed(seed)(test)()
    return time.perf_counter() - start


def bench_lockstep(sizes: Sizes = FULL, say: Say = lambda _: None) -> dict[str, Any]:
    """Lockstep steps per second against the implementation (its platform in-process, and
    over HTTP), and a no-op machine's, same settings."""
    real, noop, http = _Tally(), _Tally(), _Tally()
    real_s = noop_s = http_s = 0.0
    # One untimed example first: what a campaign pays once (the template files, the trace
    # checker's machines, imports) is not a per-step cost, and the no-op machine has none.
    for transport in (None, "http"):
        _timed_run(_counted_lockstep(_Tally(), transport),
                   dataclasses.replace(sizes, lockstep_examples=1), SEED - 1)
    for r in range(sizes.rounds):
        say(f"lockstep: round {r + 1}/{sizes.rounds}: {sizes.lockstep_examples} examples of up "
            f"to {sizes.lockstep_steps} steps, then the no-op machine")
        real_s += _timed_run(_counted_lockstep(real), sizes, SEED + r)
        size = round(real.options / real.steps)
        forbidden = round(real.forbidden / real.forbidden_lists) if real.forbidden_lists else 1
        noop_s += _timed_run(_noop_machine(noop, size, forbidden, query_suite().instances), sizes,
                             SEED + r)
        # The same campaign with the platform served over HTTP on 127.0.0.1 (same seed).
        say(f"lockstep: round {r + 1}/{sizes.rounds}: the same over HTTP")
        http_s += _timed_run(_counted_lockstep(http, "http"), sizes, SEED + r)
    steps, noop_steps = _rate(real.steps, real_s), _rate(noop.steps, noop_s)
    http_steps = _rate(http.steps, http_s)
    return {"steps_per_second": steps, "http_steps_per_second": http_steps,
            "http_slowdown": _ratio(steps, http_steps), "http_steps": http.steps,
            "noop_steps_per_second": noop_steps,
            "ratio": _ratio(noop_steps, steps), "steps": real.steps, "noop_steps": noop.steps,
            "draw_list_size": round(real.options / real.steps, 1), "seed": SEED,
            "examples": sizes.rounds * sizes.lockstep_examples,
            "stateful_step_count": sizes.lockstep_steps}


# --------------------------------------------------------------------------- trace check
@dataclass(frozen=True, slots=True)
class _Moves:
    """What a random walk may do from one configuration, worked out once."""

    steps: tuple[Step, ...]
    cumulative: tuple[int, ...]
    total: float
    tails: tuple[str | None, ...]  # the event's JSON after "seq", None for an unlogged step


def _moves(p: Protocol, c: Config) -> _Moves:
    steps = tuple(p.enabled(c))
    # The weights of _tracegen.walk: settling early makes a dull run.
    weights = [1 if s.after.state in p.terminal_states else 6 for s in steps]
    cumulative = tuple(accumulate(weights))
    tails: list[str | None] = []
    for s in steps:
        if s.transition.observable is None:
            tails.append(None)
            continue
        event = event_of(p, "", 0, c, s)
        for key in ("schema", "machine", "instance", "seq"):
            del event[key]
        tails.append(json.dumps(event, separators=(",", ":"))[1:])
    return _Moves(steps, cumulative, (cumulative[-1] + 0.0) if steps else 0.0, tuple(tails))


def _instance_batches(p: Protocol, seed: int, max_steps: int = 60) -> Iterator[list[str]]:
    """The lines of ``_tracegen.trace_lines``, one list per instance, without end.

    Memoises each configuration's steps, weights and event JSON, and draws
    with the arithmetic of ``random.choices`` so the same seed gives the
    same bytes (the tests compare the two).
    """
    rng, memo = random.Random(seed), dict[Config, _Moves]()
    head = f'{{"schema":{json.dumps(_trace.SCHEMA_ID)},"machine":{json.dumps(p.name)},"instance":'
    for i in count():
        config, seq, lines = p.initial_config(), 0, []
        instance = head + json.dumps(f"{p.name}-{i}") + ',"seq":'
        for _ in range(max_steps):
            moves = memo.get(config) or memo.setdefault(config, _moves(p, config))
            if not moves.steps:
                break
            k = bisect_right(moves.cumulative, rng.random() * moves.total, 0, len(moves.steps) - 1)
            if moves.tails[k] is not None:
                seq += 1
                lines.append(f"{instance}{seq},{moves.tails[k]}")
            config = moves.steps[k].after
        yield lines


def fast_trace_lines(p: Protocol, instances: int, seed: int = 0, max_steps: int = 60) -> Iterator[str]:
    """Exactly ``_tracegen.trace_lines(p, instances, seed, max_steps)``, several times faster."""
    return chain.from_iterable(islice(_instance_batches(p, seed, max_steps), instances))


def write_trace(path: Path, min_events: int, seed: int = SEED,
                worker_names: int | None = None) -> tuple[int, int]:
    """Write whole random walks of ``QUERY`` until at least ``min_events``; (events, instances).

    With ``worker_names``, every claim is made under a fresh name drawn in turn from that
    many (``pod-0``, ``pod-1``, ...), and the claiming worker's later events carry it: the
    same runs, logged by a fleet whose workers all have their own names.
    """
    events = instances = 0
    fresh = count()
    with path.open("w", encoding="utf-8") as out:
        for lines in _instance_batches(QUERY, seed):
            if events >= min_events:
                break
            if worker_names is not None:
                lines = _renamed(lines, fresh, worker_names)
            out.write("\n".join(lines) + "\n" if lines else "")
            events, instances = events + len(lines), instances + 1
    return events, instances


_WORKER_KEYS = tuple(f'"worker":"w{k}"' for k in range(2))


def _renamed(lines: list[str], fresh: Iterator[int], pool: int) -> list[str]:
    names = list(_WORKER_KEYS)
    out = []
    for line in lines:
        for k, key in enumerate(_WORKER_KEYS):
            if key in line:
                if '"trigger":"claim"' in line:
                    names[k] = f'"worker":"pod-{next(fresh) % pool}"'
                line = line.replace(key, names[k])
                break
        out.append(line)
    return out


def _json_pass(path: Path) -> float:
    start = time.perf_counter()
    with path.open(encoding="utf-8") as f:
        for line in f:
            json.loads(line)
    return time.perf_counter() - start


def _timed_check(path: Path, events: int) -> tuple[float, float]:
    """Seconds (wall clock, then this process's CPU) for one cold ``settled check`` of the file."""
    # The checker keeps its memo per process; earlier sections (the lockstep kit checks every
    # run's log) would hand it a warm one, whereas ``settled check`` starts cold.
    _trace.REPLAYERS.clear()
    start, cpu = time.perf_counter(), time.process_time()
    report = _trace.check_file(path)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if not report.ok or report.events != events:
        raise RuntimeError(f"bench: the model's own trace did not check clean: "
                           f"{json.dumps(report.to_json(), default=str)[:2000]}")
    return seconds, cpu


MANY_WORKER_NAMES = 1_000


def bench_trace_check(directory: Path, sizes: Sizes = FULL, say: Say = lambda _: None) -> dict[str, Any]:
    """The trace checker's events per second on a generated file, against bare ``json.loads``;
    then the same runs logged under 1,000 worker names against the same under 2. Each check
    starts cold (as ``settled check`` does); each figure is the best of interleaved rounds."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trace.jsonl"
    start = time.perf_counter()
    events, instances = write_trace(path, sizes.trace_events)
    made = time.perf_counter() - start
    say(f"trace_check: wrote {events:,} events of {instances:,} instances in {made:.1f}s; checking")
    many = directory / "many-workers.jsonl"
    many_events, _ = write_trace(many, sizes.trace_events, worker_names=MANY_WORKER_NAMES)
    # Interleaved rounds, best of each, so a burst of noise from other work hits both sides.
    rounds = max(2, sizes.rounds)
    check_s = check_cpu = json_s = many_s = float("inf")
    for r in range(rounds):
        say(f"trace_check: round {r + 1}/{rounds}: check, json.loads pass, then the same runs "
            f"with every claim under a fresh name of {MANY_WORKER_NAMES:,}")
        wall, cpu = _timed_check(path, events)
        check_s, check_cpu = min(check_s, wall), min(check_cpu, cpu)
        json_s = min(json_s, _json_pass(path))
        many_s = min(many_s, _timed_check(many, many_events)[0])
    rate, many_rate = _rate(events, check_s), _rate(many_events, many_s)
    return {"events": events, "events_per_second": rate,
            "ratio_to_json_parse": _ratio(check_s, json_s),
            "ratio_to_json_parse_means": "check seconds (cold: on a small file, the first sight of "
                                         "each path dominates) / seconds of json.loads on every line of "
                                         "the same file (lower is faster; 1.0 = as fast as parsing)",
            "many_workers_ratio": _ratio(many_rate, rate),
            "many_workers_ratio_means": f"events/s with {MANY_WORKER_NAMES:,} worker names (a "
                                        "fresh one at every claim) / events/s of the same runs "
                                        "with 2 names",
            "many_workers_events_per_second": many_rate, "many_workers_names": MANY_WORKER_NAMES,
            # On a shared machine the wall clock includes waiting for a core; CPU time does not.
            "events_per_cpu_second": _rate(events, check_cpu),
            "rounds": rounds, "instances": instances, "check_seconds": round(check_s, 2),
            "check_cpu_seconds": round(check_cpu, 2),
            "json_parse_seconds": round(json_s, 2), "many_workers_seconds": round(many_s, 2),
            "generate_seconds": round(made, 2), "file_bytes": path.stat().st_size}


# --------------------------------------------------------------------------- explore
def bench_explore(sizes: Sizes = FULL, say: Say = lambda _: None) -> dict[str, Any]:
    """The single query machine through the table and through the ``transitions`` oracle, then
    the query system whose queries share the task's version and the worker processes."""
    workers, epochs, versions = sizes.explore_bounds
    name = f"query(workers={workers}, max_epoch={epochs}, max_task_version={versions})"
    say(f"explore: {name} through the table (one core, invariants and step properties), "
        f"{sizes.single_runs} searches")
    runs: list[float] = []
    for _ in range(sizes.single_runs):
        p = build_query_machine(workers, epochs, versions)  # fresh: evaluators compiled anew
        start = time.perf_counter()
        table = explore(p, instances=1)
        runs.append(time.perf_counter() - start)
    table_s = statistics.median(runs)
    say(f"explore: {table.states:,} states in {table_s:.1f}s; progress under fairness on the "
        "same graph")
    start = time.perf_counter()
    live = check_machine(table)
    live_s = time.perf_counter() - start
    if not live.ok:
        raise RuntimeError(f"bench: the declared query machine is not live: {live.text()}")
    spin = _spin_figures(p, table, table_s, say)
    say(f"explore: liveness in {live_s:.1f}s; again through the transitions oracle")
    start = time.perf_counter()
    oracle = explore_via_transitions(p, instances=1, max_states=sizes.transitions_max_states)
    oracle_s = time.perf_counter() - start
    if oracle.complete and oracle.states != table.states:
        raise RuntimeError(f"bench: the oracle reached {oracle.states} states, the table "
                           f"{table.states}")
    rate, oracle_rate = _rate(table.states, table_s), _rate(oracle.states, oracle_s)
    queries, procs = sizes.system_size
    system = build_query_system(queries=queries, workers=procs)
    say(f"explore: {system.meaning}, shared version and processes, reduced by symmetry")
    start = time.perf_counter()
    result = explore_system(system)
    system_s = time.perf_counter() - start
    return {"single_states": table.states, "single_states_per_second": rate,
            "vs_transitions_ratio": _ratio(rate, oracle_rate),
            "transitions_states_per_second": oracle_rate, "transitions_states": oracle.states,
            "transitions_complete": oracle.complete, "model": name,
            "single_seconds": round(table_s, 3), "single_runs": len(runs),
            "transitions_seconds": round(oracle_s, 2),
            "liveness_seconds": round(live_s, 2),
            "liveness_ratio_to_safety": round(live_s / table_s, 2) if table_s else 0.0,
            "liveness_properties": len(live.verdicts),
            "system": system.meaning, "system_states": result.states,
            "system_states_unreduced": result.states_unreduced,
            "system_states_per_second": _rate(result.states, system_s),
            "system_seconds": round(system_s, 2), "system_complete": result.complete,
            "system_findings": len(result.findings),
            "independent_product": result.independent_product, **spin}


def _spin_figures(p: Protocol, table: Any, table_s: float, say: Say) -> dict[str, Any]:
    """SPIN (``pan``, compiled from the Promela export) on the same machine in the same run:
    its search seconds against the explorer's, and both counts; a disagreement stops the
    bench. Without spin the figures are None and ``spin_skipped`` says why, in one line."""
    from settled.conformance._explore._promela import (
        SpinFailed,
        SpinUnavailable,
        compare,
        render_machine,
        run_spin,
    )

    try:
        say("explore: the same machine on SPIN (pan, from the Promela export)")
        # gcc -O0 (cc), as before tcc became the default: a pan of tcc's runs slower, and the
        # ratio would flatter us
        spin = run_spin(render_machine(p), trails=False, compiler="cc")
    except (SpinUnavailable, SpinFailed) as e:
        say(f"explore: SPIN figures SKIPPED: {e}")
        return {"spin_seconds": None, "spin_ratio": None, "spin_states": None,
                "spin_compile_seconds": None, "spin_compiler": None, "spin_skipped": str(e)}
    agreement = compare(table, spin)
    if not agreement.agree:
        raise RuntimeError(f"bench: SPIN and the explorer disagree: {agreement.disagreements}")
    return {"spin_seconds": round(spin.seconds, 3), "spin_states": spin.states,
            "spin_steps": spin.steps, "spin_compile_seconds": spin.compile_seconds,
            "spin_compiler": f"{spin.compiler} -O0",
            "spin_ratio": round(table_s / spin.seconds, 2) if spin.seconds else 0.0,
            "spin_skipped": None}


# --------------------------------------------------------------------------- everything
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
