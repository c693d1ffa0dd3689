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
from .approval import APPROVAL, ApprovalState, build_approval_machine
from .query import QUERY, QueryState, build_query_machine

# Every declared machine, by the name the command line uses.
MACHINES: dict[str, Protocol] = {"query": QUERY, "approval": APPROVAL}

__all__ = [
    "APPROVAL",
    "MACHINES",
    "QUERY",
    "RULES",
    "ApprovalState",
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
    "QueryState",
    "Snapshot",
    "State",
    "Step",
    "StepProperty",
    "Transition",
    "Variable",
    "Vars",
    "build_approval_machine",
    "build_query_machine",
]
