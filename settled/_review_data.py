"""The JSON data of a review page: a machine or a system as declared (states, transitions,
guards, effects, variables and properties, in the declarations' own words), and the
coverage layer a verify report adds to it.

Its own room because it is the page's content, independent of how the page is assembled
and drawn (:mod:`settled._review`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from settled import _diagram_graph
from settled.model import Protocol, System


# ---------------------------------------------------------------------------------------------
# The model as page data
# ---------------------------------------------------------------------------------------------
def _value(x: Any) -> str:
    return x if isinstance(x, str) else repr(x)


def _domain(domain: Sequence[Any]) -> str:
    if len(domain) > 8:
        return f"{len(domain)} values, {_value(domain[0])} … {_value(domain[-1])}"
    return ", ".join(_value(d) for d in domain)


def _guards(guards: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"name": g.name, "text": g.text, "parts": [n for n, _ in g.parts],
             "cases": [n for n, _ in g.cases], "bound": g.bound, "reads": list(g.reads)}
            for g in guards]


def _params(params: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"name": x.name, "domain": [_value(d) for d in x.domain], "meaning": x.meaning}
            for x in params]


def _mentions(text: str, names: Iterable[str]) -> list[str]:
    return [n for n in names if re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text)]


def machine_data(p: Protocol) -> dict[str, Any]:
    transitions = []
    for i, t in enumerate(p.transitions):
        transitions.append({
            "id": f"t{i}", "trigger": t.trigger, "source": list(t.source), "dest": t.dest,
            "meaning": t.meaning, "rules": list(t.rules), "guards": _guards(t.guards),
            "guard_text": t.guard_text, "effect": t.effect.text, "actor": t.actor,
            "kind": _diagram_graph.kind(t), "params": _params(t.params),
            "refusable": t.trigger in p.refusable})
    states = list(p.state_names)
    triggers = list(p.triggers())
    props = [{"name": i.name, "kind": "invariant", "text": i.text, "rules": list(i.rules),
              "states": _mentions(i.text, states), "triggers": _mentions(i.text, triggers)}
             for i in p.invariants]
    props += [{"name": s.name, "kind": "step property", "text": s.text, "rules": list(s.rules),
               "states": _mentions(s.text, states), "triggers": _mentions(s.text, triggers)}
              for s in p.step_properties]
    props += _progress(p, states, triggers)
    return {
        "kind": "machine", "name": p.name, "meaning": p.meaning, "initial": p.initial,
        "states": [{"name": s.name, "meaning": s.meaning, "terminal": s.terminal,
                    "unknown": s.unknown, "initial": s.name == p.initial} for s in p.states],
        "transitions": transitions,
        "variables": [{"name": v.name, "domain": _domain(v.domain), "initial": _value(v.initial),
                       "meaning": v.meaning, "ghost": v.ghost, "observable": v.observable}
                      for v in p.variables],
        "properties": props,
    }


def system_data(s: System) -> dict[str, Any]:
    m = s.machine
    by_trigger = {t.trigger: t for t in m.transitions}
    steps = [{"id": f"s{i}", "trigger": t.trigger, "meaning": t.meaning, "rules": list(t.rules),
              "guards": _guards(t.guards), "effect": t.effect.text, "actor": t.actor,
              "params": _params(t.params), "what": "system step"}
             for i, t in enumerate(s.transitions)]
    steps += [{"id": f"r{i}", "trigger": r.trigger, "rules": list(r.rules),
               "meaning": f"refines {m.name}.{r.trigger}: adds to its guards and effect",
               "guards": _guards(r.guards), "effect": r.effect.text, "actor": "instance",
               "params": [], "what": "refinement"} for i, r in enumerate(s.refinements)]
    sync = [{"trigger": t, "rules": list(by_trigger[t].rules) if t in by_trigger else [],
             "meaning": by_trigger[t].meaning if t in by_trigger else "",
             "actor": by_trigger[t].actor if t in by_trigger else ""} for t in s.sync]
    mutex = None
    if s.mutex is not None:
        x = s.mutex
        mutex = {"variable": x.variable, "flag": x.flag, "takes": sorted(x.takes),
                 "rules": list(x.rules), "text": x.text}
    return {
        "kind": "system", "name": s.name, "meaning": s.meaning, "machine": m.name,
        "instances": s.instances, "shared": list(s.shared), "sync": sync,
        "worker": list(s.worker) if s.worker else None, "symmetric": s.symmetric,
        "variables": [{"name": v.name, "domain": _domain(v.domain), "initial": _value(v.initial),
                       "meaning": v.meaning} for v in s.variables],
        "machine_variables": [{"name": v.name, "domain": _domain(v.domain),
                               "initial": _value(v.initial), "meaning": v.meaning,
                               "shared": v.name in s.shared} for v in m.variables],
        "machine_states": list(m.state_names),
        "steps": steps,
        "bind": [{"param": b.param, "text": b.text, "reads": list(b.reads)} for b in s.bind],
        "mutex": mutex,
        "properties": [{"name": i.name, "kind": "system invariant", "text": i.text,
                        "rules": list(i.rules), "states": [], "triggers": []}
                       for i in s.invariants] + _progress(s, list(m.state_names), []),
    }


def _progress(target: Protocol | System, states: list[str], triggers: list[str]
              ) -> list[dict[str, Any]]:
    """The progress properties (``premise ~> goal``) with the fairness they assume, in words."""
    from settled.model.progress import liveness_of

    live = liveness_of(target)
    assumes = "; ".join(f.words() for f in live.fairness)
    out = []
    for x in live.progress:
        text = f"{x.formula()}: {x.text} (assuming: {assumes})"
        out.append({"name": x.name, "kind": "progress property", "text": text,
                    "rules": list(x.rules), "states": _mentions(x.formula(), states),
                    "triggers": _mentions(assumes, triggers)})
    return out


# ---------------------------------------------------------------------------------------------
# Coverage from a verify report
# ---------------------------------------------------------------------------------------------
def _declared_edges(p: Protocol) -> list[tuple[str, str, str]]:
    return list(dict.fromkeys((src, t.target(src), t.trigger) for t in p.transitions
                              for src in t.source))


def machine_coverage(p: Protocol, report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if report is None:
        return None
    m = report.get("machines", {}).get(p.name)
    if not isinstance(m, dict):
        return {"measured": False,
                "why": f"the verify report has no section for {p.name} (it ran "
                       f"{', '.join(sorted(report.get('machines', {})))})"}
    ls = m.get("lockstep", {})
    if "unfired_edges" not in ls:
        return {"measured": False, "why": f"the lockstep campaign did not run: {ls.get('failure')}"}
    unfired = set(ls.get("unfired_edges", []))
    edges = [{"src": s, "dst": d, "trigger": t, "fired": f"{t}: {s} -> {d}" not in unfired}
             for s, d, t in _declared_edges(p)]
    ex = m.get("explore", {})
    return {
        "measured": True, "ok": bool(ls.get("ok")), "profile": ls.get("profile"),
        "seed": ls.get("seed"), "examples": ls.get("examples"), "steps": ls.get("steps"),
        "store": ls.get("store"), "failure": ls.get("failure"),
        "edges": edges, "unfired_transitions": list(ls.get("unfired_transitions", [])),
        "guard_alternatives": ls.get("guard_alternatives"),
        "unfired_guard_alternatives": list(ls.get("unfired_guard_alternatives", [])),
        "refusals": ls.get("refusals"),
        "unprobed_refusals": list(ls.get("unprobed_refusals", [])),
        "refusals_never_alone": list(ls.get("refusals_never_alone", [])),
        # Parameter values: declared, and those never taken (None: the report predates them).
        "parameter_values": ls.get("parameter_values"),
        "unfired_parameter_values": [str(v) for v in ls.get("unfired_parameter_values", [])],
        "not_checked": list(ls.get("not_checked", [])),
        "explore": {"ok": ex.get("ok"), "states": ex.get("states"), "edges": ex.get("edges"),
                    "findings": list(ex.get("findings", []))},
        "trace_check": {"ok": m.get("trace_check", {}).get("ok"),
                        "events": m.get("trace_check", {}).get("events")},
    }


def system_coverage(s: System, report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if report is None:
        return None
    m = report.get("machines", {}).get(s.machine.name)
    if not isinstance(m, dict):
        return {"measured": False, "why": f"the verify report has no section for {s.machine.name}"}
    sy, sl = m.get("system", {}), m.get("system_lockstep", {})
    return {
        "measured": True, "ok": bool(sy.get("ok")) and (not sl.get("checked") or bool(sl.get("ok"))),
        "explore": {"ok": sy.get("ok"), "states": sy.get("states"),
                    "states_unreduced": sy.get("states_unreduced"), "edges": sy.get("edges"),
                    "findings": list(sy.get("findings", []))},
        "lockstep": ({"checked": True, "profile": sl.get("profile"), "seed": sl.get("seed"),
                      "examples": sl.get("examples"), "steps": sl.get("steps"),
                      "fired": sl.get("fired"), "declared": sl.get("declared"),
                      "unfired": list(sl.get("unfired", [])), "failure": sl.get("failure")}
                     if sl.get("checked") else {"checked": False, "why": sl.get("why")}),
    }
