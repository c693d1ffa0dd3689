"""How an expression reads as text: the pieces every other room of the language shares.

The binding strengths the renderer parenthesises by, a constant and a reference in
words, what each namespace means (named by the error messages of compiling and
typing) and a set of values as the messages show it. It is its own room because the
nodes (``_expr_nodes``), their typing (``_expr_types``) and their compilation
(``_expr_compile``) all read it, and it reads none of them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeAlias

Value: TypeAlias = Any
# A reference: (namespace, name). Namespaces: V machine variable, P parameter, S system
# variable, STATE the control state, B/A before/after (name "state" for the control state),
# T the step's label (trigger, actor), I one instance inside an aggregate.
Ref: TypeAlias = tuple[str, str]

# Binding strength, weakest first: the renderer parenthesises a weaker operand.
_OR, _AND, _NOT, _CMP, _ADD, _ATOM = 1, 2, 3, 4, 5, 9


def _const_text(x: Value) -> str:
    if isinstance(x, enum.Enum):
        x = x.value
    if isinstance(x, bool):
        return "true" if x else "false"
    if x is None:
        return "none"
    if isinstance(x, tuple):
        return "(" + ", ".join(_const_text(y) for y in x) + ")"
    return str(x)


_SPACE_MEANING = {"V": "V: the machine's variables", "P": "P: the step's parameters",
                  "S": "S: the system's variables", "STATE": "STATE: the control state",
                  "B": "B: the configuration before the step", "A": "A: the one after",
                  "T": "T: the step's trigger and actor", "I": "I: one instance (in an aggregate)"}


def _ref_text(space: str, name: str) -> str:
    if space == "STATE":
        return "state"
    if space in ("B", "A"):
        return f"{'before' if space == 'B' else 'after'}.{name}"
    if space == "T":
        return f"step.{name}"
    return name


def _values_text(values: Iterable[Value]) -> str:
    return "{" + ", ".join(sorted(_const_text(x) for x in values)) + "}"

