"""The expression language declarations are written in: text, reads, compiled semantics, types."""

from __future__ import annotations

import pytest

from settled.model import DeclarationError, Effect, Guard, Snapshot
from settled.model._expr import (
    STATE,
    A,
    B,
    I,
    P,
    S,
    T,
    V,
    check,
    count,
    every,
    maximum,
    minimum,
    some,
    total,
    unchanged,
    when,
)
from settled.model._expr_compile import GUARD, STEP, SYSTEM_INVARIANT, compile_fn
from settled.model._expr_types import Env


def test_every_node_renders_to_the_text_a_reader_expects() -> None:
    assert (V.held[P.worker] == V.lease_epoch).text() == "held[worker] == lease_epoch"
    assert (~((V.a == 1) & (V.b == 2)) | (V.c == 3)).text() == "not (a == 1 and b == 2) or c == 3"
    assert ((V.a == 1) & ((V.b == 2) | (V.c == 3))).text() == "a == 1 and (b == 2 or c == 3)"
    assert (V.a - (V.b - 1)).text() == "a - (b - 1)"
    assert (~V.s.isin("x", "y")).text() == "s not in {x, y}"
    assert minimum(V.n + 1, 3).text() == "min(n + 1, 3)" and maximum(V.n, 0).text() == "max(n, 0)"
    assert when(STATE == "done", "a", "b").text() == "if state == done then a else b"
    assert ((B.state == "x") | (A.n == 1) | (T.trigger == "go")).text() == (
        "before.state == x or after.n == 1 or step.trigger == go")
    assert unchanged("n", "m").text() == "unchanged(n, m)" and unchanged().text() == "nothing changes"
    assert (total(I.n) <= S.cap).text() == "sum(n) <= cap"


def test_reads_are_every_reference_once_in_order() -> None:
    e = (V.held[P.worker] > 0) & (V.held[P.worker] == V.lease_epoch)
    assert e.refs() == (("V", "held"), ("P", "worker"), ("V", "lease_epoch"))


def test_compiled_guards_and_effects_evaluate_as_the_text_says() -> None:
    fresh = compile_fn("guard", GUARD, (V.held[P.worker] > 0) & (V.held[P.worker] == V.epoch))
    assert fresh({"held": (2, 0), "epoch": 2}, {"worker": 0}) is True
    assert fresh({"held": (2, 0), "epoch": 2}, {"worker": 1}) is False
    claim = Effect({"epoch": V.epoch + 1, "held": V.held.set(P.worker, V.epoch + 1),
                    "seen": minimum(V.seen + 1, 3), "p": when(V.p == "none", "running", V.p)})
    # Every right side reads the configuration before the step.
    assert claim({"held": (2, 0), "epoch": 2, "seen": 3, "p": "none"}, {"worker": 1}) == {
        "epoch": 3, "held": (2, 3), "seen": 3, "p": "running"}
    assert claim.text == ("epoch += 1; held[worker] := epoch + 1; seen := min(seen + 1, 3); "
                          "p := running if p == none")
    assert claim.writes == ("epoch", "held", "seen", "p")
    assert claim.reads == ("epoch", "held", "worker", "seen", "p")


def test_step_properties_see_before_after_label_and_absent_parameters() -> None:
    fn = compile_fn("step property", STEP,
                    (T.trigger != "go") | ((P.quote == "whole") & unchanged("n")))
    b, a = Snapshot("s", {"n": 1}), Snapshot("s", {"n": 1})

    class Label:
        trigger = "go"
        actor = "user"

    assert fn(b, Label, {"quote": "whole"}, a) is True
    assert fn(b, Label, {}, a) is False  # no quote parameter: P.quote is none
    assert compile_fn("step property", STEP, unchanged())(b, Label, {}, Snapshot("t", {"n": 1})) is False


def test_system_invariants_aggregate_over_instances() -> None:
    fn = compile_fn("system invariant", SYSTEM_INVARIANT,
                    (total(I.n) <= S.cap) & (count(I.on) <= 1)
                    & (~some(I.state == "done") | every(I.state == "done")))
    views = ({"n": 1, "on": True}, {"n": 0, "on": False})
    assert fn(("done", "done"), views, {"cap": 1}) is True
    assert fn(("done", "open"), views, {"cap": 1}) is False
    assert fn(("open", "open"), views, {"cap": 0}) is False


def test_a_reference_outside_its_kind_of_declaration_is_refused() -> None:
    with pytest.raises(DeclarationError, match=r"a guard .* cannot read before\.n"):
        Guard("g", B.n == 1)
    with pytest.raises(DeclarationError, match=r"cannot read step\.trigger"):
        Guard("g", T.trigger == "go")


def test_typing_names_the_mistake() -> None:
    env = Env("here", {("V", "n"): (0, 1), ("V", "s"): ("x", "y"), ("V", "t"): ((0, 0), (1, 0))})
    check((V.n == 1) & (V.s == "x") & (V.t[0] == 1), env)
    for bad, message in [(V.n == "x", "compares a number with a name"),
                         (V.s < "x", "orders a name"),
                         (V.s == "z", "s is never z"),
                         (V.t[2] == 0, "index 2 is outside"),
                         (V.n + 1, "is a number, not a truth value"),
                         (V.m == 0, "m is not declared here")]:
        with pytest.raises(DeclarationError, match=message):
            check(bad, env)
