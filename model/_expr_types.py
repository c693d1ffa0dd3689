"""Typing an expression against the declared domains: the kinds of values a node can take.

:class:`Env` holds the domains a declaration's references range over; the helpers
here say what kind a set of values is and refuse an operand of the wrong kind. Every
node's ``values`` (``_expr_nodes``, ``_expr``) calls them, and :func:`~._expr.check`
types a whole declaration with them. They are their own room because they read no
node: an expression is only an annotation here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ._errors import DeclarationError
from ._expr_text import _SPACE_MEANING, Ref, Value, _ref_text

if TYPE_CHECKING:
    from ._expr_nodes import Expr

_BOOLS: frozenset[Value] = frozenset((False, True))
_MAX_VALUES = 100_000


class Env:
    """The declared domains a declaration's references range over."""

    def __init__(self, where: str, domains: Mapping[Ref, Iterable[Value]]) -> None:
        self.where = where
        self.domains = {k: frozenset(v) for k, v in domains.items()}

    def domain(self, space: str, name: str) -> frozenset[Value]:
        d = self.domains.get((space, name))
        if d is None:
            known = sorted(n if s not in ("B", "A") else f"{s}.{n}" for s, n in self.domains
                           if s == space)
            raise DeclarationError(f"{_ref_text(space, name)} is not declared here; "
                                   f"{_SPACE_MEANING[space].split(':')[0]} has {known}")
        return d


def _kind(x: Value) -> str:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int"
    if isinstance(x, str):
        return "str"
    if isinstance(x, tuple):
        return "tuple"
    if x is None:
        return "none"
    return type(x).__name__


def _kinds(values: Iterable[Value]) -> set[str]:
    return {_kind(x) for x in values}


def _kind_text(kinds: set[str]) -> str:
    names = {"bool": "a truth value", "int": "a number", "str": "a name", "tuple": "a tuple",
             "none": "nothing"}
    return " or ".join(names.get(k, k) for k in sorted(kinds))


def _ints(e: Expr, env: Env) -> frozenset[Value] | None:
    # None stands for a parameter the step does not have (step properties): the property
    # must not read it there, which the generated code would report as a TypeError.
    vs = _present(e.values(env))
    if vs is not None and _kinds(vs) - {"int"}:
        raise DeclarationError(f"`{e.text()}` is {_kind_text(_kinds(vs))}, where a number is "
                               "expected")
    return vs


def _present(vs: frozenset[Value] | None) -> frozenset[Value] | None:
    return None if vs is None else vs - {None}


def _tuples(e: Expr, env: Env) -> frozenset[Value] | None:
    vs = _present(e.values(env))
    if vs is not None and _kinds(vs) - {"tuple"}:
        raise DeclarationError(f"`{e.text()}` is {_kind_text(_kinds(vs))}, where a tuple is "
                               "expected")
    return vs


def _bools(e: Expr, env: Env, what: str) -> None:
    vs = e.values(env)
    if vs is not None and _kinds(vs) - {"bool"}:
        raise DeclarationError(f"`{e.text()}`, {what}, is {_kind_text(_kinds(vs))}, not a truth "
                               "value; compare it (== or isin)")

