"""Hypothesis settings profiles for the lockstep campaigns.

``dev`` takes seconds (the developer loop), ``ci`` is what the default test
run, ``settled verify`` and ``settled mutants`` use, ``thorough`` is a long
campaign (``pytest -m slow`` with ``SETTLED_PROFILE=thorough``). Deadlines are
off: these are real SQLite transactions with fsync on a shared machine, and
a slow step is not a wrong step. The example database is off so runs are
reproducible from their seed alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, database=None, derandomize=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                      HealthCheck.data_too_large])

PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=15, stateful_step_count=25, **_COMMON),  # type: ignore[arg-type]
    "ci": settings(max_examples=150, stateful_step_count=50, **_COMMON),  # type: ignore[arg-type]
    "thorough": settings(max_examples=600, stateful_step_count=80, **_COMMON),  # type: ignore[arg-type]
}


def profile(name: str | None = None) -> settings:
    """The named profile; by default $SETTLED_PROFILE, else ``ci``."""
    chosen = name or os.environ.get("SETTLED_PROFILE", "ci")
    if chosen not in PROFILES:
        raise ValueError(f"unknown Hypothesis profile {chosen!r}; choose one of {sorted(PROFILES)}")
    return PROFILES[chosen]


@contextmanager
def install_independent_draws() -> Iterator[None]:
    """While a campaign runs: draws depend on the seed alone, not on where settled is installed.

    Hypothesis mixes into some draws the literal constants of every loaded module that is not
    installed under site-packages. From a checkout (an editable install) settled's own modules
    are such modules, and from a wheel they are not, so one seed drew two campaigns (155 and
    156 random runs). The kit turns that pool off for its campaigns and restores it after;
    Hypothesis's global constants still apply. Without the hook (another Hypothesis) there is
    nothing to turn off, and the reproducibility test says whether the campaigns still agree.
    """
    from hypothesis.internal.conjecture import providers

    original = getattr(providers, "_get_local_constants", None)
    if original is None:
        yield
        return
    empty = providers.Constants()  # type: ignore[attr-defined]
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()
