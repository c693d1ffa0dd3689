"""The floor under the system explorer's seconds in CPython, measured on the graph it built.

Whatever computes a configuration's successors, a search must at least deduplicate every
successor entry it produces against the configurations it has seen and record the edge.
:func:`dedupe_floor` times exactly that, alone: the graph's successor entries, given in
advance, each looked up in a fresh visited set of the search's own structure (a row per
canonical instance tuple, indexed by the shared values' number: two list indexings, no
hashing, the cheapest of the structures measured), numbered when new, appended to an edge
array. Nothing is computed: no guard, no canonical form, no step.

It times the same loop again with the least a successor can cost to produce added: one
hit in a dict keyed by an int (the search's step table, ``_Space.trans``), per entry. That
second loop is the floor: the search's own inner loop does that and more for each entry.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass
from typing import Any

from settled.conformance._paused import gc_paused

from ._system_space import MASK, SHIFT

__all__ = ["Floor", "dedupe_floor"]


@dataclass(frozen=True)
class Floor:
    entries: int  # successor entries in the graph (each state's distinct outcomes)
    dedupe_seconds: float  # the bare dedupe loop over them
    floor_seconds: float  # the same loop with one int-keyed dict hit per entry
    reached: int  # configurations the dedupe loop numbered (the visited ones it reaches)


def dedupe_floor(graph: Any) -> Floor:
    """Time both loops on ``graph`` (``explore_system(..., keep_graph=True).graph``), each
    over all of its successor entries, each with a fresh visited set."""
    sp, keys, _parent, _start, succ, _masks, _visited = graph
    codes = keys.codes
    cids = array("q", (codes[n] & MASK for n in succ))  # untimed: the entries, given
    sids = array("q", (codes[n] >> SHIFT for n in succ))
    table = {k: k for k in range(64)}  # a step table's size: a few outcomes per tuple
    get = table.get
    with gc_paused():
        rows = [[-1] * sp.row_width for _ in sp.cids]
        out: array[int] = array("q")
        count = 0
        start = time.perf_counter()
        for c, s in zip(cids, sids, strict=True):
            row = rows[c]
            n = row[s]
            if n < 0:
                n = row[s] = count
                count += 1
            out.append(n)
        dedupe = time.perf_counter() - start
        rows = [[-1] * sp.row_width for _ in sp.cids]
        out = array("q")
        count = 0
        start = time.perf_counter()
        for c, s in zip(cids, sids, strict=True):
            get(s)
            row = rows[c]
            n = row[s]
            if n < 0:
                n = row[s] = count
                count += 1
            out.append(n)
        floor = time.perf_counter() - start
    return Floor(len(succ), dedupe, floor, count)
