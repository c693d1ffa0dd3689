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
from ._system import Binding, Refinement, SharedTransition, System, SystemConfig, SystemInvariant
from .approval import APPROVAL, ApprovalState, build_approval_machine
from .ledger import LEDGER, LedgerState, build_ledger_machine
from .query import QUERY, QueryState, build_query_machine
from .systems import SYSTEMS, build_approval_system, build_ledger_system, build_query_system

# Every declared machine, by the name the command line uses.
MACHINES: dict[str, Protocol] = {"query": QUERY, "approval": APPROVAL, "ledger": LEDGER}

__all__ = [
    "APPROVAL",
    "LEDGER",
    "MACHINES",
    "QUERY",
    "RULES",
    "SYSTEMS",
    "ApprovalState",
    "Binding",
    "Config",
    "DeclarationError",
    "Effect",
    "Guard",
    "IllegalTransition",
    "Invariant",
    "LedgerState",
    "ModelError",
    "Param",
    "Params",
    "Protocol",
    "QueryState",
    "Refinement",
    "SharedTransition",
    "Snapshot",
    "State",
    "Step",
    "StepProperty",
    "System",
    "SystemConfig",
    "SystemInvariant",
    "Transition",
    "Variable",
    "Vars",
    "build_approval_machine",
    "build_approval_system",
    "build_ledger_machine",
    "build_ledger_system",
    "build_query_machine",
    "build_query_system",
]
