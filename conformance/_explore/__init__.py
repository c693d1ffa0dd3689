"""The explorer: breadth-first model checking of a declared protocol and its environment.

What is explored
----------------
``instances`` copies of one declared machine (N queries), each with the
workers that the declaration already models inside it. A global state is the
tuple of the N per-instance configurations. From a global state, every step
that ``Protocol.enabled`` (the table's successor function) allows on instance
``i`` replaces instance ``i`` and leaves the others alone, EXCEPT a ``sync``
transition (say, a crash that takes every lease of one worker at once): it is
offered once per parameter value for the whole composition and fires
together on every instance where it is enabled. A global state is terminal
when every instance is in a terminal state.

Checked on every run: each invariant on every reachable state (per instance),
each step property on every step, values outside a variable's declared
domain, deadlocks (a non-terminal state with no successor), traps (a state
from which no all-terminal state can be reached), declared states never
reached and declared transitions never fired. Each finding carries the
shortest path from the initial state, replayable as a step list and as ITF;
only the first (shortest) finding per property name is kept. A configuration
with a value outside its domain is reported and not explored further (past
its bounds the space may be infinite).

How it stays fast
-----------------
The instances never read each other's variables, so everything about one
instance is computed once per *local* configuration (the query machine has
about 9k of them) and the global search only does integer arithmetic:

* The local space is explored first, through the successor function. Per
  local configuration it keeps the distinct successors, the broken
  invariants and domains, and the step properties each of its steps breaks.
* A global state is one int: local id ``c_i`` in bits ``[B*i, B*(i+1))``.
  A local step on instance ``i`` is ``key + (dest - c_i) << B*i``, so a
  successor costs one addition and one dict lookup. Ids are dense and given
  in BFS order; a parents array gives the shortest paths.
* A property broken by a local configuration (or one of its steps) is first
  reached in the first global state, in BFS order, that contains that
  configuration, so the search only records where each local configuration
  was first seen and the findings are read off afterwards.
* Traps: if every reached local configuration can settle by its own
  non-sync steps (which no other instance can disable), no global state is
  a trap and nothing more is computed. Otherwise: backward reachability from
  the all-terminal states, where the reverse edges are never stored: a
  predecessor of ``g`` is ``g`` with one instance replaced by a local
  predecessor (or a sync pre-image), looked up among the reached states.

``explore_via_transitions`` (``_oracle_check``) runs the same search but
computes every local step by firing it through the ``transitions.Machine``
oracle; it fails loudly on any edge where the oracle and the table disagree.
Counterexamples, their step lists and their replay are in ``_counterexample``.

Where it lives
--------------
``_local`` (the local space), ``_space`` (the global search), ``_result`` (what a run
returns), ``_entry`` (the entry points) and ``_findings`` (the findings read off a search).
Everything callers use is re-exported here.
"""

from __future__ import annotations

from .._counterexample import Counterexample, Finding, TraceStep, parse_steps, replay
from ._entry import _run as _run
from ._entry import explore, explore_via_transitions
from ._local import Progress
from ._local import Successors as Successors
from ._local import TransitionKey as TransitionKey
from ._local import _Local as _Local
from ._result import ExploreResult

# Counterexamples and their replay live in _counterexample; they are re-exported here, where the
# explorer's callers have always found them.
__all__ = ["Counterexample", "ExploreResult", "Finding", "Progress", "TraceStep", "explore",
           "explore_via_transitions", "parse_steps", "replay"]
