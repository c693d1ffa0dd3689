"""The check that a mutant differs from the shipped code by its bug and nothing else.

A mutant overrides methods of a shipped class. Each override, with its bug lines
reverted (the markers are described in this package's docstring and in
:func:`revert_bug`), must be either the shipped
method itself (same signature and body, docstrings and comments aside) or a plain
delegation to it (``return super().name(<its own parameters>)``, or the same call
bound to a name that is then returned). Anything else is code kept beside the bug:
a copy of the implementation that has drifted from it, or a second change.

:func:`differences` names every such difference, as a diff between the override
minus its bug and the shipped method; ``tests/test_mutants_shipped.py`` runs it on
every class of the catalogue.
"""

from __future__ import annotations

import ast
import copy as copy_module
import difflib
import inspect
import io
import re
import sys
import textwrap
import tokenize
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# "# bug" then free text; "shipped: <code>" (to the end of the comment, a trailing lint suppression
# aside) is the shipped text the bug replaces (see revert_bug).
_MARKER = re.compile(r"#\s*bug\b(?P<why>.*?)(?:\bshipped:\s?(?P<shipped>.*?))?(?:\s+#\s*noqa\b.*)?$")

IMPL_PREFIX = "settled.impl."


def _is_impl(cls: type) -> bool:
    return cls.__module__.startswith(IMPL_PREFIX)


def mutant_classes(module: ModuleType) -> Iterator[type]:
    """The classes defined in ``module`` that subclass a class of the implementation."""
    for value in vars(module).values():
        if (isinstance(value, type) and value.__module__ == module.__name__
                and any(_is_impl(base) for base in value.__mro__[1:])):
            yield value


def fork_of(shipped: Callable[..., Any]) -> Callable[[F], F]:
    """Mark a module-level function of a mutant as a copy of the shipped function ``shipped``
    with its bug: :func:`forks` finds it and :func:`difference` holds it to that function.
    For a bug in a module-level function of ``impl/``, which no subclass can override."""
    def mark(func: F) -> F:
        func.__shipped__ = shipped  # type: ignore[attr-defined]
        return func
    return mark


def forks(module: ModuleType) -> Iterator[tuple[str, str, Any, dict[str, Any]]]:
    """``(where, dedented source, the shipped function, the module's namespace)`` for each
    :func:`fork_of` function defined in ``module``."""
    for value in vars(module).values():
        shipped = getattr(value, "__shipped__", None)
        if inspect.isfunction(value) and value.__module__ == module.__name__ and shipped:
            source = textwrap.dedent(inspect.getsource(value))
            yield (f"{module.__name__}.{value.__qualname__}",
                   _drop_decorators(source, _parse(source)), shipped, vars(module))


def _drop_decorators(source: str, node: ast.FunctionDef) -> str:
    """``source`` from its ``def`` line on (the fork_of decorator is not the shipped code's)."""
    lines = source.splitlines()
    return "\n".join(lines[node.lineno - 1:]) + "\n"


def shipped_method(cls: type, name: str) -> Any | None:
    """The implementation's own ``name`` that ``cls`` overrides (the first shipped class in
    its method resolution order that defines it), or None."""
    for base in cls.__mro__[1:]:
        if _is_impl(base) and name in vars(base):
            return vars(base)[name]
    return None


def _function(obj: Any) -> Any:
    return obj.__func__ if isinstance(obj, staticmethod | classmethod) else obj


def _parse(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef), source
    return node


def revert_bug(source: str) -> str:
    """``source`` (one function, dedented) with each marked bug line reverted.

    ``code  # bug …`` marks the statement starting on that line (only the header of an
    ``if``/``for``/``with`` when the marker names the shipped text; the whole block when it
    names none; only that line when it continues a statement); ``# bug …`` on a line of its
    own marks the next line the same way. The marked text is replaced by the shipped text
    the marker names after ``shipped:``, or removed. ``# bug deleted; shipped: X`` on a line
    of its own puts back the shipped line ``X`` that the bug deleted."""
    lines = source.splitlines()
    starts: dict[int, ast.stmt] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt):
            starts.setdefault(node.lineno, node)
    edits: list[tuple[int, int, list[str]]] = []  # (first line, last line, replacement), 1-based
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        match = _MARKER.search(tok.string)
        if match is None:
            continue
        line = tok.start[0]
        alone = not lines[line - 1][:tok.start[1]].strip()
        shipped = match.group("shipped")
        if alone and re.match(r"\s*deleted\b", match.group("why")):
            if shipped is None:
                raise ValueError(f"line {line}: a deleted line names the shipped text it deletes")
            edits.append((line, line, [" " * tok.start[1] + shipped.rstrip()]))  # its own indent kept
            continue
        target = line + 1 if alone else line
        if alone:
            edits.append((line, line, []))
        pad = re.match(r"\s*", lines[target - 1])
        new = [(pad.group(0) if pad else "") + shipped.strip()] if shipped is not None else []
        stmt = starts.get(target)
        if stmt is None:  # a line that continues a statement
            edits.append((target, target, new))
        elif shipped is not None and isinstance(stmt, ast.If | ast.For | ast.While | ast.With):
            edits.append((target, stmt.body[0].lineno - 1, new))  # the header only
        else:
            edits.append((target, stmt.end_lineno or target, new))
    for first, last, new in sorted(edits, reverse=True):
        lines[first - 1:last] = new
    return "\n".join(lines) + "\n"


def _strip_docstring(func: ast.FunctionDef) -> list[ast.stmt]:
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _is_super_call(node: ast.expr | None, func: ast.FunctionDef) -> bool:
    """``super().<func's name>(<func's own parameters, in order>)``, or, for a static method,
    ``<a class>.<func's name>(<its parameters>)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == func.name):
        return False
    owner = node.func.value
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
        params = params[1:]  # self aside
    elif not (isinstance(owner, ast.Name) and params[:1] != ["self"]):
        return False
    star, kwargs = func.args.vararg, func.args.kwarg
    if star is not None and kwargs is not None and not params and len(node.args) == 1 \
            and len(node.keywords) == 1:  # (self, *args, **kwargs) handed on as they came
        (arg,), (keyword,) = node.args, node.keywords
        return (isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name)
                and arg.value.id == star.arg and keyword.arg is None
                and isinstance(keyword.value, ast.Name) and keyword.value.id == kwargs.arg)
    passed = [a.id for a in node.args if isinstance(a, ast.Name)]
    passed += [k.value.id for k in node.keywords if isinstance(k.value, ast.Name) and k.arg == k.value.id]
    kwonly = [a.arg for a in func.args.kwonlyargs]
    return len(passed) == len(node.args) + len(node.keywords) and passed == params + kwonly


def is_delegation(func: ast.FunctionDef) -> bool:
    """The whole body hands the call to the shipped method unchanged (its answer bound to a
    name and returned, or returned at once)."""
    body = _strip_docstring(func)
    if len(body) == 1 and isinstance(body[0], ast.Return | ast.Expr):
        return _is_super_call(body[0].value, func)
    if len(body) == 2 and isinstance(body[0], ast.Assign) and isinstance(body[1], ast.Return):
        (target,) = body[0].targets
        returned = body[1].value
        return (isinstance(target, ast.Name) and isinstance(returned, ast.Name)
                and target.id == returned.id and _is_super_call(body[0].value, func))
    return False


def _normal(func: ast.FunctionDef) -> str:
    copy = copy_module.copy(func)
    copy.body = _strip_docstring(func) or [ast.Pass()]
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=[copy], type_ignores=[])))


def overrides(cls: type) -> Iterator[tuple[str, str, Any | None]]:
    """``(name, dedented source, the shipped method or None)`` for each method ``cls``
    defines."""
    for name, value in vars(cls).items():
        if not callable(_function(value)) or isinstance(value, type):
            continue
        yield name, textwrap.dedent(inspect.getsource(_function(value))), shipped_method(cls, name)


def _reads(func: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _rebound(func: ast.FunctionDef, written: ast.FunctionDef, mutant_globals: dict[str, Any],
             shipped_globals: dict[str, Any]) -> list[str]:
    """The global names ``func`` (the mutant minus its bug) reads, as ``written`` (the mutant
    as it runs) does too, that mean another object in the mutant's module than in the
    shipped one: the same text, another meaning (``S`` for another enum). Names only the
    reverted shipped text reads never run in the mutant."""
    local = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(func)
              if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    local |= {n.name for n in ast.walk(func) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    read = _reads(func) & _reads(written)
    missing = object()
    return sorted(name for name in read - local if name in shipped_globals
                  and mutant_globals.get(name, missing) is not shipped_globals[name])


def difference(where: str, source: str, shipped: Any | None,
               mutant_globals: dict[str, Any] | None = None) -> str | None:
    """What the override ``source`` (named ``where``) changes beyond its marked bug lines
    against ``shipped``, or None when it changes nothing else. With ``mutant_globals`` (the
    mutant module's namespace), a global name of the shipped code must also mean the same
    object there."""
    reverted = revert_bug(source)
    if not reverted.strip():
        return (f"{where}: the whole method is marked as the bug; a mutant changes a shipped "
                f"method, it does not add one")
    try:
        mutated = _parse(reverted)
    except SyntaxError as exc:
        return (f"{where}: with its bug reverted it does not parse ({exc.msg}, line "
                f"{exc.lineno}); check its bug markers:\n{reverted}")
    if shipped is None:
        return f"{where}: no class of the implementation defines {mutated.name!r}"
    if is_delegation(mutated):
        return None
    mutated.name = _function(shipped).__name__  # a fork (fork_of) may be named after its bug
    want = _normal(_parse(textwrap.dedent(inspect.getsource(_function(shipped)))))
    got = _normal(mutated)
    if got == want:
        rebound = ([] if mutant_globals is None else
                   _rebound(mutated, _parse(source), mutant_globals, _function(shipped).__globals__))
        if not rebound:
            return None
        return (f"{where} reads {', '.join(rebound)} as the shipped code does, but in the "
                f"mutant's module the name(s) mean other objects; import the shipped ones")
    diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "shipped",
                                          "mutant minus its bug", lineterm=""))
    return f"{where} differs from the shipped method beyond its marked bug:\n{diff}"


def differences(cls: type) -> list[str]:
    """What ``cls`` changes beyond its marked bug lines, one entry per method (empty: none)."""
    namespace = vars(sys.modules[cls.__module__])
    found = [difference(f"{cls.__module__}.{cls.__qualname__}.{name}", source, shipped, namespace)
             for name, source, shipped in overrides(cls)]
    return [f for f in found if f is not None]
