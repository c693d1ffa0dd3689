"""The declared fairness and progress of a system, in its Quint module
(``_quint_system.py``), as the machine's module writes them (``_quint.py``):

* one ``action fair_<group>`` per fairness group: the disjunction of the system's steps in
  it, classified as our explorer classifies them (a local step by its transition's actor,
  trigger and parameters; a synchronised step by its movers' actor, its trigger and its
  parameters, ``q<i>.<name>`` for a per-instance one; a step of the system itself by its
  own); ``weak`` is ``weakFair(fair_<g>, vars)``, ``strong`` ``strongFair``, ``finite``
  ``eventually(always(not(fair_<g>).orKeep(vars)))``, ``never`` constrains nothing;
* ``progress_<name>`` is ``fairness implies premise.leadsTo(goal)``, a predicate's state
  part holding for some or every instance (``INST.exists``/``INST.forall``).

A predicate Quint cannot type (an order comparison of names) or a group whose steps it
cannot classify (a synchronised step whose movers differ in actor) is left out and listed
as not expressed, never silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from settled.model import Params

from ._quint import _comment
from ._quint_expr import ExportError, _set, lit

if TYPE_CHECKING:
    from ._quint_system import _SysModule

NOTES = (
    "quint run checks state invariants only: the temporal formulas (progress under the "
    "declared fairness) typecheck, and are checked by `quint verify --temporal` (Apalache); "
    "`settled explore SYSTEM` checks them here",
    "weakFair/strongFair count only steps that change a variable: a step that changes "
    "nothing and records the same step verdicts is a stutter here, a step in our check",
)


@dataclass(frozen=True)
class Kind:
    """How our explorer classifies one action of the module for fairness: its actor (None
    when its movers differ), trigger, parameters (fixed, or ``picks``: name -> (Quint name,
    domain) chosen by the action itself), and how to call it with chosen parameters."""

    action: str
    actor: str | None
    trigger: str
    fixed: Params
    picks: dict[str, tuple[str, tuple[Any, ...]]]
    call: str  # the action's "_with" form with the picks' Quint names (and instance i)
    instance: bool = False  # the call needs `nondet i = INST.oneOf()`


def fair_steps(md: _SysModule, f: Any) -> list[str]:
    """The actions (or parameter picks of them) the fairness declaration ``f`` covers."""
    alts = []
    for k in md.kinds:
        if k.actor is None and (f.steps.actors or f.steps.params):
            raise ExportError(f"fairness {f.name}: {k.action} moves instances whose actors "
                              "differ")
        if f.steps.actors and k.actor not in f.steps.actors:
            continue
        if f.steps.triggers and k.trigger not in f.steps.triggers:
            continue
        domains = {name: d for name, (_, d) in k.picks.items()}
        fits = True
        for name, values in f.steps.params:
            if name in k.fixed:
                fits = fits and k.fixed[name] in values
            elif name in domains:
                domains[name] = tuple(v for v in domains[name] if v in values)
            else:
                fits = False
        if not fits or any(not d for d in domains.values()):
            continue
        if all(set(domains[n]) == set(d) for n, (_, d) in k.picks.items()):
            alts.append(k.action)
            continue
        picks = ["nondet i = INST.oneOf()"] if k.instance else []
        picks += [f"nondet {k.picks[n][0]} = {_set(domains[n])}.oneOf()" for n in k.picks]
        alts.append(f"{{ {' '.join(picks)} {k.call} }}")
    return alts


def pred(md: _SysModule, pr: Any, what: str) -> str:
    """A system's predicate: the state part on some or every instance, and the system's
    own comparisons."""
    r = md.r
    parts = []
    if pr.states:
        inside = f"state.get(i).in({_set(pr.states)})"
        parts.append(f"not({inside})" if pr.outside else inside)
    for c in (*pr.where, *pr.system):
        t = r.types[c.variable]
        if c.op not in ("==", "!=") and t != "int":
            raise ExportError(f"{what}: `{c.text()}` orders values of type {t}; Quint "
                              "orders numbers only")
    parts += [f"{r.at(c.variable, 'i')[0]} {c.op} {lit(c.value)}" for c in pr.where]
    inner = " and ".join(parts or ["true"])
    quantified = f"INST.{'forall' if pr.instances == 'every' else 'exists'}(i => {inner})"
    system = [f"{md.n[c.variable]} {c.op} {lit(c.value)}" for c in pr.system]
    return "(" + " and ".join([quantified, *system]) + ")"


def fairness_and_progress(md: _SysModule) -> list[str]:
    """The section's lines; the temporal formulas' names go to ``md.temporal`` and what is
    left out to ``md.not_expressed``."""
    live = md.live
    out = ["  // ---- fairness and progress " + "-" * 56,
           f"  val vars = ({', '.join(md.all_vars())})"]
    terms: list[str] = []
    for f in live.fairness:
        out.append(f"  // fairness {f.name}: {_comment(f.words())} ({', '.join(f.rules)})")
        if f.kind == "never":
            out.append("  //   (never: constrains nothing)")
            continue
        try:
            steps = fair_steps(md, f)
        except ExportError as e:
            md.not_expressed.append(f"fairness {f.name}: {e}; every progress property "
                                    "assumes it")
            return [*out, f"  // NOT EXPRESSED: {e}"]
        fg = md.r.fresh(f"fair_{f.name}")
        out.append(f"  action {fg} = any {{ {', '.join(steps) or 'false'} }}")
        terms.append({"weak": f"weakFair({fg}, vars)", "strong": f"strongFair({fg}, vars)",
                      "finite": f"eventually(always(not({fg}).orKeep(vars)))"}[f.kind])
    out += ["  temporal fairness = and {", *(f"    {t}," for t in terms), "    true,", "  }"]
    for prop in live.progress:
        try:
            premise = pred(md, prop.premise, f"progress {prop.name}")
            goal = pred(md, prop.goal, f"progress {prop.name}")
        except ExportError as e:
            md.not_expressed.append(str(e))
            out.append(f"  // NOT EXPRESSED: {e} (the property: {_comment(prop.formula())})")
            continue
        name = md.r.fresh(f"progress_{prop.name}")
        md.temporal.append(name)
        out.append(f"  /// {_comment(prop.text)} ({', '.join(prop.rules)}): "
                   f"{_comment(prop.formula())}")
        out.append(f"  temporal {name} = fairness implies {premise}.leadsTo({goal})")
    return out
