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
from ._local import TransitionKey, _params_key, _transition_key
from ._space import _Space


# --------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------
def _violations(space: _Space, meta: Mapping[str, Any]) -> list[Finding]:
    """First (shortest) finding per invariant, domain variable and step property."""
    local, p = space.local, space.local.protocol
    best: dict[tuple[str, int], tuple[int, int, int | None]] = {}  # -> (gid, cid, bad label)
    for c in range(len(local.configs)):
        g = space.first_gid[c]
        if g < 0:
            continue
        for kind, index in local.broken[c]:
            prev = best.get((kind, index))
            if prev is None or prev[0] > g:
                best[(kind, index)] = (g, c, None)
        for bad_label, _sync, props in local.bad_steps[c] if c < local.expanded else ():
            for k in props:
                prev = best.get((STEP_PROPERTY, k))
                if prev is None or prev[0] > g:
                    best[(STEP_PROPERTY, k)] = (g, c, bad_label)
    order = {INVARIANT: 0, STEP_PROPERTY: 1, DOMAIN: 2}
    out = []
    for (kind, index), (g, c, label) in sorted(best.items(), key=lambda kv: (kv[1][0], order[kv[0][0]],
                                                                               kv[0][1])):
        inst = int(space.first_inst[c])
        extra = None
        if kind == INVARIANT:
            inv = p.invariants[index]
            name, text, rules = inv.name, inv.text, inv.rules
        elif kind == DOMAIN:
            var = p.variables[index]
            value = local.configs[c].values[index]
            name, rules = var.name, ()
            text = f"{var.name} = {value!r} is outside its declared domain {list(var.domain)}"
        else:
            sp: StepProperty = p.step_properties[index]
            name, text, rules = sp.name, sp.text, sp.rules
            assert label is not None
            extra = _extra_step(space, g, inst, label)
        m = {**meta, "kind": kind, "property": name, "rules": list(rules), "instance": inst,
             "description": text}
        out.append(Finding(kind, name, text, tuple(rules), inst,
                           space.counterexample(g, extra, m)))
    return out


def _extra_step(space: _Space, gid: int, inst: int, label: int) -> tuple[TraceStep, tuple[Config, ...]]:
    """The step ``label`` of instance ``inst`` taken from global state ``gid``."""
    local = space.local
    t, params = local.labels[label]
    key = space.keys[gid]
    cids = space.cids(key)
    if t.sync:
        sid = local.sync_id_of(t.trigger, params)
        nk, _changed = space._sync_targets(key, cids)[sid]
        step = TraceStep(None if space.n > 1 else 0, t.trigger, _params_key(params))
    else:
        dest = local.label_dest[label]
        nk = key + ((dest - cids[inst]) << space.shifts[inst])
        step = TraceStep(inst, t.trigger, _params_key(params))
    after = tuple(local.configs[c] for c in space.cids(nk))
    return step, after


def _culprits(space: _Space, gid: int) -> list[int]:
    """The instances to blame for a stuck state: those not settled that cannot settle by
    their own steps; if every one of them could (a trap made by sync steps), all unsettled."""
    local = space.local
    cids = space.cids(space.keys[gid])
    unsettled = [i for i, c in enumerate(cids) if not local.terminal[c]]
    alone = [i for i in unsettled if not local.settles_alone[cids[i]]]
    return alone or unsettled


def _stuck_name(space: _Space, gid: int) -> str:
    configs = space.configs_of(gid)
    return "+".join(sorted({str(configs[i].state) for i in _culprits(space, gid)})) or "terminal"


def _stuck(space: _Space, gids: Iterable[int], kind: str, meta: Mapping[str, Any]) -> list[Finding]:
    first: dict[str, int] = {}
    for g in gids:
        name = _stuck_name(space, g)
        if name not in first:
            first[name] = g
    out = []
    for name, g in first.items():
        inst = next(iter(_culprits(space, g)), None)
        if kind == DEADLOCK:
            text = f"no step is possible and not every instance has settled ({name})"
        else:
            text = f"no all-terminal state can be reached any more ({name})"
        m = {**meta, "kind": kind, "property": name, "rules": [], "instance": inst, "description": text}
        out.append(Finding(kind, name, text, (), inst, space.counterexample(g, None, m)))
    return out


def _coverage(space: _Space) -> tuple[list[Finding], list[Finding]]:
    local, p = space.local, space.local.protocol
    seen = [c for c in range(local.expanded) if space.first_gid[c] >= 0]
    reached = {local.configs[c].state for c in seen}
    fired: set[TransitionKey] = set().union(*(local.fired[c] for c in seen))
    unreached = []
    for s in p.states:
        if s.name not in reached:
            rules = sorted({r for t in p.transitions for src in t.source
                            if t.target(src) == s.name for r in t.rules})
            unreached.append(Finding(UNREACHED, str(s.name), f"state '{s.name}' is never reached",
                                     tuple(rules)))
    unfired = []
    counts: dict[str, int] = {}
    edges = {(local.configs[c].state, k) for c in seen for k in local.fired[c]}
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
