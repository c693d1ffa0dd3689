"""The expression language of declarations, public: what guards, effects, invariants, step
properties, bindings and progress properties are written in, and what every engine reads
(our compiled explorer, the Promela and Quint exports).

``V`` (the machine's variables), ``P`` (the step's parameters), ``B``/``A`` (before and
after a step), ``T`` (the step's own label), ``S`` (shared variables), ``I`` (one instance)
and ``STATE`` are the namespaces; ``when``, ``minimum``, ``maximum``, ``unchanged`` and the
aggregates build the rest with Python's operators. The node classes are for engines that
walk an expression (``Node`` is every node with operands, in ``args``).
"""

from ._expr import (
    STATE,
    A,
    Aggregate,
    B,
    I,
    IfElse,
    Max,
    Min,
    P,
    S,
    T,
    Unchanged,
    V,
    conjuncts,
    count,
    disjuncts,
    every,
    maximum,
    minimum,
    some,
    total,
    unchanged,
    when,
)
from ._expr_nodes import And, Arith, Compare, Const, Expr, Index, IsIn, Not, Or, Update, Var, lift
from ._expr_nodes import _Node as Node
from ._expr_text import _values_text as values_text

__all__ = [
    "STATE", "A", "Aggregate", "And", "Arith", "B", "Compare", "Const", "Expr", "I", "IfElse",
    "Index", "IsIn", "Max", "Min", "Node", "Not", "Or", "P", "S", "T", "Unchanged", "Update",
    "V", "Var", "conjuncts", "count", "disjuncts", "every", "lift", "maximum", "minimum",
    "some", "total", "unchanged", "values_text", "when",
]
