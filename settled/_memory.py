"""How much memory an exploration will take, said before it starts.

The explorer keeps every reached state (and, for one machine, its edges) in memory, so
memory grows with the number of reachable states. The figures below are measured with
``/usr/bin/time -f %M settled explore ... --json`` on this project's tables (the search and
then the progress properties; peak resident set size minus the interpreter's own ~35 MB,
divided by the states reached). The counts are held to the explorer's by
``tests/test_cli.py`` (the small rows) and by the slow tests that explore the large ones:

=========================================  ===========  ============  ===========
configuration                              states       peak RSS      bytes/state
=========================================  ===========  ============  ===========
query, 1 worker                                  4,758        42 MB            -
query, 2 workers (the default)                  18,054        58 MB        1,300
query, 3 workers                                47,634        96 MB        1,400
query, 4 workers                               103,158       163 MB        1,300
approval                                           271        37 MB            -
approval system, 2 calls                        27,165        68 MB        1,300
approval system, 3 calls                     1,599,429     2,321 MB        1,500
query system, 2 queries, 1 worker            2,122,764     2,703 MB        1,300
query system, 2 queries, 2 workers           8,184,948     9,949 MB        1,300
query system, 3 queries, 2 workers,
  lease epoch 1, task version 1             12,315,834    15,273 MB        1,300
ledger                                             138        35 MB            -
ledger system, 2 calls                           1,505        36 MB            -
ledger system, 3 calls                          13,958        66 MB        2,300
=========================================  ===========  ============  ===========

The query model at other bounds than its defaults (``--max-epoch``, ``--max-task-version``)
is estimated exactly only where measured (``MEASURED_AT_BOUNDS``: the row at lease epoch 1,
task version 1, its state count measured). Elsewhere the defaults' figure bounds it: from
above when every bound is at or below its default, from below when every bound is at or
above; with one above and one below, nothing does. ``settled explore`` runs only what is
known to fit, unless ``--max-states`` caps it.

A configuration not in the table is extrapolated from its neighbours: a query system
with other than two workers is the two-worker system scaled by the single machine's
growth between the two worker counts (that predicts 2.16 M for 2 queries and 1 worker,
where 2.12 M were measured); one more instance multiplies states by the last instance's
growth (``S(n+1) ≈ S(n)² / S(n-1)``; for the approval system that predicts 2.7 M where
1.6 M were measured, so the extrapolation errs on the high side).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

BASE_BYTES = 60 * 2**20  # the interpreter, the tables and the explorer before any state
# One machine: its states, edges and the graph for --graph (about 1,300-1,400 measured without
# --graph). A system: its states, then its graph for the progress properties (1,300-1,500
# measured for the large ones, above; the largest rounded up).
SINGLE_BYTES_PER_STATE = 3_000
SYSTEM_BYTES_PER_STATE = 1_500

# Reachable states measured (see the module docstring). Keys: (model, instances, workers);
# workers is None for the approval machine, which has none.
MEASURED: dict[tuple[str, int, int | None], int] = {
    ("query", 1, 1): 4_758, ("query", 1, 2): 18_054, ("query", 1, 3): 47_634,
    ("query", 1, 4): 103_158, ("query", 2, 1): 2_122_764, ("query", 2, 2): 8_184_948,
    ("approval", 1, None): 271, ("approval", 2, None): 27_165, ("approval", 3, None): 1_599_429,
    ("ledger", 1, None): 138, ("ledger", 2, None): 1_505, ("ledger", 3, None): 13_958,
}
DEFAULT_WORKERS = 2
# Measured at other bounds. Keys: (model, instances, workers, max epoch, max task version).
MEASURED_AT_BOUNDS: dict[tuple[str, int, int, int, int], int] = {
    ("query", 3, 2, 1, 1): 12_315_834,
}


@dataclass(frozen=True, slots=True)
class Estimate:
    states: int
    bytes: int
    measured: bool  # False: extrapolated from measured neighbours
    limit: int  # the most this machine can give: 80 % of its physical memory
    bound: str = ""  # "at most" / "at least": a figure for a larger / smaller space than asked

    @property
    def fits(self) -> bool:
        """The run is known to fit: its figure fits and is not a lower bound."""
        return self.bytes <= self.limit and self.bound != "at least"

    @property
    def cannot_fit(self) -> bool:
        """The run is known not to fit: its figure does not and is not an upper bound."""
        return self.bytes > self.limit and self.bound != "at most"

    def text(self) -> str:
        how = "measured" if self.measured else "extrapolated from measured runs"
        return (f"{self.bound or 'about'} {self.states:,} states and {_size(self.bytes)} of "
                f"memory ({how}); this machine allows {_size(self.limit)}")

    def to_json(self) -> dict[str, object]:
        return {"states": self.states, "bytes": self.bytes, "measured": self.measured,
                "limit_bytes": self.limit, "bound": self.bound or "about"}


def _size(n: int) -> str:
    return f"{n / 2**30:,.1f} GB" if n >= 2**30 else f"{n / 2**20:,.0f} MB"


def machine_limit() -> int:
    """80 % of physical memory; 4 GB when the platform does not say."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 5 * 2**30
    return int(total * 0.8)


def states(model: str, instances: int, workers: int | None) -> tuple[int, bool]:
    """Reachable states of ``model`` with ``instances`` instances: (count, measured)."""
    # Unasked, the single query machine has two workers and the query system one process.
    w = None if model != "query" else (workers or (1 if instances > 1 else DEFAULT_WORKERS))
    key = (model, instances, w)
    if key in MEASURED:
        return MEASURED[key], True
    if model == "query" and w is not None and w > 4:
        grown, _ = states(model, instances, w - 1)
        return grown * 3 ** instances, False  # past the table: each worker about triples it
    if model == "query" and instances > 1 and w != DEFAULT_WORKERS:
        # The system at the default workers, scaled by the single machine's growth between
        # the default and the asked number of workers.
        base, _ = states(model, instances, DEFAULT_WORKERS)
        single, single_default = MEASURED[(model, 1, w)], MEASURED[(model, 1, DEFAULT_WORKERS)]
        return max(1, int(base * single / single_default)), False
    if instances >= 3:
        last, _ = states(model, instances - 1, w)
        before, _ = states(model, instances - 2, w)
        return last * last // max(1, before), False
    raise Unmeasured(f"no measured run of {model} with {instances} instance(s)")


class Unmeasured(LookupError):
    """No measured figure to estimate from (a machine added after the table was made)."""


def estimate(model: str, instances: int, workers: int | None,
             max_states: int | None = None, limit: int | None = None,
             bounds: tuple[int | None, int | None] = (None, None)) -> Estimate | None:
    """The estimate, or None when nothing measured stands behind one (said, not guessed).
    ``bounds``: the query model's (max epoch, max task version) asked for, None each for
    its default. At other bounds a measured row is exact; else, with every bound at or
    below the defaults, the defaults' figure is an upper bound ("at most"); at or above, a
    lower bound ("at least"); both ways, none. ``max_states`` caps the run: the estimate
    is then at most that many states."""
    try:
        count, measured, bound = _at_bounds(model, instances, workers, bounds)
    except (Unmeasured, KeyError):
        if max_states is None or bounds == (None, None):
            return None
        count, measured, bound = max_states, True, "at most"  # nothing known but the cap
    if max_states is not None and (max_states < count or bound == "at least"):
        count, measured, bound = max_states, True, "" if max_states < count else "at most"
    per_state = SINGLE_BYTES_PER_STATE if instances == 1 else SYSTEM_BYTES_PER_STATE
    return Estimate(count, BASE_BYTES + count * per_state, measured,
                    machine_limit() if limit is None else limit, bound)


def _at_bounds(model: str, instances: int, workers: int | None,
               bounds: tuple[int | None, int | None]) -> tuple[int, bool, str]:
    """:func:`states` at the asked bounds, with what the figure is: "" (the space's own),
    "at most" or "at least" (the defaults' figure, for a smaller or a larger space)."""
    if bounds == (None, None):
        return (*states(model, instances, workers), "")
    from settled._bounds import Bounds

    got = Bounds(*bounds).effective(model, instances)
    default = Bounds().effective(model, instances)
    if got == default:
        return (*states(model, instances, workers), "")
    w = workers or (1 if instances > 1 else DEFAULT_WORKERS)
    key = (model, instances, w, got["max_epoch"], got["max_task_version"])
    if key in MEASURED_AT_BOUNDS:
        return MEASURED_AT_BOUNDS[key], True, ""
    if all(got[k] <= default[k] for k in got):
        return (*states(model, instances, workers), "at most")
    if all(got[k] >= default[k] for k in got):
        return (*states(model, instances, workers), "at least")
    raise Unmeasured(f"no measured run of {model} at {got}, one bound above its default and "
                     "one below")
