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
