"""Liveness under fairness, checked on the explored graph: fair cycles as lassos.

What is checked
---------------
Each declared progress property ``premise ~> goal`` (``model/_liveness``,
``model/progress``) under the declared fairness. It is violated when a fair
infinite run reaches a premise configuration and never a goal one after it.
On the finite reachable graph such a run ends in a *fair cycle* of
configurations outside the goal, reached from a premise configuration
without passing the goal. Every configuration may also stutter (nothing
happens any more, as in TLA+): that is the cycle a run stuck in a state
takes, and it is fair only where no step that fairness requires is enabled.

The search (Emerson–Lei style): restrict the graph to the configurations
outside the goal reachable from a premise one without the goal; split it
into strongly connected components (Tarjan); a component is fair when for
each weak or strong constraint some step of its group stays inside it, or,
weak, one of its configurations has no step of the group enabled, or,
strong, none has. A component that fails a weak constraint has every
configuration enabling that group and no such step inside, so no cycle in it
is fair: it is dropped. One that fails a strong constraint loses the
configurations that enable the group, and the rest is split again. What
remains are fair components; any one gives a lasso.

A violation is a lasso: the shortest prefix from the initial configuration
to the cycle (through a premise configuration, then outside the goal), and a
cycle through the component that takes one step of every group whose
constraint a step satisfies and visits a configuration that disables every
weakly fair group no step satisfies. It is printed as numbered steps (the
cycle after ``then forever``) and written as ITF with ``loop`` set.

Model bounds
------------
A guard marked ``bound`` (``epochs_left``) only keeps the space finite. A
fair cycle that is fair only because a bound holds back a required step is
not a violation of the protocol: it is reported apart, as *stuck at a
bound*, with the guards that hold it. A held-back step counts as "would be
enabled" when, taken with its bound ignored, it moves the control state or
leads to a configuration where a step that fairness requires is enabled
(one step of lookahead: a
held-back claim that only leads to another held-back claim does not excuse
the cycle). Known limit: a run that would need two or more steps past a
bound before anything it requires is enabled is reported as a violation.

Systems are checked on the symmetry-reduced graph: fairness groups and
progress predicates are invariant under renaming instances and workers
(validated: a group may not name worker values), so a fair cycle of the
quotient is a fair run of the system. The lasso is rebuilt on concrete
configurations; where the cycle returns to its first configuration only up
to a renaming, it is unrolled until it returns exactly.

Where it lives
--------------
``_graph`` (verdicts, masks, the graph interface, lassos, the result), ``_search`` (the fair
cycle search), ``_machine`` (one machine), ``_system`` (a system) and ``_quiescence`` (the
quiescence bound). Everything callers use is re-exported here.
"""

from __future__ import annotations

from ._graph import (
           AT_BOUND,
           CYCLIC,
           HOLDS,
           NOT_CHECKED,
           ONCE,
           REQUIRED,
           VIOLATED,
           Graph,
           Lasso,
           LivenessResult,
           Verdict,
)
from ._machine import MachineGraph, MachineStep, check_machine, check_protocol, classifier, held_in
from ._quiescence import QuiescenceBound, is_fault, quiescence_bound
from ._search import check_graph, fair_components
from ._system import SystemGraph, check_system, explore_system_liveness, system_classifier

__all__ = ["AT_BOUND", "CYCLIC", "HOLDS", "NOT_CHECKED", "ONCE", "REQUIRED", "VIOLATED", "Graph",
           "Lasso", "LivenessResult", "MachineGraph", "MachineStep", "QuiescenceBound", "SystemGraph",
           "Verdict", "check_graph", "check_machine", "check_protocol", "check_system",
           "classifier", "explore_system_liveness", "fair_components", "held_in", "is_fault",
           "quiescence_bound", "system_classifier"]
