"""The DOT text of a machine's diagrams: the overview (:func:`to_dot`, also the coverage
overlay of a lockstep campaign) and the focused diagram of one state (:func:`to_focused_dot`),
with the pieces they are built of (graph settings, legend, state boxes with their self-loop
rows, edge labels, coverage styling).

Its own room because it is the one place that writes Graphviz syntax; what is drawn comes
from :mod:`settled._diagram_graph`, and :mod:`settled._diagrams` renders the text to SVG and
PNG and writes the files.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from html import escape

from settled._diagram_graph import KINDS, Edge, LoopGroup, Row, _line, edges, loop_groups, loops
from settled.model import Protocol

# The widest a picture is drawn: 1,000 px at 96 dpi. A wider layout is scaled down to it
# (the tests bound how much, so the text stays readable).
MAX_INCHES = 10.4
# Self-loop triggers packed per row of a state's box in the overview.
LOOPS_PER_ROW = 1


Counts = Mapping[tuple[str, str, str], int]  # (from state, to state, trigger) -> times fired
Cases = Mapping[tuple[str, str, str], int]  # (transition label, guard, alternative) -> times
Alternatives = Mapping[str, Mapping[str, int]]  # trigger -> alternative of its guard -> times


def _alternatives_of(p: Protocol, cases: Cases | None) -> dict[str, dict[str, int]]:
    """Per trigger, how often each alternative of a disjunctive guard was taken."""
    by_trigger: dict[str, dict[str, int]] = {}
    for t in p.transitions:
        for g in t.guards:
            for name, _ in g.cases:
                n = sum(k for (label, guard, case), k in (cases or {}).items()
                        if label.startswith(f"{t.trigger}: ") and guard == g.name
                        and case == name)
                by_trigger.setdefault(t.trigger, {})[name] = n
    return by_trigger


def _alternatives(counts: Mapping[str, int]) -> str:
    """`` (platform running ×3, platform cancelled NEVER FIRED)`` for a disjunctive guard."""
    if not counts:
        return ""
    return " (" + ", ".join(f"{name} ×{n}" if n else f"{name} NEVER FIRED"
                            for name, n in counts.items()) + ")"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _header(name: str, title: str, fit: bool = True) -> list[str]:
    """The graph's settings; ``fit`` scales a layout wider than :data:`MAX_INCHES` down to it
    (the coverage overlay, a diagnostic to zoom into, keeps its natural size)."""
    size = f'size="{MAX_INCHES},40", ' if fit else ""
    return [f'digraph "{_quote(name)}" {{',
            '  graph [rankdir=TB, fontname="Helvetica", fontsize=12, nodesep=0.12, ranksep=0.4, '
            f'ordering=out, {size}label="{_quote(title)}", labelloc=t, '
            'labeljust=l, newrank=true];',
            '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", '
            'fontsize=11, margin="0.08,0.04", label="\\N"];',
            '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.7];']


def _state_attrs(p: Protocol, name: str) -> list[str]:
    s = next(s for s in p.states if s.name == name)
    attrs = []
    if s.unknown:
        attrs.append('fillcolor="#f5a623"')
    if s.terminal:
        attrs.append('peripheries=2, fillcolor="#e6e6e6"')
    if s.name == p.initial:
        attrs.append("penwidth=2.5")
    return attrs


def _legend(p: Protocol, focused: bool, coverage: bool = False) -> list[str]:
    """A compact legend cluster: one sample edge per kind, two to a row, drawn with that
    kind's style, then the node styles. It is part of every SVG, so the picture explains
    itself."""
    rows = []
    for k, (colour, style, text) in KINDS.items():
        a, b = f"__legend_{k}_a", f"__legend_{k}_b"
        rows += [f'    "{a}" [shape=point, width=0.04, color="{colour}"];',
                 f'    "{b}" [shape=point, width=0.04, color="{colour}"];',
                 f'    "{a}" -> "{b}" [label="{text}", color="{colour}", fontcolor="{colour}", '
                 f'style={style}];']
    where = (["every transition with its guards [in brackets]"] if focused
             else ["↻ a self-loop, listed in its state;",
                   f"guards in {p.name}.STATE.svg and SPEC.md"])
    if coverage:
        where = ["×N: times the campaign fired it; edges darker and", "thicker the more; "
                 "magenta: NEVER FIRED; dashes and row colours by kind"]
    note = "\\l".join(_quote(line) for line in where) + "\\l"
    kinds = list(KINDS)
    pairs = [kinds[i:i + 2] for i in range(0, len(kinds), 2)]
    same = [" ".join(f'"__legend_{k}_{end}";' for k in pair for end in "ab") for pair in pairs]
    chain = ["__legend_note", *(f"__legend_{pair[0]}_a" for pair in pairs), "__legend_unknown"]
    return ['  subgraph cluster_legend {',
            '    graph [label="legend", fontsize=9, style="rounded,dashed", '
            'color="#999999", labeljust=l, margin=4];',
            '    node [fontsize=9, margin="0.04,0.02", height=0.2];',
            f'    "__legend_note" [shape=plain, style="", label="{note}"];',
            *rows,
            '    "__legend_initial" [label="initial", penwidth=2.5];',
            '    "__legend_unknown" [label="unknown", fillcolor="#f5a623"];',
            '    "__legend_terminal" [label="terminal", peripheries=2, fillcolor="#e6e6e6"];',
            *(f"    {{ rank=same; {row} }}" for row in same),
            '    { rank=same; "__legend_initial"; "__legend_unknown"; "__legend_terminal"; }',
            *(f'    "{x}" -> "{y}" [style=invis];' for x, y in itertools.pairwise(chain)),
            '  }']


def _legend_place(p: Protocol, where: str, shown: set[str] | None = None) -> list[str]:
    """Invisible edges that put the legend in a row of its own above or below the picture,
    where it adds height, not width (weight 0: they do not pull states sideways)."""
    shown = set(p.state_names) if shown is None else shown
    if where == "top":
        first = "__start__" if p.initial in shown else next(s for s in p.state_names if s in shown)
        return [f'  "__legend_terminal" -> "{first}" [style=invis, weight=0, minlen=2];']
    ends = [s.name for s in p.states if s.name in shown and s.terminal] or [
        s for s in p.state_names if s in shown]
    return [f'  "{s}" -> "__legend_user_a" [style=invis, weight=0, minlen=2];' for s in ends]


def natural_width(dot: str) -> float:
    """The natural width of a layout, in points, before any scaling to ``size``."""
    import pygraphviz

    graph = pygraphviz.AGraph(string=dot)
    graph.layout(prog="dot")
    return float(str(graph.graph_attr["bb"]).split(",")[2])


def _count_text(n: int) -> str:
    return f" ×{n}" + (" NEVER FIRED" if n == 0 else "")


def _loop_rows(rows: tuple[tuple[str, str, str], ...], state: str, *, guards: bool,
               counts: Counts | None, alternatives: Alternatives | None = None) -> list[str]:
    """HTML table rows listing a state's self-loops, coloured by kind."""
    cells, shown = [], set()
    for trigger, guard, k in rows:
        if not guards and trigger in shown:
            continue  # the same trigger under other guards: one row without guards
        shown.add(trigger)
        colour = KINDS[k][0]
        text = escape(_line(trigger, guard) if guards else trigger)
        if counts is not None:
            n = counts.get((state, state, trigger), 0)
            taken = (alternatives or {}).get(trigger, {})
            colour = "#c000c0" if min([n, *taken.values()]) == 0 else colour
            text += escape(_count_text(n) + _alternatives(taken))
        cells.append(f'<font point-size="9" color="{colour}">↻ {text}</font>')
    per_row = 1 if guards or counts is not None else LOOPS_PER_ROW
    return [f'<tr><td align="left" balign="left">{"  ".join(cells[i:i + per_row])}</td></tr>'
            for i in range(0, len(cells), per_row)]


def _node(p: Protocol, name: str, rows: list[str]) -> str:
    attrs = _state_attrs(p, name)
    if rows:
        table = ('<<table border="0" cellborder="0" cellspacing="0" cellpadding="1">'
                 f'<tr><td><b>{escape(name)}</b></td></tr>{"".join(rows)}</table>>')
        attrs.insert(0, f"label={table}")
    return f'  "{name}"' + (f" [{', '.join(attrs)}]" if attrs else "") + ";"


def _wrapped(trigger: str, guards: str, width: int = 34) -> list[str]:
    """``trigger`` then its guards in brackets, wrapped to lines of about ``width``
    characters: a long guard list makes a label tall, not wide."""
    if not guards:
        return [trigger]
    lines, line = [trigger], "  ["
    for i, name in enumerate(guards.split(", ")):
        piece = name + ("]" if i == guards.count(", ") else ",")
        if len(line) + len(piece) > width and line.strip() not in ("[", ""):
            lines.append(line.rstrip())
            line = "   "
        line += piece + " "
    lines.append(line.rstrip())
    return lines


def _edge_lines(e: Edge, counts: Counts | None, guards: bool, extra: str = "",
                alternatives: Alternatives | None = None) -> list[str]:
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for trigger, guard, k in e.lines:
        # Without guards, two transitions that differ only in their guards read as one.
        if guards or trigger not in (t for t, _ in by_kind.get(k, [])):
            by_kind.setdefault(k, []).append((trigger, guard))
    out = []
    for k in sorted(by_kind):
        colour, style, _ = KINDS[k]
        items = by_kind[k]
        texts = [x for t, g in items for x in (_wrapped(t, g) if guards else [t])]
        attrs = f'color="{colour}", fontcolor="{colour}", style={style}{extra}'
        if counts is not None:
            times = [counts.get((e.source, e.dest, t), 0) for t, _ in items]
            taken = [(alternatives or {}).get(t, {}) for t, _ in items]
            texts = [f"{x}{_count_text(n)}{_alternatives(a)}"
                     for x, n, a in zip(texts, times, taken, strict=True)]
            least = min([*times, *(n for a in taken for n in a.values())])
            attrs = _coverage_style(sum(times), least, style)
        text = "\\l".join(_quote(x) for x in texts) + "\\l"
        out.append(f'  "{e.source}" -> "{e.dest}" [key={k}, label="{text}", {attrs}];')
    return out


def _cells(rows: tuple[Row, ...] | list[Row]) -> list[str]:
    return [f'<font point-size="9" color="{KINDS[k][0]}">↻ {escape(t)}</font>' for t, _, k in rows]


def _group_label(g: LoopGroup, outer: bool) -> str:
    cells = _cells(g.rows)
    lines = ["  ".join(cells[i:i + 3]) for i in range(0, len(cells), 3)]
    head = "every state in this box also loops on" if outer else "and these also on"
    body = "".join(f'<tr><td align="left">{line}</td></tr>' for line in lines)
    return (f'<<table border="0" cellborder="0" cellspacing="0" cellpadding="1">'
            f'<tr><td align="left"><font point-size="9">{head}</font></td></tr>{body}</table>>')


def to_dot(p: Protocol, counts: Counts | None = None, cases: Cases | None = None) -> str:
    """The overview's DOT text; with ``counts`` a coverage overlay of a lockstep campaign
    (every edge and self-loop row says how often it fired; never-fired ones in magenta;
    with ``cases``, each alternative of a disjunctive guard is counted too).

    Self-loops that several states share are listed once, on a box drawn around those
    states (see :func:`loop_groups`); the rest are listed inside their state's box. The
    coverage overlay lists every self-loop in its own state, with its count."""
    title = f"{p.name}{' coverage' if counts is not None else ''}: {p.meaning}"
    out = [*_header(p.name, title, fit=counts is None),
           *_legend(p, focused=False, coverage=counts is not None),
           '  "__start__" [shape=point, width=0.15];',
           f'  "__start__" -> "{p.initial}";']
    state_loops = loops(p)
    groups = loop_groups(p) if counts is None else []
    alternatives = _alternatives_of(p, cases) if counts is not None else {}

    def node(s: str) -> str:
        shared = {r for g in groups if s in g.states for r in g.rows}
        rows = tuple(r for r in state_loops[s] if r not in shared)
        return _node(p, s, _loop_rows(rows, s, guards=False, counts=counts,
                                      alternatives=alternatives))

    def emit(group: LoopGroup | None, depth: int) -> list[str]:
        inside = set(p.state_names) if group is None else group.states
        children = [g for g in groups if g is not group and g.states < inside
                    and not any(h is not g and h is not group and g.states < h.states < inside
                                for h in groups)]
        mine = [s for s in p.state_names if s in inside
                and not any(s in c.states for c in children)]
        pad = "  " * depth
        lines = [pad + node(s).strip() for s in mine]
        for child in children:
            name = "_".join(sorted(child.states, key=p.state_names.index))
            lines += [f"{pad}subgraph cluster_loops_{name} {{",
                      f'{pad}  graph [label={_group_label(child, group is None)}, '
                      'style="rounded", color="#8c8c8c", labeljust=l, margin=8];',
                      *emit(child, depth + 1), f"{pad}}}"]
        return lines

    out += emit(None, 1)
    for e in edges(p):
        if e.source != e.dest:
            out.extend(_edge_lines(e, counts, guards=False, alternatives=alternatives))
    # The legend above or below the picture, whichever lays it out narrower.
    texts = ["\n".join([*out, *_legend_place(p, where), "}"]) + "\n" for where in ("top", "bottom")]
    return min(texts, key=lambda text: (natural_width(text), text))


def to_focused_dot(p: Protocol, state: str) -> str:
    """One state's DOT text: the state with its self-loops, its in- and out-edges and the
    states at their other ends, every transition with its guards."""
    meaning = next(s.meaning for s in p.states if s.name == state)
    out = [*_header(f"{p.name}.{state}", f"{p.name}: {state}, {meaning}"),
           *_legend(p, focused=True)]
    near = [e for e in edges(p) if state in (e.source, e.dest) and e.source != e.dest]
    others = {e.source for e in near} | {e.dest for e in near}
    if state == p.initial:
        out += ['  "__start__" [shape=point, width=0.15];', f'  "__start__" -> "{state}";']
    for s in p.state_names:
        if s == state:
            out.append(_node(p, s, _loop_rows(loops(p)[s], s, guards=True, counts=None)))
        elif s in others:
            out.append(_node(p, s, []))
    # Neighbours alternate between one and two rows away, so their labels do not all
    # sit side by side in one row.
    for i, e in enumerate(near):
        out.extend(_edge_lines(e, None, guards=True, extra=f", minlen={1 + i % 3}"))
    shown = others | {state}
    texts = ["\n".join([*out, *_legend_place(p, where, shown), "}"]) + "\n"
             for where in ("top", "bottom")]
    return min(texts, key=lambda text: (natural_width(text), text))


def _coverage_style(fired: int, least: int, style: str) -> str:
    """Darker and thicker the more often fired; never-fired edges in loud magenta."""
    if least == 0:
        return f'color="#ff00ff", fontcolor="#c000c0", style="bold,{style}", penwidth=2.5'
    shade = max(0x20, 0xd0 - fired.bit_length() * 0x14)
    width = round(min(6.0, 1.0 + fired.bit_length() * 0.35), 1)
    return f'color="#{shade:02x}{shade:02x}{shade:02x}", style={style}, penwidth={width}'
