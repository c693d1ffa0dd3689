"""Each mutant differs from the shipped implementation by its marked bug and nothing else.

A mutant overrides methods of a class of ``impl/``. Each override, with its ``# bug``
lines reverted, must be the shipped method or a plain delegation to it
(``conformance/mutants/_shipped.py``). When the implementation changes under a mutant,
this test names the mutant, so the catalogue cannot be killed for a difference that is
not its bug.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

from settled.conformance.mutants import _shipped, all_mutants
from settled.conformance.mutants._shipped import (
    difference,
    differences,
    forks,
    mutant_classes,
    revert_bug,
)
from settled.impl.query._worker import Worker

MODULES = ("approval", "approval_runtime", "approval_store", "approval_system", "crash", "ledger",
           "query", "query_confirm", "query_store", "query_system", "query_worker", "races")


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"settled.conformance.mutants.{name}")


CLASSES = [cls for name in MODULES for cls in mutant_classes(_module(name))]
# Module-level functions of impl/ a mutant copies with its bug (fork_of): no subclass reaches them.
FORKS = [fork for name in MODULES for fork in forks(_module(name))]


def test_the_check_sees_every_module_and_every_catalogued_mutant() -> None:
    """No module of the catalogue is left out, and every catalogued mutant's altered part
    is among the checked classes (or built from one)."""
    import settled.conformance.mutants as package

    on_disk = {p.stem for p in Path(package.__path__[0]).glob("*.py")
               if not p.stem.startswith("_")}
    assert on_disk == set(MODULES)
    assert len(CLASSES) >= len(all_mutants())


def _id(cls: type) -> str:
    return f"{cls.__module__.rsplit('.', 1)[1]}.{cls.__name__}"


@pytest.mark.parametrize("cls", CLASSES, ids=_id)
def test_each_mutant_minus_its_bug_is_the_shipped_code(cls: type) -> None:
    found = differences(cls)
    assert not found, "\n\n".join(found)


@pytest.mark.parametrize("fork", FORKS, ids=lambda f: f[0].rsplit(".", 2)[-2] + "." + f[0].rsplit(".", 1)[1])
def test_each_forked_function_minus_its_bug_is_the_shipped_function(
        fork: tuple[str, str, object, dict[str, object]]) -> None:
    found = difference(*fork)
    assert found is None, found


def test_the_forked_functions_are_the_ones_the_catalogue_uses() -> None:
    assert {where.rsplit(".", 1)[1] for where, *_ in FORKS} == {
        "lookup_by_token_only", "_apply_create_order_unchecked", "_take_stock_unchecked"}


# --------------------------------------------------------------------------- the check can fail
class _Plain(Worker):
    def lookup(self, query_id: str):  # type: ignore[no-untyped-def]
        return super().lookup(query_id)


class _SecondChange(Worker):
    def lookup(self, query_id: str):  # type: ignore[no-untyped-def]
        if query_id == "q1":  # bug
            return None
        return super().lookup(query_id + "")  # a second, unmarked change


class _NewMethod(Worker):
    def not_shipped(self) -> int:
        return 1


def test_a_plain_delegation_passes() -> None:
    assert differences(_Plain) == []


def test_a_second_unmarked_change_fails_and_is_named() -> None:
    (found,) = differences(_SecondChange)
    assert "_SecondChange.lookup" in found


def test_a_method_the_implementation_does_not_define_fails() -> None:
    (found,) = differences(_NewMethod)
    assert "no class of the implementation defines 'not_shipped'" in found


def test_a_name_that_means_another_object_in_the_mutant_s_module_fails() -> None:
    """The same text is not the same code when a name it reads is bound to something else."""
    from settled.conformance.mutants import races

    cls = races.TokenCheckedBeforeLock
    (name, source, shipped), = (o for o in _shipped.overrides(cls) if o[0] == "_change")
    assert difference(name, source, shipped, vars(races)) is None
    found = difference(name, source, shipped, {**vars(races), "_APPLIERS": {}})
    assert found is not None and "reads _APPLIERS" in found


def _second_change(source: str) -> str | None:
    """``source`` with an unmarked statement added as well (before its last line that is a
    whole statement outside the bug), or None when it has none."""
    lines = source.splitlines()
    for i in range(len(lines) - 1, 1, -1):
        text = lines[i].strip()
        if text.startswith("#") or lines[i - 1].strip().startswith("#"):
            continue
        try:
            ast.parse(text.split("  #")[0])
        except SyntaxError:
            continue  # part of a longer statement
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        edited = "\n".join([*lines[:i], f"{indent}print('a second change')", *lines[i:]]) + "\n"
        try:
            reverted = revert_bug(edited)
            ast.parse(reverted)
        except SyntaxError:
            continue  # inside a longer expression
        if "a second change" in reverted:  # not inside a block marked as the bug
            return edited
    return None


def test_a_second_unmarked_change_to_any_catalogued_override_fails() -> None:
    """Each override of the catalogue with an unmarked return changed as well is named."""
    tried = 0
    every = [(f"{cls.__qualname__}.{name}", source, shipped)
             for cls in CLASSES for name, source, shipped in _shipped.overrides(cls)]
    for where, source, shipped, *_ in every + FORKS:
        edited = _second_change(source)
        if edited is None:
            continue
        assert difference(where, edited, shipped) is not None, f"{where}: a second change went unseen"
        tried += 1
    assert tried >= len(CLASSES) // 2, f"only {tried} overrides could be given a second change"
