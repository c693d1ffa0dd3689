"""Compiling an expression to Python: how references read, and the function built once.

Each node writes its own Python source (``Expr.source``) into a :class:`_Namespace`,
which names what a reference reads in one kind of declaration and collects the
constants; :func:`compile_fn` generates the function of a guard, an effect, an
invariant, a step property or a binding from it and compiles it once. The signatures
(``GUARD``, ``INVARIANT``, ...) say what each kind's function takes. This is its own
room because it reads no node: an expression is only an annotation here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import DeclarationError
from ._expr_text import _SPACE_MEANING, Value, _ref_text

if TYPE_CHECKING:
    from ._expr_nodes import Expr


class _Namespace:
    """How references compile in one kind of declaration (the Python names they read)."""

    def __init__(self, kind: str, spaces: Mapping[str, str]) -> None:
        self.kind = kind
        self.spaces = spaces
        self.consts: list[Value] = []

    def ref(self, space: str, name: str) -> str:
        template = self.spaces.get(space)
        if template is None:
            raise DeclarationError(
                f"a {self.kind} cannot read {_ref_text(space, name)} ({_SPACE_MEANING[space]}); "
                f"it may read {', '.join(_SPACE_MEANING[s] for s in self.spaces)}")
        return template.format(name=name)

    def const(self, value: Value) -> str:
        for i, c in enumerate(self.consts):
            if c is value or (type(c) is type(value) and c == value):
                return f"_k{i}"
        self.consts.append(value)
        return f"_k{len(self.consts) - 1}"


def _set(t: tuple[Value, ...], i: int, x: Value) -> tuple[Value, ...]:
    return (*t[:i], x, *t[i + 1:])


# What each kind of declaration's compiled function takes, and how its references read.
GUARD = ("v, p", {"V": "v[{name!r}]", "S": "v[{name!r}]", "P": "p[{name!r}]"})
INVARIANT = ("s, v", {"V": "v[{name!r}]", "STATE": "s"})
STEP = ("b, t, p, a", {"B": "b.v[{name!r}]", "A": "a.v[{name!r}]", "P": "p.get({name!r})",
                       "T": "t.{name}"})
BINDING = ("v", {"S": "v[{name!r}]"})
SYSTEM_INVARIANT = ("states, views, v", {"S": "v[{name!r}]", "I": "_v[{name!r}]"})
_STATE_NAMES = {"B": "b.state", "A": "a.state", "I": "_s"}


class _NamespaceWithState(_Namespace):
    def ref(self, space: str, name: str) -> str:
        if name == "state" and space in _STATE_NAMES and space in self.spaces:
            return _STATE_NAMES[space]
        return super().ref(space, name)


def compile_fn(kind: str, signature: tuple[str, Mapping[str, str]], body: Expr | None = None,
               *, updates: Sequence[tuple[str, Expr]] = ()) -> Callable[..., Any]:
    """Generate the Python source of ``body`` (or of a dict of ``updates``) and compile it once."""
    args, spaces = signature
    ns = _NamespaceWithState(kind, spaces)
    if body is not None:
        src = body.source(ns)
    else:
        src = "{" + ", ".join(f"{name!r}: {e.source(ns)}" for name, e in updates) + "}"
    code = f"def _fn({args}):\n    return {src}\n"
    scope: dict[str, Any] = {f"_k{i}": c for i, c in enumerate(ns.consts)}
    scope["_set"] = _set
    exec(compile(code, f"<{kind}>", "exec"), scope)  # our own generated source
    fn: Callable[..., Any] = scope["_fn"]
    fn.__doc__ = src  # the generated source, for a reader in a debugger
    return fn

