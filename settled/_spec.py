"""The spec-review document, generated from the declared tables.

``SPEC.md`` lists, for each machine, its states, transitions (trigger, from,
to, guard, effect, actor, rules), variables with domains, invariants and step
properties, and ends with the traceability matrix: every rule of the
catalogue with the transitions, properties and tests behind it. A rule with
nothing behind it is listed plainly as a gap.

Tests are found by reading ``tests/`` (never by running them): a test cites a
rule with ``@pytest.mark.rule("Q16")`` on the function or its class, or with
a module-level ``pytestmark``. Everything is sorted, so the document is
deterministic byte for byte.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from settled.model import RULES, Invariant, Protocol, StepProperty, System, SystemInvariant, rule_sort_key


def rule_tests(tests_dir: Path) -> dict[str, list[str]]:
    """Rule ID → sorted ``file::test`` names citing it."""
    found: dict[str, set[str]] = {}
    for path in sorted(tests_dir.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_rules = _marker_rules(_pytestmark(tree))
        for name, rules in _tests_with_rules(tree.body, module_rules):
            for r in rules:
                found.setdefault(r, set()).add(f"{path.name}::{name}")
    return {r: sorted(names) for r, names in found.items()}


def _pytestmark(tree: ast.Module) -> list[ast.expr]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            value = node.value
            return list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value]
    return []


def _tests_with_rules(body: Iterable[ast.stmt], inherited: set[str],
                      prefix: str = "") -> Iterable[tuple[str, set[str]]]:
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            rules = inherited | _marker_rules(node.decorator_list)
            yield from _tests_with_rules(node.body, rules, f"{prefix}{node.name}::")
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            rules = inherited | _marker_rules(node.decorator_list)
            if rules:
                yield f"{prefix}{node.name}", rules


def _marker_rules(decorators: Sequence[ast.expr]) -> set[str]:
    rules: set[str] = set()
    for d in decorators:
        if (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                and d.func.attr == "rule"):
            rules.update(a.value for a in d.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return rules


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """An effect's text as code in a table cell (plain words for an effect with no writes)."""
    return text if text == "nothing changes" else f"`{_cell(text)}`"


def _holds(prop: Invariant | StepProperty | SystemInvariant) -> str:
    """A property in words, then as the expression that is checked."""
    return f"{_cell(prop.meaning)}: `{_cell(prop.text)}`"


def machine_section(p: Protocol) -> list[str]:
    out = [f"## Machine `{p.name}`", "", p.meaning, "", f"Initial state: `{p.initial}`.", "",
           "### States", "", "| state | kind | meaning |", "| --- | --- | --- |"]
    for s in p.states:
        kind = "terminal" if s.terminal else ("unknown" if s.unknown else "")
        if s.name == p.initial:
            kind = "initial"
        out.append(f"| `{s.name}` | {kind} | {_cell(s.meaning)} |")
    out += ["", "### Transitions", "",
            "| trigger | from | to | guard | effect | actor | rules | meaning |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in p.transitions:
        src = ", ".join(f"`{s}`" for s in t.source)
        dest = f"`{t.dest}`" if t.dest else "(same)"
        guard = _cell("; ".join(f"{g.name}: `{g.text}`" + (" (model bound)" if g.bound else "")
                                for g in t.guards) or "—")
        params = f" ({', '.join(x.name for x in t.params)})" if t.params else ""
        out.append(f"| `{t.trigger}`{params} | {src} | {dest} | {guard} | {_code(t.effect.text)} "
                   f"| {t.actor} | {', '.join(t.rules)} | {_cell(t.meaning)} |")
    out += ["", "### Variables", "", "| variable | domain | initial | meaning |",
            "| --- | --- | --- | --- |"]
    for v in p.variables:
        domain = _domain_text(v.domain)
        ghost = " (specification only)" if v.ghost else ""
        out.append(f"| `{v.name}` | {domain} | `{v.initial!r}` | {_cell(v.meaning)}{ghost} |")
    out += ["", "### Invariants (every reachable configuration)", "",
            "| name | holds that | rules |", "| --- | --- | --- |"]
    out += [f"| `{i.name}` | {_holds(i)} | {', '.join(i.rules)} |" for i in p.invariants]
    out += ["", "### Step properties (every step)", "", "| name | holds that | rules |",
            "| --- | --- | --- |"]
    out += [f"| `{s.name}` | {_holds(s)} | {', '.join(s.rules)} |" for s in p.step_properties]
    out += progress_section(p)
    return [*out, ""]


def progress_section(target: Protocol | System) -> list[str]:
    """The progress properties (``premise ~> goal``) and the fairness each assumes, in words."""
    from settled.model.progress import liveness_of

    live = liveness_of(target)
    out = ["", "### Progress (every run that reaches the premise later reaches the goal)", "",
           "Assumed fairness (each property below holds only under all of it; a step no "
           "line names is never required):", "",
           "| name | assumption | why | rules |", "| --- | --- | --- | --- |"]
    out += [f"| `{f.name}` | {_cell(f.words())} | {_cell(f.text)} | {', '.join(f.rules)} |"
            for f in live.fairness]
    out += ["", "| name | premise ~> goal | in words | rules |", "| --- | --- | --- | --- |"]
    out += [f"| `{x.name}` | {_cell(x.formula())} | {_cell(x.text)} | {', '.join(x.rules)} |"
            for x in live.progress]
    return out


def system_section(s: System) -> list[str]:
    """What the instances of a system share, and which steps they take together."""
    m = s.machine
    out = [f"## System `{s.name}`", "", f"{s.meaning}: {s.instances} instances of `{m.name}`.", "",
           f"![{s.name}]({s.name}.svg)", ""]
    shared = [f"`{n}`" for n in s.shared]
    out.append("Shared machine variables (one value for every instance): "
               + (", ".join(shared) if shared else "none") + ".")
    sync = [f"`{t}`" + (" (each instance with parameters of its own)" if t in s.per_instance
                        else "") for t in s.sync]
    out.append("")
    out.append("Synchronised triggers (one step on every instance where enabled): "
               + (", ".join(sync) if sync else "none") + ".")
    if s.worker is not None:
        out += ["", f"Symmetry: instances are interchangeable; so are the values of `{s.worker[0]}` "
                    f"(which index `{s.worker[1]}`)."]
    elif s.symmetric:
        out += ["", "Symmetry: instances are interchangeable."]
    if s.variables:
        out += ["", "| system variable | domain | initial | meaning |", "| --- | --- | --- | --- |"]
        out += [f"| `{v.name}` | {_domain_text(v.domain)} | `{v.initial!r}` | {_cell(v.meaning)} |"
                for v in s.variables]
    rows = [(t.trigger, "; ".join(f"{g.name}: `{g.text}`" for g in t.guards) or "—",
             _code(t.effect.text), ", ".join(t.rules), t.meaning) for t in s.transitions]
    rows += [(r.trigger, "; ".join(f"{g.name}: `{g.text}`" for g in r.guards) or "—",
              _code(r.effect.text),
              ", ".join(r.rules), f"refines {m.name}.{r.trigger}: adds to its guards and effect")
             for r in s.refinements]
    if rows:
        out += ["", "| system step | guard | effect | rules | meaning |", "| --- | --- | --- | --- | --- |"]
        out += [f"| `{a}` | {_cell(b)} | {_cell(c)} | {d} | {_cell(e)} |" for a, b, c, d, e in rows]
    for b in s.bind:
        out += ["", f"Bound parameter: `{m.name}`'s `{b.param}` is `{b.text}`, decided by the "
                    "system's variables, not a free choice."]
    if s.mutex is not None:
        x = s.mutex
        out += ["", f"Mutex `{x.variable}` ({', '.join(x.rules)}): {_cell(x.text)}. An instance "
                    f"holds it while its `{x.flag}` is true; a step of any other instance with "
                    f"one of these triggers waits until it is free: "
                    + ", ".join(f"`{t}`" for t in sorted(x.takes)) + "."]
    if s.invariants:
        out += ["", "| system invariant | holds that | rules |", "| --- | --- | --- |"]
        out += [f"| `{i.name}` | {_holds(i)} | {', '.join(i.rules)} |" for i in s.invariants]
    out += progress_section(s)
    return [*out, ""]


def _domain_text(domain: tuple[object, ...]) -> str:
    if len(domain) > 8:
        return f"{len(domain)} values, `{domain[0]!r}` … `{domain[-1]!r}`"
    return ", ".join(f"`{d!r}`" for d in domain)


@dataclass(frozen=True, slots=True)
class RuleBacking:
    """What stands behind one rule: the transitions, properties and tests citing it, each
    named ``model.item`` (``query.claim``, ``query_system.mutex session``)."""

    rule: str
    transitions: tuple[str, ...]
    properties: tuple[str, ...]
    tests: tuple[str, ...]

    @property
    def modelled(self) -> bool:
        return bool(self.transitions or self.properties)


def rule_backing(machines: Sequence[Protocol], tests: dict[str, list[str]],
                 systems: Sequence[System] = ()) -> list[RuleBacking]:
    """Every rule of the catalogue, in rule order, with what cites it."""
    out = []
    for rule in sorted(RULES, key=rule_sort_key):
        trans = sorted({f"{p.name}.{t.trigger}" for p in machines for t in p.transitions
                        if rule in t.rules}
                       | {f"{s.name}.{t.trigger}" for s in systems for t in s.transitions
                          if rule in t.rules}
                       | {f"{s.name}.{r.trigger}" for s in systems for r in s.refinements
                          if rule in r.rules}
                       | {f"{s.name}.mutex {s.mutex.variable}" for s in systems
                          if s.mutex is not None and rule in s.mutex.rules})
        props = sorted({f"{p.name}.{i.name}" for p in machines for i in p.invariants if rule in i.rules}
                       | {f"{p.name}.{x.name}" for p in machines for x in p.step_properties
                          if rule in x.rules}
                       | {f"{s.name}.{si.name}" for s in systems for si in s.invariants
                          if rule in si.rules}
                       | _progress_citing(rule, [*machines, *systems]))
        out.append(RuleBacking(rule, tuple(trans), tuple(props), tuple(tests.get(rule, []))))
    return out


def rule_matrix(machines: Sequence[Protocol], tests: dict[str, list[str]],
                systems: Sequence[System] = ()) -> list[str]:
    out = ["## Traceability: rule → transition → property → test", "",
           "| rule | summary | transitions | properties | tests |", "| --- | --- | --- | --- | --- |"]
    gaps: list[str] = []
    tests_only: list[str] = []
    for b in rule_backing(machines, tests, systems):
        rule, trans, props, cited = b.rule, b.transitions, b.properties, b.tests
        if not b.modelled:
            (tests_only if cited else gaps).append(rule)
        out.append(f"| {rule} | {_cell(RULES[rule])} | {_join(trans)} | {_join(props)} "
                   f"| {_join(cited) if cited else '**no test**'} |")
    out += ["", "### Gaps", "",
            "A rule the model declares no transition, invariant or step property for is a gap: "
            "the explorer cannot generate it, the lockstep kit never drives it and the trace "
            "checker cannot see it break, whatever the tests say.", ""]
    if tests_only:
        out.append("Rules backed by tests alone (no transition or property):")
        out.append("")
        out += [f"- **{r}**: {RULES[r]} (tests: {_join(tests[r])})" for r in tests_only]
        out.append("")
    if gaps:
        out.append("Rules with no transition, property or test behind them:")
        out.append("")
        out += [f"- **{r}**: {RULES[r]}" for r in gaps]
    if not (tests_only or gaps):
        out.append("None: every rule has a transition or a property behind it.")
    untested = [r for r in sorted(RULES, key=rule_sort_key)
                if r not in tests and r not in gaps and r not in tests_only]
    if untested:
        out += ["", "Rules modelled but cited by no test: " + ", ".join(untested) + "."]
    return [*out, ""]


def _progress_citing(rule: str, targets: Sequence[Protocol | System]) -> set[str]:
    from settled.model.progress import liveness_of

    return {f"{t.name}.{x.name}" for t in targets for x in liveness_of(t).progress
            if rule in x.rules}


def _join(items: Sequence[str]) -> str:
    return "<br>".join(f"`{i}`" for i in items) if items else "—"


def render_spec(machines: Sequence[Protocol], tests: Path | Mapping[str, Sequence[str]],
                systems: Sequence[System] = ()) -> str:
    """``tests``: the folder of tests to read, or its rule → tests index (:func:`rule_tests`,
    as an installed package ships it beside SPEC.md)."""
    out = ["# settled — protocol specification (generated)", "",
           "Generated by `settled spec` from the declared tables in `model/`; do not edit by hand.",
           "Rules are those of [`docs/PROTOCOL.md`](../docs/PROTOCOL.md); tests are the ones in "
           "`tests/` that cite a rule.", ""]
    for p in machines:
        out += machine_section(p)
    for sy in systems:
        out += system_section(sy)
    out += OUTSIDE_THE_MODEL
    index = rule_tests(tests) if isinstance(tests, Path) else {r: list(t) for r, t in tests.items()}
    out += rule_matrix(machines, index, systems)
    return "\n".join(out)


# State the implementation keeps that no declared machine owns, and why (checked by a test
# against model/ and impl/, so a machine declared later makes this list stale, not wrong).
OUTSIDE_THE_MODEL = [
    "## Outside the model", "",
    "Two pieces of the implementation's state change in steps but are not declared as "
    "machines of their own. They are listed here so a reviewer knows what the tables do not "
    "cover.", "",
    "| state | where | values | why it is not a machine here | what checks it |",
    "| --- | --- | --- | --- | --- |",
    "| task phase | `tasks.phase` (impl/query/_tasks.py, _confirm.py, _worker.py) | `open`, "
    "`executing`, then `answered`, `query_failed`, `query_cancelled` or `query_not_run` "
    "| it is a projection of the task's queries, not a protocol with choices of its own: "
    "a task starts `open` and a condition update sets it back, confirm sets `executing`, "
    "a settled query sets the phase of its outcome. The only rule "
    "about it (Q24: a late outcome moves the phase only at its own condition version and "
    "outside a clarification) is modelled as the query machine's `phase_moved` variable "
    "and the step property that guards it | `query.phase_moved`, the Q24 tests |",
    "| message attribution | `messages.attribution` (impl/query/_messages.py) | `pending`, "
    "`attributed`, `failed` | the attribution itself (which task a message belongs to) is "
    "decided outside the protocol, by the agent's language model. The query system declares "
    "what the protocol needs of it as the shared variable `message` (attributed or pending; "
    "the implementation's `failed` blocks exactly as `pending` does, Q10) with the "
    "`message_received` and `message_attributed` steps; the per-message history is not "
    "modelled | `query_system.message`, the Q9 and Q10 tests |",
    "",
]
