"""The findings read off a finished search: the first (shortest) violation per invariant,
domain variable and step property, deadlocks and traps, and the coverage of declared
states and transitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from settled.model import Config, StepProperty

from .._counterexample import (
    DEADLOCK,
    DOMAIN,
    INVARIANT,
    STEP_PROPERTY,
    UNFIRED,
    UNREACHED,
    Finding,
    TraceStep,
)
from ._local import TransitionKey, _transition_key
from ._space import _Space


# --------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------
def _violations(space: _Space, meta: Mapping[str, Any]) -> list[Finding]:
    """First (shortest) finding per invariant, domain variable and step property."""
    local, p = space.local, space.local.protocol
    best: dict[tuple[str, int], tuple[int, int | None]] = {}  # -> (gid, bad label)
    for c, broken in local.broken.items():
        for kind, index in broken:
            prev = best.get((kind, index))
            if prev is None or prev[0] > c:
                best[(kind, index)] = (c, None)
    for c, bad in local.bad_steps.items():
        for bad_label, props in bad:
            for k in props:
                prev = best.get((STEP_PROPERTY, k))
                if prev is None or prev[0] > c:
                    best[(STEP_PROPERTY, k)] = (c, bad_label)
    order = {INVARIANT: 0, STEP_PROPERTY: 1, DOMAIN: 2}
    out = []
    for (kind, index), (g, label) in sorted(best.items(), key=lambda kv: (kv[1][0], order[kv[0][0]],
                                                                            kv[0][1])):
        extra = None
        if kind == INVARIANT:
            inv = p.invariants[index]
            name, text, rules = inv.name, inv.text, inv.rules
        elif kind == DOMAIN:
            var = p.variables[index]
            value = local.configs[g].values[index]
            name, rules = var.name, ()
            text = f"{var.name} = {value!r} is outside its declared domain {list(var.domain)}"
        else:
            sp: StepProperty = p.step_properties[index]
            name, text, rules = sp.name, sp.text, sp.rules
            assert label is not None
            extra = _extra_step(space, label)
        m = {**meta, "kind": kind, "property": name, "rules": list(rules), "instance": 0,
             "description": text}
        out.append(Finding(kind, name, text, tuple(rules), 0, space.counterexample(g, extra, m)))
    return out


def _extra_step(space: _Space, label: int) -> tuple[TraceStep, tuple[Config, ...]]:
    """The step ``label`` and the state it leads to."""
    return space.step_of(label), space.configs_of(space.local.label_dest[label])


def _stuck_name(space: _Space, gid: int) -> str:
    return str(space.local.configs[gid].state)


def _stuck(space: _Space, gids: Iterable[int], kind: str, meta: Mapping[str, Any]) -> list[Finding]:
    first: dict[str, int] = {}
    for g in gids:
        name = _stuck_name(space, g)
        if name not in first:
            first[name] = g
    out = []
    for name, g in first.items():
        inst = 0  # one instance, not settled
        if kind == DEADLOCK:
            text = f"no step is possible and not every instance has settled ({name})"
        else:
            text = f"no all-terminal state can be reached any more ({name})"
        m = {**meta, "kind": kind, "property": name, "rules": [], "instance": inst, "description": text}
        out.append(Finding(kind, name, text, (), inst, space.counterexample(g, None, m)))
    return out


def _coverage(space: _Space) -> tuple[list[Finding], list[Finding]]:
    local, p = space.local, space.local.protocol
    reached = {key[0] for key in local.keys}
    lids = set(local.label_lid)
    keys = {lid: _transition_key(local.pairs[lid][0]) for lid in lids}
    fired: set[TransitionKey] = set(keys.values())
    edges = {(local.label_state[lid], key) for lid, key in keys.items()}
    unreached = []
    for s in p.states:
        if s.name not in reached:
            rules = sorted({r for t in p.transitions for src in t.source
                            if t.target(src) == s.name for r in t.rules})
            unreached.append(Finding(UNREACHED, str(s.name), f"state '{s.name}' is never reached",
                                     tuple(rules)))
    unfired = []
    counts: dict[str, int] = {}
    for t in p.transitions:
        key = _transition_key(t)
        if key not in fired or len(t.source) == 1:
            continue  # never fired at all: said once below, for the whole transition
        for src in t.source:
            if (src, key) not in edges:
                name = f"{t.trigger}: {src} -> {t.target(src)}"
                unfired.append(Finding(
                    UNFIRED, name, f"the edge {name} [{t.guard_text or 'always'}] never fires "
                    f"(the transition fires from other sources); drop '{src}' from its sources",
                    t.rules, detail={"edge": {"from": src, "trigger": t.trigger,
                                              "to": t.target(src)}}))
    for t in p.transitions:
        counts[t.trigger] = counts.get(t.trigger, 0) + 1
        name = t.trigger if sum(x.trigger == t.trigger for x in p.transitions) == 1 \
            else f"{t.trigger}#{counts[t.trigger]}"
        if _transition_key(t) not in fired:
            unfired.append(Finding(
                UNFIRED, name, f"{t.trigger} from {list(t.source)} [{t.guard_text or 'always'}] "
                f"never fires", t.rules,
                detail={"transition": {"trigger": t.trigger, "source": list(t.source),
                                       "dest": t.dest, "guard": t.guard_text}}))
    return unreached, unfired
