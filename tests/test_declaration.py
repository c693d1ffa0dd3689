"""A broken declaration is refused when it is built, with an error naming the problem."""

from __future__ import annotations

import dataclasses

import pytest

from settled.model import (
    DeclarationError,
    Guard,
    Param,
    Protocol,
    State,
    Transition,
    Variable,
)


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
    return Guard(f"n_is_{value}", f"n == {value}", lambda v, p: v["n"] == value, reads=("n",))


ANY_N = Guard("n_small", "n <= 1", lambda v, p: v["n"] <= 1, reads=("n",))


def test_overlapping_guards_without_priority_are_ambiguous():
    states = (State("a", "start"), State("b", "end", terminal=True), State("c", "end", terminal=True))
    transitions = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(_n_is(0),)),
                   Transition("go", ("a",), "c", "go", ("Q1",), guards=(ANY_N,)))
    with pytest.raises(DeclarationError, match=r"'go' from 'a' is ambiguous.*\{'n': 0\}"):
        machine(states=states, transitions=transitions)


def test_exclusive_guards_or_a_priority_resolve_the_ambiguity():
    states = (State("a", "start"), State("b", "end", terminal=True), State("c", "end", terminal=True))
    exclusive = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(_n_is(0),)),
                 Transition("go", ("a",), "c", "go", ("Q1",), guards=(_n_is(1),)))
    machine(states=states, transitions=exclusive)
    prioritized = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(_n_is(0),), priority=1),
                   Transition("go", ("a",), "c", "go", ("Q1",), guards=(ANY_N,)))
    p = machine(states=states, transitions=prioritized)
    assert p.fire(p.initial_config(), "go").after.state == "b"


def test_ambiguity_check_ranges_over_parameters_too():
    states = (State("a", "start"), State("b", "end", terminal=True), State("c", "end", terminal=True))
    who = Param("who", (0, 1), "who acts")
    g0 = Guard("who0", "who == 0", lambda v, p: p["who"] == 0, reads=("who",))
    always = Guard("any", "who >= 0", lambda v, p: p["who"] >= 0, reads=("who",))
    transitions = (Transition("go", ("a",), "b", "go", ("Q1",), guards=(g0,), params=(who,)),
                   Transition("go", ("a",), "c", "go", ("Q1",), guards=(always,), params=(who,)))
    with pytest.raises(DeclarationError, match=r"ambiguous.*\{'who': 0\}"):
        machine(states=states, transitions=transitions)


def test_guard_reading_an_undeclared_variable_is_named():
    sneaky = Guard("sneaky", "n == 0", lambda v, p: v["n"] == 0, reads=())
    with pytest.raises(DeclarationError, match="guard 'sneaky' of 'go' reads 'n' but does not declare it"):
        machine(transitions=(Transition("go", ("a",), "b", "go", ("Q1",), guards=(sneaky,)),))


def test_guard_declaring_a_name_that_does_not_exist_is_named():
    ghost = Guard("ghost", "m == 0", lambda v, p: True, reads=("m",))
    with pytest.raises(DeclarationError, match="declares it reads 'm'"):
        machine(transitions=(Transition("go", ("a",), "b", "go", ("Q1",), guards=(ghost,)),))


def _guarded(guard: Guard) -> Protocol:
    return machine(variables=(Variable("n", (0, 1, 2), 0, "a counter"),),
                   transitions=(Transition("go", ("a",), "b", "go", ("Q1",), guards=(guard,)),))


def test_guard_parts_must_say_exactly_what_the_guard_says():
    whole = lambda v, p: v["n"] == 1  # noqa: E731
    right = Guard("one", "n is 1", whole, reads=("n",),
                  parts=(("positive", lambda v, p: v["n"] > 0), ("below two", lambda v, p: v["n"] < 2)))
    assert _guarded(right).transitions[0].guards[0].atoms() == ("one[positive]", "one[below two]")
    wrong = dataclasses.replace(right, parts=(("positive", lambda v, p: v["n"] > 0),
                                              ("anything", lambda v, p: True)))
    with pytest.raises(DeclarationError, match=r"guard 'one' of 'go': its parts .* disagree .*'n': 2"):
        _guarded(wrong)
    sneaky = dataclasses.replace(right, parts=(("positive", lambda v, p: v["n"] > 0),
                                               ("below two", lambda v, p: v["m"] < 2)))
    with pytest.raises(DeclarationError, match="reads 'm' but does not declare it"):
        _guarded(sneaky)
    with pytest.raises(DeclarationError, match="two or more, each named once"):
        _guarded(dataclasses.replace(right, parts=(("positive", lambda v, p: v["n"] > 0),)))


def test_declaration_errors_are_value_errors():
    assert issubclass(DeclarationError, ValueError)


def test_transitions_are_frozen_values():
    t = Transition("go", ("a",), "b", "go", ("Q1",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.trigger = "other"  # type: ignore[misc]
