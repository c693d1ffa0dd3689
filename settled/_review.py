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

Rooms: the inputs (reports, counterexamples) are read in :mod:`settled._review_inputs`,
a page's data (the model and its coverage) is built in :mod:`settled._review_data`; this
module makes the diagrams clickable, indexes the rules and assembles the site.
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

from settled import _diagram_dot, _diagrams, _spec, _system_views
from settled._review_data import machine_coverage, machine_data, system_coverage, system_data
from settled._review_inputs import Trace
from settled.model import MACHINES, RULES, Protocol, System, rule_sort_key
from settled.model.systems import SYSTEMS

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
    return interactive_svg(_diagrams.to_svg(_diagram_dot.to_dot(p)), p.state_names, p.name)


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
