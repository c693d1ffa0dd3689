"""A broken declaration is refused when it is built, with an error naming the problem."""

from __future__ import annotations

import dataclasses
import re

import pytest

from settled.model import (
    DeclarationError,
    Effect,
    Guard,
    Param,
    Protocol,
    State,
    Transition,
    Variable,
)
from settled.model._expr import P, V


def machine(states=None, transitions=None, variables=None, initial="a") -> Protocol:
    return Protocol(
        name="tiny", meaning="a tiny machine",
        states=states or (State("a", "start"), State("b", "end", terminal=True)),
        initial=initial,
        variables=variables or (Variable("n", (0, 1), 0, "a counter"),),
        transitions=transitions or (Transition("go", ("a",), "b", "go", ("Q1",)),))


def test_a_well_formed_declaration_builds():
    assert machine().state_names == ("a", "b")


def test_undeclared_source_is_named():
    with pytest.raises(DeclarationError, match="undeclared source 'x'"):
        machine(transitions=(Transition("go", ("x",), "b", "go", ("Q1",)),))


def test_undeclared_destination_is_named():
    with pytest.raises(DeclarationError, match="undeclared destination 'zz'"):
        machine(transitions=(Transition("go", ("a",), "zz", "go", ("Q1",)),))


def test_undeclared_initial_state_is_named():
    with pytest.raises(DeclarationError, match="initial state 'nope'"):
        machine(initial="nope")


def test_unreachable_state_is_named():
    states = (State("a", "start"), State("b", "end", terminal=True),
              State("island", "nobody gets here", terminal=True))
    with pytest.raises(DeclarationError, match=r"unreachable.*'island'"):
        machine(states=states)


def test_terminal_state_with_an_exit_is_refused():
    states = (State("a", "start"), State("b", "end", terminal=True))
    transitions = (Transition("go", ("a",), "b", "go", ("Q1",)),
                   Transition("back", ("b",), "a", "back", ("Q1",)))
    with pytest.raises(DeclarationError, match=r"terminal state 'b' has outgoing transitions \['back'\]"):
        machine(states=states, transitions=transitions)


def test_non_terminal_state_without_exit_is_refused():
    states = (State("a", "start"), State("b", "stuck"))
    with pytest.raises(DeclarationError, match="non-terminal state 'b' has no way out"):
        machine(states=states)


def test_unknown_rule_id_is_named():
    with pytest.raises(DeclarationError, match="unknown rule 'Q99'"):
        machine(transitions=(Transition("go", ("a",), "b", "go", ("Q99",)),))


def test_transition_citing_no_rule_is_refused():
    with pytest.raises(DeclarationError, match="cites no rule"):
        machine(transitions=(Transition("go", ("a",), "b", "go", ()),))


def test_initial_value_outside_its_domain_is_named():
    with pytest.raises(DeclarationError, match=r"variable 'n' starts at 5, outside its domain \[0, 1\]"):
        machine(variables=(Variable("n", (0, 1), 5, "a counter"),))


def test_duplicate_state_is_named():
    states = (State("a", "start"), State("a", "again"), State("b", "end", terminal=True))
    with pytest.raises(DeclarationError, match=r"state declared twice: \['a'\]"):
        machine(states=states)


def _n_is(value: int) -> Guard:
    return Guard(f"n_is_{value}", V.n == value)


ANY_N = Guard("n_small", V.n <= 1)


def test_overlapping_guards_of_one_trigger_are_ambiguous():
    states = (State("a", "start"), State("b", "end", terminal=True), State("c", "end", terminal=True))
    transitions = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(_n_is(0),)),
                   Transition("go", ("a",), "c", "go", ("Q1",), guards=(ANY_N,)))
    with pytest.raises(DeclarationError, match=r"'go' from 'a' is ambiguous.*\{'n': 0\}"):
        machine(states=states, transitions=transitions)


def test_exclusive_guards_resolve_the_ambiguity():
    states = (State("a", "start"), State("b", "end", terminal=True), State("c", "end", terminal=True))
    exclusive = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(_n_is(0),)),
                 Transition("go", ("a",), "c", "go", ("Q1",), guards=(_n_is(1),)))
    p = machine(states=states, transitions=exclusive)
    assert p.fire(p.initial_config(), "go").after.state == "b"


def test_ambiguity_check_ranges_over_parameters_too():
    states = (State("a", "start"), State("b", "end", terminal=True), State("c", "end", terminal=True))
    who = Param("who", (0, 1), "who acts")
    g0 = Guard("who0", P.who == 0)
    always = Guard("any", P.who >= 0)
    transitions = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(g0,), params=(who,)),
                   Transition("go", ("a",), "c", "go", ("Q1",), guards=(always,), params=(who,)))
    with pytest.raises(DeclarationError, match=r"ambiguous.*\{'who': 0\}"):
        machine(states=states, transitions=transitions)


def test_guard_reading_an_undeclared_variable_is_named():
    sneaky = Guard("sneaky", V.m == 0)
    with pytest.raises(DeclarationError, match=r"guard 'sneaky' of 'go': m is not declared here; "
                                               r"V has \['n'\]"):
        machine(transitions=(Transition("go", ("a",), "b", "go", ("Q1",), guards=(sneaky,)),))


def test_guard_reading_a_parameter_its_step_does_not_take_is_named():
    with pytest.raises(DeclarationError, match="who is not declared here"):
        machine(transitions=(Transition("go", ("a",), "b", "go", ("Q1",),
                                        guards=(Guard("who0", P.who == 0),)),))


def test_a_python_callable_in_a_declaration_is_refused():
    with pytest.raises(DeclarationError, match="guard 'old' is a Python callable"):
        Guard("old", lambda v, p: v["n"] == 0)  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="a Python callable"):
        Effect({"n": lambda v, p: 1})
    with pytest.raises(DeclarationError, match="mapping from variable name to expression"):
        Effect(lambda v, p: {"n": 1})  # type: ignore[arg-type]


def test_python_and_or_not_on_an_expression_is_refused_not_silently_true():
    with pytest.raises(DeclarationError, match=re.escape("write & for and, | for or, ~ for not")):
        _ = (V.n == 0) and (V.n == 1)
    with pytest.raises(DeclarationError, match="Python truth value"):
        _ = not (V.n == 0)  # noqa: SIM201
    with pytest.raises(DeclarationError, match="Python truth value"):
        _ = 0 < V.n < 2  # a chained comparison is an `and` too
    with pytest.raises(DeclarationError, match=r"x\.isin\(\.\.\.\) for membership"):
        _ = V.n in (0, 1)


def test_a_constant_a_variable_never_holds_is_a_typo_and_refused():
    with pytest.raises(DeclarationError, match=r"`n == 7`: n is never 7; it is one of \{0, 1\}"):
        _guarded(Guard("seven", V.n == 7), domain=(0, 1))
    with pytest.raises(DeclarationError, match=r"n is never \{5\}"):
        _guarded(Guard("five", V.n.isin(0, 5)), domain=(0, 1))


def test_operands_of_the_wrong_kind_are_refused():
    with pytest.raises(DeclarationError, match="compares a number with a name"):
        _guarded(Guard("kinds", V.n == V.s))
    with pytest.raises(DeclarationError, match="is a number, not a truth value"):
        _guarded(Guard("bare", V.n))
    with pytest.raises(DeclarationError, match="operand of and, is a number"):
        _guarded(Guard("bare", (V.n == 0) & V.n))
    with pytest.raises(DeclarationError, match="where a number is expected"):
        _guarded(Guard("sum", V.s + 1 == 2))


def test_an_effect_writes_declared_variables_with_values_of_their_kind():
    def go(effect: Effect) -> Protocol:
        return machine(variables=(Variable("n", (0, 1, 2), 0, "a counter"),
                                  Variable("s", ("x", "y"), "x", "a name")),
                       transitions=(Transition("go", ("a",), "b", "go", ("Q1",), effect=effect),))

    assert go(Effect({"n": V.n + 1, "s": "y"})).transitions[0].effect.text == "n += 1; s := y"
    with pytest.raises(DeclarationError, match="writes 'm', which is not a variable"):
        go(Effect({"m": 1}))
    with pytest.raises(DeclarationError, match="is a name, but the variable holds a number"):
        go(Effect({"n": V.s}))
    with pytest.raises(DeclarationError, match=r"never inside the domain \{x, y\}"):
        go(Effect({"s": "z"}))


def _guarded(guard: Guard, domain: tuple[int, ...] = (0, 1, 2)) -> Protocol:
    return machine(variables=(Variable("n", domain, 0, "a counter"),
                              Variable("s", ("x", "y"), "x", "a name")),
                   transitions=(Transition("go", ("a",), "b", "go", ("Q1",), guards=(guard,)),))


def test_guard_parts_and_cases_are_its_top_level_and_and_or():
    both = _guarded(Guard("one", (V.n > 0) & (V.n < 2))).transitions[0].guards[0]
    assert both.text == "n > 0 and n < 2" and both.reads == ("n",)
    assert both.atoms() == ("one[n > 0]", "one[n < 2]")
    assert both.failing_atoms({"n": 2}, {}) == ("one[n < 2]",)
    assert both.cases == () and both.case({"n": 1}, {}) is None
    either = Guard("either", (V.n == 0) | (V.s == "y") & (V.n == 2))
    assert either.text == "n == 0 or s == y and n == 2"
    assert [n for n, _ in either.cases] == ["n == 0", "s == y and n == 2"]
    assert either.case({"n": 2, "s": "y"}, {}) == "s == y and n == 2"
    assert either.parts == () and either.atoms() == ("either",)

def test_declaration_errors_are_value_errors():
    assert issubclass(DeclarationError, ValueError)


def test_transitions_are_frozen_values():
    t = Transition("go", ("a",), "b", "go", ("Q1",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.trigger = "other"  # type: ignore[misc]
