"""``settled review``: the specification as a static site, one page per machine and system.

Every page is one self-contained HTML file: the overview diagram as inline SVG (the
Graphviz rendering of :mod:`settled._diagrams` and :mod:`settled._system_views`, with
ids and classes added so that states and edges are clickable and reachable by
keyboard), the page's slice of the model as JSON, and the script and style sheet
kept as package data (``settled/review_assets``) inlined into it. Nothing is fetched:
the site opens from ``file://``, without a server or a network.

The data comes from the declarations themselves: a guard's text is ``Guard.text``, an
effect's ``Effect.text``, a transition's guards ``Transition.guard_text``; the rule
index reuses :func:`settled._spec.rule_backing`, the matrix SPEC.md prints. A verify
report (``settled verify --json``) adds the coverage layer, a mutants report
(``settled mutants --json``) the kill status of each catalogue mutant, and ITF
counterexamples are embedded for the player of the page of their model.

Output is deterministic byte for byte (sorted keys, declaration order, files sorted by
name), so the committed site (``diagrams/review/``) is drift-checked like the other views.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from settled import _diagrams, _spec, _system_views
from settled.model import MACHINES, RULES, Protocol, System, rule_sort_key
from settled.model.systems import SYSTEMS


class ReviewInputError(ValueError):
    """A report or counterexample given to ``settled review`` cannot be used (one line)."""


# ---------------------------------------------------------------------------------------------
# Inputs: reports and counterexamples, read and checked
# ---------------------------------------------------------------------------------------------
def _read_json(path: Path, what: str) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReviewInputError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ReviewInputError(f"{what} {path}: is a folder, not a file") from None
    except OSError as e:
        raise ReviewInputError(f"{what} {path}: cannot read it: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReviewInputError(f"{what} {path}: not a text file (binary content)") from None
    if "\x00" in text:
        raise ReviewInputError(f"{what} {path}: not a text file (binary content)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReviewInputError(f"{what} {path}: not JSON ({e.msg} at line {e.lineno}, "
                               f"column {e.colno})") from None


def read_verify_report(path: Path) -> dict[str, Any]:
    """A ``settled verify --json`` report, checked for the parts the site reads."""
    doc = _read_json(path, "verify report")
    machines = doc.get("machines") if isinstance(doc, dict) else None
    if not isinstance(machines, dict) or not machines or not all(
            isinstance(m, dict) and isinstance(m.get("lockstep"), dict) for m in machines.values()):
        raise ReviewInputError(f"verify report {path}: not a 'settled verify --json' report (no "
                               "'machines' with a 'lockstep' section each)")
    unknown = sorted(set(machines) - set(MACHINES))
    if unknown:
        raise ReviewInputError(f"verify report {path}: machines {unknown} are not declared here; "
                               f"machines are {sorted(MACHINES)}")
    return dict(doc)


def read_mutants_report(path: Path) -> dict[str, Any]:
    """A ``settled mutants --json`` report, checked for the parts the site reads."""
    doc = _read_json(path, "mutants report")
    mutants = doc.get("mutants") if isinstance(doc, dict) else None
    if not isinstance(mutants, list) or not all(
            isinstance(m, dict) and isinstance(m.get("name"), str) and "killed" in m
            for m in mutants):
        raise ReviewInputError(f"mutants report {path}: not a 'settled mutants --json' report "
                               "(no 'mutants' list of {name, killed, ...})")
    return dict(doc)


@dataclass(frozen=True, slots=True)
class Trace:
    """One ITF counterexample: its file name, its model, and its JSON as read."""

    file: str
    model: str
    doc: Mapping[str, Any]


def pages() -> dict[str, Protocol | System]:
    """Page name → what it shows: every machine, then every system (by its own name)."""
    out: dict[str, Protocol | System] = dict(MACHINES)
    out.update({s.name: s for s in SYSTEMS.values()})
    return out


def read_trace(path: Path) -> Trace:
    doc = _read_json(path, "counterexample")
    if not isinstance(doc, dict) or not isinstance(doc.get("vars"), list) or not isinstance(
            doc.get("states"), list) or not doc["states"]:
        raise ReviewInputError(f"counterexample {path}: not an ITF trace ('vars' and a non-empty "
                               "'states' are required)")
    if not all(isinstance(s, dict) for s in doc["states"]):
        raise ReviewInputError(f"counterexample {path}: not an ITF trace (a state is not an object)")
    meta = doc["#meta"] if isinstance(doc.get("#meta"), dict) else {}
    model = str(meta.get("source") or meta.get("model") or "")
    if model not in pages():
        raise ReviewInputError(f"counterexample {path}: its model {model!r} is not declared here; "
                               f"models are {sorted(pages())}")
    return Trace(path.name, model, doc)


def read_traces(path: Path) -> tuple[list[Trace], list[str]]:
    """The ITF files of a folder (or one file), sorted by name; and the other files skipped."""
    if path.is_file():
        return [read_trace(path)], []
    if not path.is_dir():
        raise ReviewInputError(f"counterexamples {path}: no such file or folder")
    files = sorted(p for p in path.iterdir() if p.is_file())
    itf = [p for p in files if p.name.endswith(".itf.json")]
    if not itf:
        raise ReviewInputError(f"counterexamples {path}: no *.itf.json file in this folder")
    names = [p.name for p in itf]
    if len(set(names)) != len(names):
        raise ReviewInputError(f"counterexamples {path}: two files share a name")
    return [read_trace(p) for p in itf], [p.name for p in files if p not in itf]


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
            "kind": _diagrams.kind(t), "params": _params(t.params),
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


# ---------------------------------------------------------------------------------------------
# The diagrams, made clickable
# ---------------------------------------------------------------------------------------------
_GROUP = re.compile(r'<g id="(node|edge|clust)(\d+)" class="(node|edge|cluster)">\n<title>([^<]*)</title>')


def interactive_svg(svg: bytes, names: Iterable[str], kind: str) -> str:
    """The Graphviz SVG with its size attributes dropped (the page sizes and zooms it), and
    each group of a declared node marked: ``data-node`` and ``tabindex`` on a node, ``data-src``,
    ``data-dst`` and the label's words (``data-words``) on an edge."""
    text = svg.decode("utf-8")
    text = text[text.index("<svg"):]
    text = re.sub(r'<svg width="[^"]*" height="[^"]*"', '<svg class="diagram" role="img" '
                  f'aria-label="{kind} diagram" preserveAspectRatio="xMidYMid meet"', text, count=1)
    text = re.sub(r"<!-- [^>]* -->\n", "", text)
    known = set(names)
    pieces: list[str] = []
    last = 0
    for m in _GROUP.finditer(text):
        tag, num, cls, title = m.groups()
        name = html.unescape(title)
        attrs = f'id="{tag}{num}" class="{cls}"'
        if cls == "node" and name in known:
            attrs = (f'id="{tag}{num}" class="node item" data-node="{html.escape(name)}" '
                     f'tabindex="0" role="button" aria-label="{html.escape(name)}"')
        elif cls == "edge" and "->" in name:
            src, dst = name.split("->", 1)
            if src in known and dst in known:
                end = text.index("</g>", m.end())
                words = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", html.unescape(
                    " ".join(re.findall(r">([^<]*)</text>", text[m.end():end]))))))
                attrs = (f'id="{tag}{num}" class="edge item" data-src="{html.escape(src)}" '
                         f'data-dst="{html.escape(dst)}" data-words="{" ".join(words)}" '
                         f'tabindex="0" role="button" aria-label="{html.escape(src)} to '
                         f'{html.escape(dst)}"')
        pieces.append(text[last:m.start()])
        pieces.append(f"<g {attrs}>\n<title>{title}</title>")
        last = m.end()
    pieces.append(text[last:])
    return "".join(pieces)


def machine_svg(p: Protocol) -> str:
    return interactive_svg(_diagrams.to_svg(_diagrams.to_dot(p)), p.state_names, p.name)


def system_nodes(s: System) -> list[str]:
    nodes = ["instances", "system_vars", "invariants"]
    nodes += [f"actor_{a}" for a in sorted({t.actor for t in s.transitions})]
    nodes += [f"sync_{t}" for t in s.sync]
    return nodes


def system_svg(s: System) -> str:
    return interactive_svg(_diagrams.to_svg(_system_views.system_dot(s)), system_nodes(s), s.name)


# ---------------------------------------------------------------------------------------------
# Rules, mutants, tests
# ---------------------------------------------------------------------------------------------
def _safe(name: str) -> str:
    """The file-name form the lockstep kit gives a counterexample (``_lockstep._safe``)."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _catalogue() -> list[dict[str, str]]:
    from settled.conformance.mutants import all_mutants

    return [{"name": m.name, "rule": m.rule, "machine": m.machine, "description": m.description}
            for m in all_mutants()]


def _link(item: str) -> dict[str, str]:
    """``query.claim`` → a link to the page of ``query`` selecting ``claim``."""
    page, _, what = item.partition(".")
    if what.startswith("mutex "):
        return {"text": item, "href": f"{page}.html#mutex"}
    return {"text": item, "href": f"{page}.html#{what}"}


def rule_index(tests_dir: Path, mutants_report: Mapping[str, Any] | None,
               traces: Sequence[Trace]) -> list[dict[str, Any]]:
    tests = _spec.rule_tests(tests_dir) if tests_dir.is_dir() else {}
    backing = _spec.rule_backing(list(MACHINES.values()), tests, list(SYSTEMS.values()))
    results = {m["name"]: m for m in (mutants_report or {}).get("mutants", [])}
    files = {t.file: t for t in traces}
    catalogue = _catalogue()
    out = []
    for b in backing:
        mutants = []
        for m in catalogue:
            if m["rule"] != b.rule:
                continue
            entry: dict[str, Any] = dict(m)
            r = results.get(m["name"])
            entry["run"] = None if r is None else {
                "killed": bool(r.get("killed")), "killed_by": r.get("killed_by"),
                "steps": r.get("steps")}
            trace = files.get(f"lockstep-{_safe(m['name'])}.itf.json")
            entry["counterexample"] = (None if trace is None else
                                       f"{trace.model}.html#cx={trace.file}")
            mutants.append(entry)
        flag = ("" if b.modelled else "tests only" if b.tests else "gap")
        out.append({"rule": b.rule, "text": RULES[b.rule],
                    "transitions": [_link(x) for x in b.transitions],
                    "properties": [_link(x) for x in b.properties],
                    "tests": list(b.tests), "mutants": mutants, "flag": flag})
    return out


# ---------------------------------------------------------------------------------------------
# The site
# ---------------------------------------------------------------------------------------------
def _search_index() -> list[list[str]]:
    """[label, what, href] for states, triggers, guards, variables, properties and rule IDs."""
    rows: list[list[str]] = []
    for p in MACHINES.values():
        rows += [[s.name, f"state of {p.name}", f"{p.name}.html#state={s.name}"] for s in p.states]
        rows += [[t, f"trigger of {p.name}", f"{p.name}.html#{t}"] for t in p.triggers()]
        guards = dict.fromkeys((g.name, g.text) for t in p.transitions for g in t.guards)
        rows += [[f"{n}: {text}", f"guard of {p.name}", f"{p.name}.html#guard={n}"]
                 for n, text in guards]
        rows += [[v.name, f"variable of {p.name}", f"{p.name}.html#var={v.name}"]
                 for v in p.variables]
        rows += [[i.name, f"property of {p.name}", f"{p.name}.html#{i.name}"] for i in p.invariants]
        rows += [[x.name, f"property of {p.name}", f"{p.name}.html#{x.name}"]
                 for x in p.step_properties]
    for s in SYSTEMS.values():
        rows += [[t.trigger, f"step of {s.name}", f"{s.name}.html#{t.trigger}"] for t in s.transitions]
        rows += [[r.trigger, f"step of {s.name}", f"{s.name}.html#{r.trigger}"] for r in s.refinements]
        rows += [[v.name, f"variable of {s.name}", f"{s.name}.html#var={v.name}"]
                 for v in s.variables]
        rows += [[i.name, f"property of {s.name}", f"{s.name}.html#{i.name}"] for i in s.invariants]
    from settled.model.progress import liveness_of

    targets: list[Protocol | System] = [*MACHINES.values(), *SYSTEMS.values()]
    for target in targets:
        rows += [[x.name, f"progress property of {target.name}", f"{target.name}.html#{x.name}"]
                 for x in liveness_of(target).progress]
    rows += [[r, RULES[r], f"rules.html#{r}"] for r in sorted(RULES, key=rule_sort_key)]
    return rows


def _asset(name: str) -> str:
    return (resources.files("settled") / "review_assets" / name).read_text(encoding="utf-8")


def _json_script(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _nav() -> list[dict[str, str]]:
    return ([{"href": "index.html", "text": "overview"}, {"href": "rules.html", "text": "rules"}]
            + [{"href": f"{n}.html", "text": n} for n in MACHINES]
            + [{"href": f"{s.name}.html", "text": s.name} for s in SYSTEMS.values()])


def _page(title: str, page: str, data: Mapping[str, Any], svg: str = "") -> bytes:
    nav = "".join(f'<a href="{html.escape(n["href"])}"'
                  + (' aria-current="page"' if n["href"] == f"{page}.html" else "")
                  + f'>{html.escape(n["text"])}</a>' for n in _nav())
    body = _asset("stage.html").replace("@@SVG@@", svg) if svg else '<main id="doc"></main>'
    parts = {"@@TITLE@@": html.escape(title), "@@CLASS@@": "diagram-page" if svg else "doc-page",
             "@@NAV@@": nav, "@@BODY@@": body, "@@DATA@@": _json_script(data)}
    return re.sub("@@[A-Z]+@@", lambda m: parts[m.group(0)], _asset("page.html")).encode()


@dataclass
class Site:
    files: dict[str, bytes] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def pages(self) -> list[str]:
        """The pages (the style, script and search index they share are the other files)."""
        return sorted(f for f in self.files if f.endswith(".html"))

    @property
    def rules_linked(self) -> list[str]:
        """Rules whose index entry links to a transition or a property."""
        return [r["rule"] for r in self.rules if r["transitions"] or r["properties"]]

    @property
    def rules_backed(self) -> list[str]:
        """Rules SPEC.md backs with a transition or a property."""
        return [r["rule"] for r in self.rules if r["flag"] == ""]

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())


def build_site(tests_dir: Path, verify_report: Mapping[str, Any] | None = None,
               mutants_report: Mapping[str, Any] | None = None,
               traces: Sequence[Trace] = ()) -> Site:
    """Every file of the site, by name."""
    site = Site()
    # one copy of what every page shares: the style, the script and the search index
    site.files["review.css"] = _asset("review.css").encode()
    site.files["review.js"] = _asset("review.js").encode()
    site.files["search.js"] = ("/* settled review: the search index of every page, generated */\n"
                               f"window.SETTLED_SEARCH = {_json_script(_search_index())};\n"
                               ).encode()
    common = {"nav": _nav(),
              "inputs": {"verify": verify_report is not None,
                         "mutants": mutants_report is not None,
                         "counterexamples": [t.file for t in traces]}}
    by_model: dict[str, list[dict[str, Any]]] = {}
    for t in sorted(traces, key=lambda t: t.file):
        by_model.setdefault(t.model, []).append({"file": t.file, "trace": t.doc})
    for p in MACHINES.values():
        data = {**common, "page": p.name, "model": machine_data(p),
                "coverage": machine_coverage(p, verify_report),
                "counterexamples": by_model.get(p.name, [])}
        site.files[f"{p.name}.html"] = _page(p.name, p.name, data, machine_svg(p))
    for s in SYSTEMS.values():
        data = {**common, "page": s.name, "model": system_data(s),
                "coverage": system_coverage(s, verify_report),
                "counterexamples": by_model.get(s.name, [])}
        site.files[f"{s.name}.html"] = _page(s.name, s.name, data, system_svg(s))
    site.rules = rule_index(tests_dir, mutants_report, traces)
    site.files["rules.html"] = _page("rules", "rules", {**common, "page": "rules",
                                                         "rules": site.rules})
    overview = {**common, "page": "index",
                "machines": [{"name": p.name, "meaning": p.meaning, "states": len(p.states),
                              "transitions": len(p.transitions), "rules": list(p.rules())}
                             for p in MACHINES.values()],
                "systems": [{"name": s.name, "meaning": s.meaning, "machine": s.machine.name,
                             "instances": s.instances} for s in SYSTEMS.values()],
                "traces": [{"file": t.file, "model": t.model,
                            "status": str(t.doc.get("#meta", {}).get("status", "")),
                            "states": len(t.doc["states"])} for t in traces]}
    site.files["index.html"] = _page("overview", "index", overview)
    return site
