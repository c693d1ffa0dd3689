"""The explorer: breadth-first model checking of a declared protocol and its environment.

What is explored
----------------
One instance of one declared machine (one query), with the workers that the
declaration already models inside it: every configuration reachable through
the steps ``Protocol.enabled`` (the table's successor function) allows.
Several instances sharing state are a declared system (``settled.model.systems``),
explored by ``_system.explore_system``. A state is terminal when its control
state is.

Checked on every run: each invariant on every reachable state, each step
property on every step, values outside a variable's declared domain,
deadlocks (a non-terminal state with no successor), traps (a state from
which no terminal state can be reached), declared states never reached and
declared transitions never fired. Each finding carries the shortest path from
the initial state, replayable as a step list and as ITF; only the first
(shortest) finding per property name is kept. A configuration with a value
outside its domain is reported and not explored further (past its bounds the
space may be infinite).

How it stays fast
-----------------
The successor function is generated from the declaration's expressions
(``model._compiled.compile_explorer``): one Python function per control
state, with the state, each parameter choice, the step's label and the
variables a step does not write folded in. It checks the configuration (the
invariants with the state known, and only the domains a step into that state
can leave), then interns each successor key ``(state, *values)`` with one
dict lookup and appends its id and label to two arrays; a self-loop that
writes nothing costs no lookup. Ids are dense and given in BFS order; a
parents array gives the shortest paths, and broken invariants and step
properties are kept only where they occur. Edges, deadlocks and traps
(backward reachability from the terminal states) are read off the arrays
afterwards.

``explore_via_transitions`` (``_oracle_check``) runs the same search but
computes every step by firing it through the ``transitions.Machine``
oracle; it fails loudly on any edge where the oracle and the table disagree.
Counterexamples, their step lists and their replay are in ``_counterexample``.

Where it lives
--------------
``_local`` (the search), ``_space`` (the reached graph read off it), ``_result`` (what a run
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
