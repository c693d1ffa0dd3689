"""The protocol declarations: pure data, readable as a specification.

``settled.model`` imports nothing from ``settled.impl`` or
``settled.conformance``. Each machine is one module with its table at the
top; the small core turns a table into an executable oracle and a graph.
"""

from ._core import (
    Config,
    DeclarationError,
    Effect,
    Guard,
    IllegalTransition,
    Invariant,
    ModelError,
    Param,
    Params,
    Protocol,
    Snapshot,
    State,
    Step,
    StepProperty,
    Transition,
    Variable,
    Vars,
)
from ._rules import RULES
from .query import QUERY, build_query_machine

# Every declared machine, by the name the command line uses.
MACHINES: dict[str, Protocol] = {"query": QUERY}

__all__ = [
    "MACHINES",
    "QUERY",
    "RULES",
    "Config",
    "DeclarationError",
    "Effect",
    "Guard",
    "IllegalTransition",
    "Invariant",
    "ModelError",
    "Param",
    "Params",
    "Protocol",
    "Snapshot",
    "State",
    "Step",
    "StepProperty",
    "Transition",
    "Variable",
    "Vars",
    "build_query_machine",
]
