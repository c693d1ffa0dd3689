"""Diagrams drawn from a declared table: Graphviz DOT, SVG and Mermaid.

Output is deterministic byte for byte: states are emitted in declaration
order and edges sorted by (source, destination), parallel transitions
between the same pair of states share one edge whose label has one line per
``trigger [guards]``. The SVG is rendered from the DOT text by the Graphviz
engine inside the ``pygraphviz`` wheel; its version comment is dropped so
the file depends only on the layout.

Legend: the initial state has a bold outline and an arrow from a dot; the
unknown state is filled orange; terminal states are double-outlined grey.
Edge style says who acts: user (blue), worker (black), platform (green,
dashed), environment/crash (red, dotted).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from settled.model import Protocol, Transition

ACTOR_STYLE = {
    "user": 'color="#1f5fbf", fontcolor="#1f5fbf"',
    "worker": 'color="#222222"',
    "platform": 'color="#2e8b57", fontcolor="#2e8b57", style=dashed',
    "environment": 'color="#c0392b", fontcolor="#c0392b", style=dotted',
}


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    dest: str
    lines: tuple[tuple[str, str, str], ...]  # (trigger, guard names, actor)


def label(t: Transition) -> str:
    guards = ", ".join(g.name for g in t.guards)
    return f"{t.trigger} [{guards}]" if guards else t.trigger


def edges(p: Protocol) -> list[Edge]:
    """One edge per (source, destination), its lines sorted: the diagrams' edge set."""
    grouped: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for t in p.transitions:
        guards = ", ".join(g.name for g in t.guards)
        for src in t.source:
            grouped.setdefault((src, t.target(src)), set()).add((t.trigger, guards, t.actor))
    order = {s: i for i, s in enumerate(p.state_names)}
    return [Edge(s, d, tuple(sorted(lines)))
            for (s, d), lines in sorted(grouped.items(), key=lambda kv: (order[kv[0][0]],
                                                                         order[kv[0][1]]))]


def _line(trigger: str, guards: str) -> str:
    return f"{trigger} [{guards}]" if guards else trigger


Counts = Mapping[tuple[str, str, str], int]  # (from state, to state, trigger) -> times fired


Cases = Mapping[tuple[str, str, str], int]  # (transition label, guard, alternative) -> times


def to_dot(p: Protocol, counts: Counts | None = None, cases: Cases | None = None) -> str:
    """The DOT text; with ``counts`` a coverage overlay of a lockstep campaign (with ``cases``,
    each alternative of a disjunctive guard is counted too)."""
    out = [f'digraph "{p.name}" {{',
           '  graph [rankdir=TB, fontname="Helvetica", nodesep=0.35, ranksep=0.45, '
           f'label="{p.name}: {p.meaning}", labelloc=t];',
           '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica"];',
           '  edge [fontname="Helvetica", fontsize=9];',
           '  "__start__" [shape=point, width=0.15];',
           f'  "__start__" -> "{p.initial}";']
    for s in p.states:
        attrs = []
        if s.unknown:
            attrs.append('fillcolor="#f5a623"')
        if s.terminal:
            attrs.append('peripheries=2, fillcolor="#e6e6e6"')
        if s.name == p.initial:
            attrs.append("penwidth=2.5")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f'  "{s.name}"{suffix};')
    by_trigger: dict[str, dict[str, int]] = {}
    if counts is not None:
        for t in p.transitions:
            for g in t.guards:
                for name, _ in g.cases:
                    n = sum(k for (label, guard, case), k in (cases or {}).items()
                            if label.startswith(f"{t.trigger}: ") and guard == g.name
                            and case == name)
                    by_trigger.setdefault(t.trigger, {})[name] = n
    for e in edges(p):
        out.extend(_dot_edge(e, counts, by_trigger))
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_edge(e: Edge, counts: Counts | None,
              alternatives: Mapping[str, Mapping[str, int]] | None = None) -> list[str]:
    by_actor: dict[str, list[tuple[str, str]]] = {}
    for trigger, guards, actor in e.lines:
        # One loop per state: several loops with labels on one node overlap unreadably.
        key = "worker" if e.source == e.dest else actor
        by_actor.setdefault(key, []).append((trigger, guards))
    lines = []
    for actor in sorted(by_actor):
        items = by_actor[actor]
        text = "\\l".join(_line(t, g) for t, g in items) + "\\l"
        style = ACTOR_STYLE.get(actor, "")
        if counts is not None:
            times = [counts.get((e.source, e.dest, t), 0) for t, _ in items]
            text = "\\l".join(f"{_line(t, g)}  ×{n}" + ("  NEVER FIRED" if n == 0 else "")
                              + _alternatives((alternatives or {}).get(t, {}))
                              for (t, g), n in zip(items, times, strict=True)) + "\\l"
            least = min([*times, *(n for t, _ in items
                                   for n in (alternatives or {}).get(t, {}).values())])
            style = _coverage_style(sum(times), least)
        lines.append(f'  "{e.source}" -> "{e.dest}" [label="{text}", {style}];')
    return lines


def _alternatives(counts: Mapping[str, int]) -> str:
    """`` (platform running ×3, platform cancelled NEVER FIRED)`` for a disjunctive guard."""
    if not counts:
        return ""
    return " (" + ", ".join(f"{name} ×{n}" if n else f"{name} NEVER FIRED"
                            for name, n in counts.items()) + ")"


def _coverage_style(fired: int, least: int) -> str:
    """Darker and thicker the more often fired; never-fired edges in loud magenta."""
    if least == 0:
        return 'color="#ff00ff", fontcolor="#c000c0", style=bold, penwidth=2.5'
    shade = max(0x20, 0xd0 - fired.bit_length() * 0x14)
    width = round(min(6.0, 1.0 + fired.bit_length() * 0.35), 1)
    return f'color="#{shade:02x}{shade:02x}{shade:02x}", penwidth={width}'


def coverage_svg(p: Protocol, counts: Counts, cases: Cases | None = None) -> bytes:
    return to_svg(to_dot(p, counts, cases).replace(f'label="{p.name}: ', f'label="{p.name} coverage: ', 1))


def to_svg(dot: str) -> bytes:
    import pygraphviz

    graph = pygraphviz.AGraph(string=dot)
    svg: bytes = graph.draw(format="svg", prog="dot")
    return re.sub(rb"<!-- Generated by graphviz version [^>]*-->\n", b"", svg)


def to_mermaid(p: Protocol) -> str:
    out = ["---", f"title: {p.name}", "---", "stateDiagram-v2", f"    [*] --> {p.initial}"]
    for s in p.states:
        out.append(f"    {s.name} : {s.name}")
    for e in edges(p):
        text = "<br/>".join(_line(t, g) for t, g, _ in e.lines)
        out.append(f"    {e.source} --> {e.dest} : {text}")
    for s in p.states:
        if s.terminal:
            out.append(f"    {s.name} --> [*]")
    out.append("    classDef terminal fill:#e6e6e6,stroke:#333,stroke-width:3px")
    out.append("    classDef unknown fill:#f5a623,stroke:#333")
    out.append("    classDef initial stroke-width:4px")
    for cls, names in (("terminal", [s.name for s in p.states if s.terminal]),
                       ("unknown", [s.name for s in p.states if s.unknown]),
                       ("initial", [p.initial])):
        if names:
            out.append(f"    class {','.join(names)} {cls}")
    return "\n".join(out) + "\n"


def artefacts(p: Protocol) -> dict[str, bytes]:
    """File name → bytes for every diagram of ``p``."""
    dot = to_dot(p)
    return {f"{p.name}.dot": dot.encode(), f"{p.name}.svg": to_svg(dot),
            f"{p.name}.mmd": to_mermaid(p).encode()}


class OutputError(OSError):
    """A generated file could not be written; the message names the path and the reason."""


def is_project(root: Path) -> bool:
    """True when ``root`` is a checkout of settled (its tables and its generated views live
    there); an installed wheel run from any other folder has no diagrams to check."""
    pyproject = root / "pyproject.toml"
    try:
        return ((root / "model" / "query.py").is_file() and pyproject.is_file()
                and 'name = "settled"' in pyproject.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


def write_or_check(files: Mapping[str, bytes], directory: Path, check: bool) -> list[str]:
    """Write ``files`` (or only compare them); return the names that were stale or missing.
    A file that cannot be written raises :class:`OutputError` naming it."""
    stale = []
    for name, data in sorted(files.items()):
        path = directory / name
        if not path.exists() or path.read_bytes() != data:
            stale.append(name)
            if not check:
                try:
                    directory.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                except OSError as e:
                    raise OutputError(f"cannot write {path}: {e.strerror or e}; choose a writable "
                                      "folder with --root") from e
    return stale
