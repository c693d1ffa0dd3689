"""The same checks against PostgreSQL: lockstep, fencing, crashes, races, trace, mutants.

Every test here runs on the session's throwaway cluster (``pg_url`` in
``conftest.py``), each in a fresh schema of its own. Where no server binaries
exist the whole module is skipped with one line; with ``CI=true`` that is a
collection error instead, so CI can never pass without running them.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_URL_ENV, ROOT, postgres_missing

MISSING = postgres_missing()
if MISSING is not None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {MISSING}: the PostgreSQL tests must run in CI",
                    pytrace=False)
    pytest.skip(f"PostgreSQL tests SKIPPED: {MISSING} (install PostgreSQL or set "
                f"${PG_URL_ENV})", allow_module_level=True)

from settled.conformance._bundled._suites import approval_suite, query_suite  # noqa: E402
from settled.conformance._lockstep import run_lockstep, unfired  # noqa: E402
from settled.conformance._profiles import profile  # noqa: E402
from settled.conformance._trace import check_lines  # noqa: E402
from settled.conformance.mutants import all_mutants  # noqa: E402
from settled.impl.approval._business import BusinessStore  # noqa: E402
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform  # noqa: E402
from settled.impl.query._events import apply_step, trace_lines  # noqa: E402
from settled.impl.query._store import QueryStore  # noqa: E402
from settled.impl.query._worker import Worker  # noqa: E402
from settled.impl.shared import _pg  # noqa: E402
from settled.impl.shared._crash import CRASH_EXIT_CODE, CRASH_POINTS  # noqa: E402
from settled.impl.shared._errors import NotAllowed, StaleLease  # noqa: E402
from settled.model.query import QueryState as S  # noqa: E402

SESSION, USER, EXECUTE = "s1", "u1", "只看 app，再执行"
CLOCK = (datetime(2026, 2, 3, 2, tzinfo=UTC), "Asia/Shanghai")
SEED = 20261203


@pytest.fixture
def store_url(pg_url: str) -> Iterator[str]:
    """A fresh, empty schema for one test."""
    url = _pg.scratch_store(pg_url, "test")
    yield url
    _pg.release_store(url, "test")


@pytest.fixture
def counterexamples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SETTLED_COUNTEREXAMPLES", str(tmp_path))
    return tmp_path


def authorized(store: QueryStore, n: int) -> tuple[str, list[str]]:
    """A task with ``n`` confirmed queries (the user's side of each, 3 commits apiece)."""
    task = store.create_task(USER, SESSION, {"month": "2026-01", "channel": "app"}).task_id
    run = store.start_run(SESSION)
    ids = []
    for _ in range(n):
        draft = store.request_query(task, APP_MONTHLY_SQL)
        message = store.receive_message(SESSION, USER, EXECUTE, CLOCK, task_id=task)
        store.confirm(draft.query_id, draft.draft_version, draft.condition_version, EXECUTE,
                      message.message_id, run)
        ids.append(draft.query_id)
    return task, ids


def assert_settled_once(store: QueryStore, platform: SyntheticPlatform, task: str,
                        ids: list[str]) -> None:
    states = Counter(store.query(q).state for q in ids)
    assert states == Counter({S.SUCCEEDED: len(ids)}), dict(states)
    assert all(platform.executions(q) == 1 for q in ids), "never executed twice, never lost"
    notes = Counter(n.query_id for n in store.notifications(task))
    assert all(notes[q] == 1 for q in ids), "exactly one notification per settled query"
    report = check_lines(trace_lines(store.path))
    assert report.ok, "\n".join(v.text() for v in report.violations)


def location(kind: str, store_url: str, tmp_path: Path) -> str:
    return store_url if kind == "postgres" else str(tmp_path / "store.db")


# --------------------------------------------------------------------------- lockstep
def _campaign(suite: Any, profile_name: str) -> None:
    record = run_lockstep(suite.lockstep(), profile(profile_name), seed=SEED)
    assert record.failure is None, record.failure
    assert not unfired(suite.protocol, record.fired), unfired(suite.protocol, record.fired)
    assert record.trace_failure is None and record.trace_events > 0


# The ci-profile campaigns on PostgreSQL: fencing (Q11), one submission per query (Q12),
# the approval's idempotent writes (W2, W6), each step checked against the model. (A dev-profile
# run of the same suites, the same tour and fewer, shorter random runs, used to sit beside them.)
@pytest.mark.slow
@pytest.mark.rule("Q11")
@pytest.mark.rule("Q12")
@pytest.mark.rule("W2")
@pytest.mark.rule("W6")
@pytest.mark.parametrize("build", [query_suite, approval_suite], ids=["query", "approval"])
def test_the_ci_lockstep_campaigns_pass_on_postgresql(pg_url: str, counterexamples: Path,
                                                      build: Any) -> None:
    _campaign(build(store=pg_url), "ci")


# --------------------------------------------------------------------------- fencing (Q11)
@pytest.mark.rule("Q11")
def test_a_stale_workers_write_changes_no_row_and_is_refused(store_url: str,
                                                             tmp_path: Path) -> None:
    with SyntheticPlatform(tmp_path / "platform") as platform, \
            QueryStore(store_url, platform) as store:
        _task, (qid,) = authorized(store, 1)
        with Worker(store_url, platform, "old", 0) as old, \
                Worker(store_url, platform, "new", 0) as new:
            old.claim(qid)
            new.claim(qid)  # lease 0 s: taken over at once
            before = store.events(qid)
            with pytest.raises(StaleLease, match="lease_epoch 1, the row is at lease_epoch 2"):
                old.begin_submit(qid)
            assert store.events(qid) == before and store.query(qid).state is S.QUEUED
            # Below the worker's own check: the fenced UPDATE itself matches no row.
            conn: Any = _pg.connect(store_url, _pg.WORKER_SIDE)
            try:
                with pytest.raises(RuntimeError, match="under lease_epoch 1"), conn.write():
                    apply_step(conn, qid, trigger="begin_submit", params={"worker": "old"},
                               from_state=S.QUEUED, to_state=S.SUBMITTING, at="t", epoch=1,
                               updates={"submissions": 1, "submit_epoch": 1})
            finally:
                conn.close()
            assert store.events(qid) == before and store.query(qid).submissions == 0


@pytest.mark.rule("Q11")
def test_a_claim_skips_a_row_another_worker_is_stepping(store_url: str, tmp_path: Path) -> None:
    import psycopg

    with SyntheticPlatform(tmp_path / "platform") as platform, \
            QueryStore(store_url, platform) as store, \
            Worker(store_url, platform, "w1", 30) as worker:
        _task, (qid,) = authorized(store, 1)
        with psycopg.connect(store_url) as other:  # another worker's open transaction
            other.execute("SELECT * FROM queries WHERE query_id = %s FOR UPDATE", (qid,))
            start = time.monotonic()
            with pytest.raises(NotAllowed, match="another worker's transaction holds its row"):
                worker.claim(qid)
            assert worker.claim() is None  # SKIP LOCKED: nothing else to claim
            assert time.monotonic() - start < 4, "skipped, not waited for the lock timeout"
        assert worker.claim() == qid


def test_a_serialization_conflict_is_a_typed_error_that_wrote_nothing(store_url: str) -> None:
    first: Any = _pg.connect(store_url, _pg.USER_SIDE)
    second: Any = _pg.connect(store_url, _pg.USER_SIDE)
    try:
        first.execute("CREATE TABLE seats (n INTEGER NOT NULL)")
        # Write skew: each reads the count, decides there is room, inserts.
        with pytest.raises(_pg.WriteConflict, match="nothing was written, retry the same call"), \
                first.write():
            first.execute("SELECT COUNT(*) FROM seats").fetchone()
            with second.write():
                second.execute("SELECT COUNT(*) FROM seats").fetchone()
                second.execute("INSERT INTO seats (n) VALUES (2)")
            first.execute("INSERT INTO seats (n) VALUES (1)")
        assert [r[0] for r in first.execute("SELECT n FROM seats")] == [2]
    finally:
        first.close()
        second.close()


# --------------------------------------------------------------------------- crashes
CHILD = """
import sys
from settled.impl.shared._crash import CrashPoints
from settled.impl.platform._platform import SyntheticPlatform
from settled.impl.query._worker import Worker

store, platform_dir, point = sys.argv[1:4]
platform = SyntheticPlatform(platform_dir, auto_complete_after_polls=1)
worker = Worker(store, platform, "doomed", 30, crash=CrashPoints([point], mode="exit"))
worker.run_until_idle()
sys.exit(0)  # reaching this line means the crash point was never hit
"""

RECOVERY = {
    "after_submitting_commit": ["claim", "lookup_not_found", "resubmit", "submit_answered",
                                "lookup_succeeded"],
    "after_platform_stored": ["claim", "lookup_succeeded"],
    "after_terminal_stored": [],
}


@pytest.mark.rule("Q12")
@pytest.mark.rule("Q13")
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_hard_exit_at_each_crash_point_recovers_to_one_execution_on_postgresql(
        store_url: str, tmp_path: Path, point: str) -> None:
    platform_dir = tmp_path / "platform"
    with SyntheticPlatform(platform_dir) as platform, QueryStore(store_url, platform) as store:
        task, (qid,) = authorized(store, 1)
    child = subprocess.run([sys.executable, "-c", CHILD, store_url, str(platform_dir), point],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == CRASH_EXIT_CODE, child.stderr
    with SyntheticPlatform(platform_dir, auto_complete_after_polls=1) as platform, \
            QueryStore(store_url, platform) as store:
        assert platform.executions(qid) <= 1
        before = len(store.events(qid))
        later = lambda: datetime.now(UTC) + timedelta(seconds=31)  # noqa: E731 - lease expired
        with Worker(store_url, platform, "rescuer", 30, later) as rescuer:
            rescuer.run_until_idle()
        assert_settled_once(store, platform, task, [qid])
        assert [e["trigger"] for e in store.events(qid)][before:] == RECOVERY[point]


LOOPER = """
import sys, time
from settled.impl.shared._errors import Busy
from settled.impl.platform._platform import SyntheticPlatform
from settled.impl.query._worker import Worker

store, platform_dir, name = sys.argv[1:4]
with SyntheticPlatform(platform_dir, auto_complete_after_polls=1) as platform, \\
        Worker(store, platform, name, 0.3) as worker:
    while True:
        try:
            worker.run_once()
        except Busy:
            pass
        time.sleep(0.002)
"""


def _kill_workers_mid_step(store: str, platform_dir: Path, rounds: int, seed: int) -> int:
    """Worker processes run; one is killed with SIGKILL at a random moment each round."""
    import random

    rng = random.Random(seed)
    spawn = lambda name: subprocess.Popen(  # noqa: E731
        [sys.executable, "-c", LOOPER, store, str(platform_dir), name],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    workers = [spawn(f"p{i}") for i in range(3)]
    kills = 0
    try:
        for r in range(rounds):
            time.sleep(rng.uniform(0.3, 1.2))
            i = rng.randrange(len(workers))
            if workers[i].poll() is not None:
                raise AssertionError(f"worker p{i} died on its own: {workers[i].stderr.read()}")
            workers[i].send_signal(signal.SIGKILL)
            workers[i].wait()
            kills += 1
            workers[i] = spawn(f"p{i}-{r}")
    finally:
        for w in workers:
            w.send_signal(signal.SIGKILL)
            w.wait()
    return kills + len(workers)


@pytest.mark.rule("Q11")
@pytest.mark.rule("Q13")
# SQLite's crash points are each hit deterministically in test_query_crash; its random kills
# run with the slow set.
@pytest.mark.parametrize("kind", [pytest.param("sqlite", marks=pytest.mark.slow), "postgres"])
def test_worker_processes_killed_mid_step_leave_every_query_settled_once(
        kind: str, store_url: str, tmp_path: Path) -> None:
    _killed_mid_step(location(kind, store_url, tmp_path), tmp_path, queries=12, rounds=4)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_many_kills_mid_step_leave_every_query_settled_once(kind: str, store_url: str,
                                                            tmp_path: Path) -> None:
    _killed_mid_step(location(kind, store_url, tmp_path), tmp_path, queries=60, rounds=25)


def _killed_mid_step(store_at: str, tmp_path: Path, queries: int, rounds: int) -> None:
    platform_dir = tmp_path / "platform"
    with SyntheticPlatform(platform_dir) as platform, QueryStore(store_at, platform) as store:
        task, ids = authorized(store, queries)
    assert _kill_workers_mid_step(store_at, platform_dir, rounds, SEED) == rounds + 3
    if not _pg.is_url(store_at):
        conn = sqlite3.connect(store_at)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    with SyntheticPlatform(platform_dir, auto_complete_after_polls=1) as platform, \
            QueryStore(store_at, platform) as store:
        assert all(platform.executions(q) <= 1 for q in ids)
        later = lambda: datetime.now(UTC) + timedelta(seconds=5)  # noqa: E731 - leases expired
        with Worker(store_at, platform, "rescuer", 1, later) as rescuer:
            rescuer.run_until_idle()
        assert_settled_once(store, platform, task, ids)


# --------------------------------------------------------------------------- races
RACER = """
import sys
from settled.impl.shared._errors import Busy
from settled.impl.platform._platform import SyntheticPlatform
from settled.impl.query._worker import Worker

store, platform_dir, name = sys.argv[1:4]
with SyntheticPlatform(platform_dir, auto_complete_after_polls=1) as platform, \\
        Worker(store, platform, name, 30) as worker:
    platform.check("SELECT 1")
    print("ready", flush=True)
    sys.stdin.readline()  # the start signal
    while True:
        try:
            worker.run_until_idle()
            break
        except Busy:
            continue
"""


def race(store: str, platform_dir: Path, processes: int) -> None:
    racers = [subprocess.Popen([sys.executable, "-c", RACER, store, str(platform_dir), f"p{i}"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for i in range(processes)]
    for p in racers:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr
    for p in racers:  # every racer has its connection open: go
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.close()
    for p in racers:
        assert p.wait(timeout=600) == 0, p.stderr.read() if p.stderr else ""


@pytest.mark.rule("Q11")
@pytest.mark.rule("Q18")
def test_eight_worker_processes_run_200_queries_with_no_duplicate_execution(
        store_url: str, tmp_path: Path) -> None:
    platform_dir = tmp_path / "platform"
    with SyntheticPlatform(platform_dir) as platform, QueryStore(store_url, platform) as store:
        task, ids = authorized(store, 200)
    race(store_url, platform_dir, 8)
    with SyntheticPlatform(platform_dir) as platform, QueryStore(store_url, platform) as store:
        assert sum(max(0, platform.executions(q) - 1) for q in ids) == 0
        assert_settled_once(store, platform, task, ids)
        claimers = {e["params"]["worker"] for e in store.events() if e["trigger"] == "claim"}
        assert len(claimers) > 1, "the queries were shared out among the processes"


TOKEN_RACER = """
import json, sys
from settled.impl.approval._business import BusinessStore

store = sys.argv[1]
with BusinessStore.open(store) as business:
    print("ready", flush=True)
    sys.stdin.readline()
    print(json.dumps(business.adjust_stock("tok-race", {"sku": "A1001", "delta": -1})), flush=True)
"""


@pytest.mark.rule("W2")
@pytest.mark.rule("W6")
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_eight_processes_racing_one_token_make_one_change_and_the_rest_replay(
        kind: str, store_url: str, tmp_path: Path) -> None:
    at = store_url if kind == "postgres" else str(tmp_path / "business.db")
    with BusinessStore.create(at) as business:
        before = business.stock("A1001")
    racers = [subprocess.Popen([sys.executable, "-c", TOKEN_RACER, at], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(8)]
    for p in racers:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in racers:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.close()
    answers = []
    for p in racers:
        assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
        assert p.stdout is not None
        answers.append(json.loads(p.stdout.read()))
    assert all(a == answers[0] for a in answers), "every racer got the first result"
    assert answers[0]["stock_before"] == before and answers[0]["stock_after"] == before - 1
    with BusinessStore.open(at) as business:
        assert business.stock("A1001") == before - 1, "one change"
        records = business.snapshot()["mutation_requests"]
        assert [r["client_token"] for r in records] == ["tok-race"]


# --------------------------------------------------------------------------- trace, CLI
def settled(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "settled.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_export_trace_from_a_postgresql_url_passes_settled_check(store_url: str,
                                                                 tmp_path: Path) -> None:
    with SyntheticPlatform(tmp_path / "platform", auto_complete_after_polls=1) as platform, \
            QueryStore(store_url, platform) as store:
        _task, ids = authorized(store, 3)
        with Worker(store_url, platform, "w1", 30) as worker:
            worker.run_until_idle()
        expected = len(store.events())
    out = tmp_path / "trace.jsonl"
    exported = settled("export-trace", store_url, "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert len(out.read_text().splitlines()) == expected > len(ids)
    checked = settled("check", str(out))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_export_trace_from_a_schema_without_a_store_is_a_one_line_error(
        pg_url: str, tmp_path: Path) -> None:
    empty = _pg.scratch_store(pg_url, "empty")  # no store was ever opened here
    result = settled("export-trace", empty, "-o", str(tmp_path / "t.jsonl"))
    _pg.release_store(empty, "empty")
    assert result.returncode == 2
    assert "cannot export" in result.stderr and "query_events" in result.stderr
    assert "Traceback" not in result.stderr


def test_verify_refuses_an_unreachable_store_url_in_one_line() -> None:
    done = settled("verify", "--store", "postgresql://nobody@/x?host=/nonexistent")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("cannot connect to") and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- mutants
# The catalogue's bugs that live in the store's transactions: fencing, the
# submitting commit, reconfirmation, condition updates, the late result, and
# the business store's token record and lookup.
STORE_MUTANTS = ("Q11-stale-epoch-write-accepted", "Q12-submitting-committed-after-call",
                 "Q8-reconfirmation-queues-again", "T2-condition-update-keeps-drafts",
                 "Q24-late-result-moves-newer-phase", "W6-token-record-in-its-own-transaction",
                 "W3-lookup-replays-other-arguments")
# The default run kills the business store's W6 bug on PostgreSQL (seconds);
# the query store's (each minutes: the minimiser replays on a real server) are slow.
DEFAULT_MUTANTS = ("W6-token-record-in-its-own-transaction",)


def _killed_on_postgresql(pg_url: str, name: str) -> None:
    (mutant,) = [m for m in all_mutants() if m.name == name]
    build = query_suite if mutant.machine == "query" else approval_suite
    suite = build(mutant.adapter_class, store=pg_url)
    record = run_lockstep(suite.lockstep(name), profile("dev"), seed=SEED)
    assert record.failure is not None, f"{name} survived on PostgreSQL"


@pytest.mark.parametrize("name", DEFAULT_MUTANTS)
def test_store_mutants_are_killed_on_postgresql(pg_url: str, counterexamples: Path,
                                                name: str) -> None:
    _killed_on_postgresql(pg_url, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in STORE_MUTANTS if m not in DEFAULT_MUTANTS])
def test_every_store_mutant_is_killed_on_postgresql(pg_url: str, counterexamples: Path,
                                                    name: str) -> None:
    _killed_on_postgresql(pg_url, name)


# --------------------------------------------------------------------------- no server
def _run_this_module(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", PG_URL_ENV)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(ROOT), str(Path(__file__))],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**clean, "SETTLED_PG_BIN": str(tmp_path / "no-server"), **env})


def test_without_a_server_the_module_is_skipped_in_one_line(tmp_path: Path) -> None:
    done = _run_this_module({}, tmp_path)
    assert done.returncode in (0, 5), done.stdout  # 5: pytest ran no test, all were skipped
    loud = [line for line in done.stdout.splitlines() if "PostgreSQL tests SKIPPED" in line]
    assert len(loud) == 1, done.stdout


def test_without_a_server_ci_fails_instead_of_skipping(tmp_path: Path) -> None:
    done = _run_this_module({"CI": "true"}, tmp_path)
    assert done.returncode != 0
    assert "CI=true and no PostgreSQL server binaries" in done.stdout


# --------------------------------------------------------------------------- business store
BUSINESS_CHILD = """
import os, sys
from settled.impl.approval._business import BusinessStore

store, point = sys.argv[1:3]

def hook(name):
    if name == point:
        os._exit(17)

BusinessStore.open(store, hook=hook).adjust_stock("tok-1", {"sku": "A1001", "delta": 5})
"""


@pytest.mark.rule("W6")
@pytest.mark.parametrize(("point", "found", "stock"), [("before_commit", False, 100),
                                                       ("after_commit", True, 105)])
def test_a_hard_exit_in_a_business_call_on_postgresql_leaves_all_or_nothing(
        store_url: str, point: str, found: bool, stock: int) -> None:
    from settled.impl.approval._reconciler import LookupStatus, lookup

    BusinessStore.create(store_url).close()
    child = subprocess.run([sys.executable, "-c", BUSINESS_CHILD, store_url, point],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 17, child.stderr
    args = {"sku": "A1001", "delta": 5}
    answer = lookup(store_url, "tok-1", "adjust_stock", args)
    assert answer.status is (LookupStatus.FOUND if found else LookupStatus.ABSENT)
    with BusinessStore.open(store_url) as business:
        assert business.stock("A1001") == stock
        assert business.adjust_stock("tok-1", args)["stock_after"] == 105
        assert business.stock("A1001") == 105


def test_a_lookup_of_an_unreachable_postgresql_store_fails_and_is_never_absent(
        pg_url: str) -> None:
    from settled.impl.approval._reconciler import lookup
    from settled.impl.shared._errors import LookupFailed

    with pytest.raises(LookupFailed, match="unknown, not absent"):
        lookup(_pg.missing_database(pg_url), "tok-1", "adjust_stock", {"sku": "A1001", "delta": 5})


ORDERER = """
import json, sys
from settled.impl.approval._business import BusinessStore
from settled.impl.shared._errors import Busy, SettledError

store, p = sys.argv[1:3]
outcomes = []
with BusinessStore.open(store) as business:
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(5):
        args = {"customer": f"c{p}", "items": [{"sku": "S1", "quantity": 2}]}
        for _ in range(50):
            try:
                business.create_order(f"p{p}-{i}", args)
                outcomes.append("ok")
                break
            except Busy:
                continue
            except SettledError as exc:
                outcomes.append(type(exc).__name__)
                break
print(json.dumps(outcomes), flush=True)
"""


@pytest.mark.rule("W6")
def test_parallel_orders_on_postgresql_never_oversell(store_url: str) -> None:
    from settled.impl.approval._business import Product

    BusinessStore.create(store_url, [Product("S1", "Scarce", 15)]).close()
    racers = [subprocess.Popen([sys.executable, "-c", ORDERER, store_url, str(p)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for p in range(4)]
    for p in racers:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in racers:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.close()
    outcomes: list[str] = []
    for p in racers:
        assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
        assert p.stdout is not None
        outcomes += json.loads(p.stdout.read())
    accepted = outcomes.count("ok")
    assert set(outcomes) == {"ok", "InsufficientStock"}
    with BusinessStore.open(store_url) as business:
        assert business.stock("S1") == 15 - 2 * accepted == 1
        assert len(business.snapshot()["orders"]) == accepted == 7
