"""The protocol declarations: pure data, readable as a specification.

``settled.model`` imports nothing from ``settled.impl`` or
``settled.conformance``. Each machine is one module with its table at the
top; the small core turns a table into an executable oracle and a graph.
"""

import importlib
from typing import TYPE_CHECKING, Any

from . import expr
from ._compiled import compile_machine
from ._core import (
    Config,
    DeclarationError,
    IllegalTransition,
    ModelError,
    Protocol,
    Step,
    lockstep_only,
    rule_sort_key,
)
from ._liveness import STRONG, WEAK, Liveness, Pred, Progress
from ._parts import (
    Effect,
    Guard,
    Invariant,
    Param,
    Params,
    Snapshot,
    State,
    StepProperty,
    Transition,
    Variable,
    Vars,
)
from ._parts import Value as Value
from ._rules import RULES
from ._system import System
from ._system_parts import (
    Binding,
    Refinement,
    SharedTransition,
    SystemConfig,
    SystemInvariant,
    SystemStep,
)
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
    "STRONG",
    "SYSTEMS",
    "WEAK",
    "ApprovalState",
    "Binding",
    "Config",
    "DeclarationError",
    "Effect",
    "Guard",
    "IllegalTransition",
    "Invariant",
    "LedgerState",
    "Liveness",
    "ModelError",
    "Oracle",
    "Param",
    "Params",
    "Pred",
    "Progress",
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
    "SystemStep",
    "Transition",
    "Value",
    "Variable",
    "Vars",
    "build_approval_machine",
    "build_approval_system",
    "build_ledger_machine",
    "build_ledger_system",
    "build_query_machine",
    "build_query_system",
    "compile_machine",
    "expr",
    "lockstep_only",
    "rule_sort_key",
    "static_findings",
]

if TYPE_CHECKING:
    from ._graph import static_findings
    from ._oracle import Oracle

# Loaded on first use: the oracle needs ``transitions`` and the static findings ``networkx``.
_LAZY = {"Oracle": "._oracle", "static_findings": "._graph"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
