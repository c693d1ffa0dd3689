"""The cyclic garbage collector, paused around a search or a check.

A search keeps millions of live tuples and dicts; each collection of the
oldest generation walks all of them, so a long search pays for it over and
over, more the more the process already holds. Nothing these loops build is
cyclic, so reference counting frees their garbage anyway; the collector runs
again, as before, when the loop ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; re-enable it only if it was enabled."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            # What the block made is still young: the next collection would walk all of it
            # (seconds, for millions of objects). Move every object to the oldest generation
            # unwalked (freeze, then unfreeze): a cycle among them is still collected, by the
            # next full collection.
            gc.freeze()
            gc.unfreeze()
            gc.enable()
