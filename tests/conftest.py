from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Path:
    return ROOT


# --------------------------------------------------------------------------- PostgreSQL
# One cluster for the whole test session, started on first use by a test that
# asks for ``pg_url``. $SETTLED_TEST_PG_URL points the tests at an existing
# server instead (its account needs CREATE on the database: every test works
# in a fresh schema). Without either, the PostgreSQL tests are skipped (one
# line, tests/test_postgres.py) or, with CI=true, fail.
PG_URL_ENV = "SETTLED_TEST_PG_URL"


def postgres_missing() -> str | None:
    """Why the PostgreSQL tests cannot run here, or None if they can."""
    import importlib.util

    from settled.impl.shared._pgcluster import find_binaries

    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install 'settled[postgres]')"
    if os.environ.get(PG_URL_ENV) or find_binaries() is not None:
        return None
    return ("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found and "
            f"${PG_URL_ENV} is not set")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    given = os.environ.get(PG_URL_ENV)
    if given:
        yield given
        return
    from settled.impl.shared._pgcluster import Cluster

    missing = postgres_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {missing}: the PostgreSQL tests must run in CI")
        pytest.skip(missing)
    # fsync off: campaigns of thousands of commits on a shared disk; a killed
    # worker process loses nothing either way (see impl/shared/_pgcluster.py).
    with Cluster(durable=False) as cluster:
        yield cluster.url()


def need_spin() -> None:
    """Skip in one line without SPIN (Debian's spin and a C compiler); under CI=true, fail."""
    if shutil.which("spin") and any(shutil.which(c) for c in ("tcc", "cc", "gcc")):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true and spin (Debian package spin) or cc is missing: SPIN must run in CI")
    pytest.skip("spin not installed (apt-get install spin)")


def need_quint() -> str:
    """quint's path; skip in one line without it; under CI=true, fail."""
    from settled.conformance._explore._quint import INSTALL

    found = shutil.which("quint")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and quint is missing ({INSTALL}): the Quint export must be "
                    "typechecked in CI")
    pytest.skip(f"quint not installed ({INSTALL})")


# --------------------------------------------------------------------------- the slow stage's order
# The slow stage's longest tests, with their seconds in a fresh-clone `.ci/run` (its log lists
# the 25 longest). pytest-xdist's worksteal hands each of the two workers a contiguous half of
# the collection, and an idle worker steals the other's last pending tests. In file order the
# wheel's `settled verify` (about 8 minutes) came last and ran alone at the end, one core idle
# (the stage was 88 % busy). So these go first, longest first, alternately at the head of each
# half: both workers start on a long test, and what is stolen at the end is short.
LONGEST: dict[str, int] = {
    "tests/test_bench.py::test_the_full_bench_meets_its_sizes": 472,
    "tests/test_wheel.py::test_settled_verify_from_the_wheel_in_an_empty_folder": 464,
    "tests/test_mutants.py::test_the_ci_campaign_kills_the_whole_catalogue": 375,
    "tests/test_mutants.py::test_the_random_phase_of_each_seed_passes": 97,
    "tests/test_lockstep.py::test_a_long_campaign_finds_no_divergence": 90,
    "tests/test_systems.py::test_the_compiled_search_is_system_enabled_step_for_step"
    "[query-old-invariant]": 88,
    "tests/test_reproducible.py::test_one_seed_gives_one_campaign": 71,
    "tests/test_http_platform.py::test_the_http_platform_passes_the_lockstep_kit": 64,
    "tests/test_systems.py::test_the_query_system_with_shared_state_has_no_findings": 64,
}


def seconds_known(nodeid: str) -> int:
    """A test's seconds in LONGEST (matched by prefix: one entry covers its parameters), else 0."""
    return next((s for prefix, s in LONGEST.items() if nodeid.startswith(prefix)), 0)


def longest_first_in_both_halves(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the LONGEST ones ranked by seconds, the 1st, 3rd, 5th... at the head of
    the first half and the 2nd, 4th... at the head of the second; every other test keeps its
    order (a module's tests stay together, so its module fixtures are set up once)."""
    long = sorted((i for i in items if seconds_known(i.nodeid)), key=lambda i: -seconds_known(i.nodeid))
    if not long:
        return items
    rest = [i for i in items if not seconds_known(i.nodeid)]
    first, second = long[0::2], long[1::2]
    fill = max(0, len(items) // 2 - len(first))
    return [*first, *rest[:fill], *second, *rest[fill:]]


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: the halves are of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = longest_first_in_both_halves(items)
