"""The structure of a declared system, drawn from its declaration.

A machine diagram shows one instance's states and steps; a system diagram
shows what the instances share and which steps cross them:

* one box for the machine, ``× N`` instances, listing the machine variables
  the instances share (one value for all of them);
* one box for the system's own variables;
* the system's own steps (``SharedTransition``) as edges from their actor to
  the variables they write, with their guards;
* synchronised triggers as one bold edge into the instances box ("every
  instance at once");
* refinements (extra guards and effects a machine trigger gets from the
  system) and bindings (a machine parameter the system decides) as edges
  between the instances and the system variables they read or write;
* a mutex (a lock the instances share) as a two-way edge between the
  instances and the system variable that says whether it is held;
* system invariants in a note.

Every label names the rules it stands for. Output is deterministic: items are
emitted in declaration order, and the SVG drops Graphviz's version comment.
"""

from __future__ import annotations

from settled._diagrams import to_svg
from settled.model import System

_FONT = 'fontname="Helvetica", fontsize=11'


def _esc(text: str) -> str:
    """Quote one line of text for a DOT label (line breaks are added after escaping)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _lines(*lines: str, left: bool = True) -> str:
    """Escaped lines joined by DOT line breaks (left-aligned, or centred)."""
    end = "\\l" if left else "\\n"
    return end.join(_esc(x) for x in lines) + (end if left else "")


def _rules(rules: tuple[str, ...]) -> str:
    return f" ({', '.join(rules)})" if rules else ""


def _sync_edges(s: System) -> list[str]:
    """The synchronised triggers: every instance at once (a crash drawn dotted, in red)."""
    out: list[str] = []
    by_trigger = {t.trigger: t for t in s.machine.transitions}
    for trigger in s.sync:
        synced = by_trigger.get(trigger)
        crash = synced is not None and synced.actor == "environment"
        rules = synced.rules if synced is not None else ()
        colour = "#c0392b" if crash else "#222222"
        out.append(f'  sync_{trigger} [label="{_esc(trigger)}", shape=plaintext, fontcolor="{colour}"];')
        if trigger in s.per_instance:
            text = _lines("every instance at once,", "each its own parameters",
                          _rules(rules).strip(), left=False)
        else:
            text = _lines("every instance", f"at once{_rules(rules)}", left=False)
        out.append(f'  sync_{trigger} -> instances [label="{text}", penwidth=2.5, color="{colour}"'
                   f'{", style=dotted" if crash else ""}];')
    return out


def system_dot(s: System) -> str:
    """The system's structure as DOT text (top to bottom, narrow enough for a README)."""
    m = s.machine
    out = [f"digraph {s.name} {{",
           f"  graph [rankdir=TB, {_FONT}, labelloc=t, nodesep=0.3, ranksep=0.45, "
           f'label="{_lines(f"{s.name}: {s.meaning}", left=False)}"];',
           f"  node [{_FONT}, shape=box, style=rounded];",
           f"  edge [{_FONT}];"]
    body = [f"{m.name} × {s.instances}", f"{len(m.states)} states, {len(m.variables)} variables each"]
    body += [f"shared by all: {n}" for n in s.shared]
    if s.worker:
        body.append(f"worker processes: parameter {s.worker[0]} indexes {s.worker[1]}")
    out.append(f'  instances [label="{_lines(*body)}", penwidth=2];')
    if s.variables:
        rows = [f"{v.name} ∈ {{{', '.join(map(str, v.domain))}}}, initially {v.initial}"
                for v in s.variables]
        out.append(f'  system_vars [label="{_lines("system variables", *rows)}", shape=note];')
    for actor in sorted({t.actor for t in s.transitions}):
        out.append(f'  actor_{actor} [label="{_esc(actor)}", shape=plaintext];')
    # One edge per actor, its transitions stacked in its label (side by side, they get wide).
    for actor in sorted({t.actor for t in s.transitions}):
        lines: list[str] = []
        for t in s.transitions:
            if t.actor == actor:
                guards = ", ".join(g.name for g in t.guards)
                lines += [f"{t.trigger}{f' [{guards}]' if guards else ''}",
                          f"{t.effect.text}{_rules(t.rules)}"]
        out.append(f'  actor_{actor} -> system_vars [label="{_lines(*lines, left=False)}"];')
    out += _sync_edges(s)
    for r in s.refinements:
        guards = ", ".join(g.name for g in r.guards)
        text = _lines(f"{r.trigger} also needs [{guards}]", f"{r.effect.text}{_rules(r.rules)}",
                      left=False)
        out.append(f'  instances -> system_vars [label="{text}", style=dashed];')
    if s.mutex is not None:
        x = s.mutex
        text = _lines(f"mutex {x.variable}{_rules(x.rules)}: held while {x.flag};",
                      f"{len(x.takes)} triggers of another instance wait", left=False)
        out.append(f'  instances -> system_vars [label="{text}", dir=both, color="#8e44ad", '
                   'fontcolor="#8e44ad"];')
    for b in s.bind:
        text = _lines(f"binds {m.name}.{b.param}:", b.text, left=False)
        out.append(f'  system_vars -> instances [label="{text}", style=dotted, arrowhead=open];')
    if s.invariants:
        rows = [f"{i.name}{_rules(i.rules)}:" for i in s.invariants]
        rows = [x for i, head in zip(s.invariants, rows, strict=True) for x in (head, f"  {i.text}")]
        out.append(f'  invariants [label="{_lines("system invariants", *rows)}", shape=note, '
                   'style=filled, fillcolor="#f4f4f4"];')
        out.append("  instances -> invariants [style=invis];")
    out.append("}")
    return "\n".join(out) + "\n"


def system_artefacts(s: System) -> dict[str, bytes]:
    """File name → bytes for the diagrams of ``s``."""
    dot = system_dot(s)
    return {f"{s.name}.dot": dot.encode(), f"{s.name}.svg": to_svg(dot)}
