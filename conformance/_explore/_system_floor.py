"""The floor under the system explorer's seconds in CPython, measured on the graph it built.

Whatever computes a configuration's successors, a search must at least produce each
successor entry, deduplicate it against the configurations it has seen, and record the
edge. :func:`search_floor` times that, alone: the graph's successor entries (each
instance's distinct outcomes, one per synchronised step and one per system step), given in
advance, each produced by one hit in a small dict (64 int keys: the cost of one lookup in a
step table, ``_Space.trans``, which holds a few outcomes per tuple), looked up in a fresh
visited set of the search's own structure (a row per canonical instance tuple, indexed by
the shared values' number: a list indexing, then an array one, no hashing), numbered when new, appended to
an edge array. No guard, no canonical form, no step is computed. It is a floor for this
design's work per entry, not for every conceivable search; the search's own seconds also
hold what follows it (the trap and orbit passes over the whole graph).
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass
from typing import Any

from settled.conformance._paused import gc_paused

from ._system_space import MASK, SHIFT

__all__ = ["Floor", "search_floor"]


@dataclass(frozen=True)
class Floor:
    entries: int  # successor entries in the graph (see the module docstring)
    seconds: float  # the bare loop over them
    reached: int  # configurations the loop numbered (those some step leads to)


def search_floor(graph: Any) -> Floor:
    """Time the bare loop on ``graph`` (``explore_system(..., keep_graph=True).graph``),
    over every one of its successor entries."""
    sp, keys, _parent, _start, succ, _masks, _visited = graph
    codes = keys.codes
    cids = array("q", (codes[n] & MASK for n in succ))  # untimed: the entries, given
    sids = array("q", (codes[n] >> SHIFT for n in succ))
    table = {k: k for k in range(64)}  # a step table's size: a few outcomes per tuple
    get = table.get
    with gc_paused():
        rows = [array("q", [-1] * sp.row_width) for _ in sp.cids]
        out: array[int] = array("q")
        count = 0
        start = time.perf_counter()
        for c, s in zip(cids, sids, strict=True):
            get(s)  # a hit while there are at most 64 shared values, as in every system here
            row = rows[c]
            n = row[s]
            if n < 0:
                n = row[s] = count
                count += 1
            out.append(n)
        seconds = time.perf_counter() - start
    return Floor(len(succ), seconds, count)
