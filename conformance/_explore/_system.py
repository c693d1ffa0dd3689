"""Exhaustive exploration of a declared :class:`System`, reduced by symmetry.

What is explored
----------------
Every configuration a system can reach through ``System.enabled``: local
steps of one instance, synchronised steps of several, and the system's own
steps over its shared variables. Checked on every run: the machine's
invariants on each instance, the system's invariants on the whole, the
machine's step properties on every instance that moves, system variables
outside their domains, deadlocks (not every instance terminal, no step),
traps (no all-terminal configuration reachable), machine states never
reached and machine transitions never fired by any instance. Each finding
carries a shortest run from the initial configuration, as a numbered step
list that :func:`replay_system` accepts back and as ITF.

Symmetry
--------
Instances are interchangeable, and so are worker processes when the system
names its ``worker`` parameter: every property here is symmetric in both.
The search stores one canonical representative per orbit (instance
configurations sorted, minimised over worker renamings), which keeps
distances, so counterexamples are still shortest. ``states`` counts the
representatives the search really visited; ``states_unreduced`` is the
number of concrete configurations they stand for (the sum of their orbit
sizes, counted exactly, not explored). Each representative is kept as one int, its code
(the numbers of its canonical instance tuple and of its shared values, ``_system_space``);
the visited set is a row per canonical instance tuple, indexed by the shared values' number,
and the graph a few arrays. A counterexample is rebuilt on
concrete configurations by following, from the initial one, a successor
whose canonical form is the next representative on the path.

Nothing here is a product shortcut: the instances share variables, so the
space is searched as one (``independent_product`` is always false).
"""

from __future__ import annotations

import itertools
import time
from array import array
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from settled.conformance._paused import gc_paused
from settled.model import Config, Step, System, Value, lockstep_only

from ._system_result import (
    GENERATOR,
    SystemCounterexample,
    SystemFinding,
    SystemResult,
    SystemTraceStep,
    label,
    replay_system,
)
from ._system_space import MASK, SHIFT, SYNC_BITS, _Move, _Space, _sync

__all__ = ["GENERATOR", "Progress", "SystemCounterexample", "SystemFinding", "SystemResult",
           "SystemTraceStep", "explore_system", "label", "replay_system"]

Progress = Callable[[int, int, float], None]


def explore_system(system: System, *, symmetry: bool = True, max_states: int | None = None,
                   progress: Progress | None = None,
                   classify: Callable[[str, str, Any], int] | None = None,
                   keep_graph: bool = False) -> SystemResult:
    """Visit every reachable configuration of ``system`` (one canonical one per orbit).
    ``classify``: keep the graph, each edge with the mask of its steps (``_liveness``);
    ``keep_graph``: keep it without masks (the bench's floor, ``_system_floor``)."""
    with gc_paused():  # millions of live tuples: see _paused
        result = _explore_system(system, symmetry, max_states, progress, classify)
    if classify is None and not keep_graph:
        result.graph = None
    return result


def _explore_system(system: System, symmetry: bool, max_states: int | None,
                    progress: Progress | None,
                    classify: Callable[[str, str, Any], int] | None = None) -> SystemResult:
    t0 = last = time.perf_counter()
    sp = _Space(system, symmetry)
    sp.classify = classify
    init = system.initial_config()
    code0 = sp.code(tuple(sp.intern(c) for c in init.instances), init.shared)
    sp.rows[code0 & MASK][code0 >> SHIFT] = 0  # the visited set (see _Space.rows)
    codes = array("q", [code0])  # number -> code
    parent = array("q", [-1])
    succ_start, succ, masks = array("q"), array("q"), array("q")
    first_bad: dict[tuple[str, str], tuple[int, int | None]] = {}  # (kind, name) -> (gid, child)
    domains = [frozenset(v.domain) for v in system.variables]
    keys = _Keys(codes, sp)
    complete = True
    edges = g = 0
    while g < len(codes):
        if max_states is not None and len(codes) > max_states:
            complete = False
            break
        code = codes[g]
        ids = sp.cids[code & MASK]
        _check_config(system, sp, ids, code >> SHIFT, g, first_bad, domains)
        start = len(succ)
        succ_start.append(start)
        added, skey = _instance_steps(sp, g, code, codes, parent, succ, masks, first_bad)
        edges += added + _joint_steps(sp, g, skey, codes, parent, succ, masks, first_bad)
        if start == len(succ) and not all(sp.terminal[i] for i in ids):
            first_bad.setdefault(("deadlock", "deadlock"), (g, None))
        g += 1
        if progress is not None and time.perf_counter() - last > 0.2:
            last = time.perf_counter()
            progress(len(codes), len(codes) - g, last - t0)
    succ_start.append(len(succ))
    visited = g
    findings = _findings(system, sp, keys, parent, first_bad)
    # Orbit sizes and the instance configurations seen depend on the instance tuple alone:
    # count each canonical tuple once.
    tuples = Counter(map(MASK.__and__, itertools.islice(codes, visited)))
    if complete:
        seen = {i for n in tuples for i in sp.cids[n]}
        findings.extend(_whole_space_findings(system, sp, keys, parent, succ_start, succ, seen))
    unreduced = (sum(sp.orbit(sp.cids[n]) * k for n, k in tuples.items()) if symmetry
                 else visited)
    return SystemResult(system.name, system.instances, len(sp.perms[0]) if sp.perms[0] else 0,
                        symmetry, visited, unreduced, edges, time.perf_counter() - t0, complete,
                        findings, lockstep_only=lockstep_only(system.unbreakable()),
                        graph=(sp, keys, parent, succ_start, succ, masks, visited))


class _Keys:
    """The visited representatives by number, each read as (instance ids, shared values):
    the search itself keeps only their codes (see ``_system_space``)."""

    __slots__ = ("codes", "sp")

    def __init__(self, codes: array[int], sp: _Space) -> None:
        self.codes, self.sp = codes, sp

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, g: int) -> tuple[tuple[int, ...], tuple[Value, ...]]:
        return self.sp.key(self.codes[g])


def _instance_steps(sp: _Space, g: int, code: int, codes: array[int],
                    parent: array[int], succ: array[int], masks: array[int],
                    first_bad: dict[tuple[str, str], tuple[int, int | None]]
                    ) -> tuple[int, int]:
    """Each instance's own steps out of state ``g`` (``System.enabled``'s local steps on
    interned ids, compiled per shared value), added to the graph: the number of edges they
    stand for, and the key of the instances' sync moves (0 when no instance has one,
    :meth:`_Space.sync_steps`), left to :func:`_joint_steps`."""
    cid, high = code & MASK, code & ~MASK
    ids, trans_of = sp.cids[cid], sp.trans[cid]
    compiled, classify, rows = sp._compiled, sp.classify, sp.rows
    edges = skey = 0
    for i, c in enumerate(ids):
        plain, bad, sync_no, count, mks = (compiled.get(high | c)
                                           or sp.compiled(c, code >> SHIFT))
        trans = trans_of[i]
        start = len(succ)
        for out, sid in plain:
            nc = trans.get(out)
            if nc is None:
                nc = trans[out] = sp.step_cid(ids, i, out)
            row = rows[nc]
            n = row[sid]
            if n < 0:
                n = row[sid] = len(codes)
                codes.append(nc | (sid << SHIFT))
                parent.append(g)
            succ.append(n)
        edges += count
        if classify is not None:
            masks.extend(mks)
        for k, mv in bad:
            for name in mv.props:
                first_bad.setdefault(("step_property", name), (g, succ[start + k]))
        skey = (skey << SYNC_BITS) | sync_no
    return edges, skey


def _joint_steps(sp: _Space, g: int, skey: int,
                 codes: array[int], parent: array[int], succ: array[int], masks: array[int],
                 first_bad: dict[tuple[str, str], tuple[int, int | None]]) -> int:
    """The synchronised steps (``skey``: the key of the instances' sync moves) and the
    system's own steps out of state ``g``, added to the graph; the number of edges they add."""
    code = codes[g]
    cid = code & MASK
    classify, rows = sp.classify, sp.rows
    added = 0
    if skey:
        cid_of = sp.cid_of
        for new_ids, sid, moves in _sync(sp, sp.cids[cid], code >> SHIFT, skey):
            added += 1
            nc = cid_of(new_ids)
            row = rows[nc]
            n = row[sid]
            if n < 0:
                n = row[sid] = len(codes)
                codes.append(nc | (sid << SHIFT))
                parent.append(g)
            succ.append(n)
            if classify is not None:
                masks.append(_mask(classify, moves, None))
            for _i, mv in moves:
                sp.fired.add(id(mv.step.transition))
                for name in mv.props:
                    first_bad.setdefault(("step_property", name), (g, n))
    row = rows[cid]
    for sid, own in sp.own(code >> SHIFT):  # the shared values alone change
        added += 1
        n = row[sid]
        if n < 0:
            n = row[sid] = len(codes)
            codes.append(cid | (sid << SHIFT))
            parent.append(g)
        succ.append(n)
        if classify is not None:
            masks.append(_mask(classify, (), own))
    return added


def _whole_space_findings(system: System, sp: _Space, keys: _Keys,
                          parent: array[int], succ_start: array[int], succ: array[int],
                          states_seen: set[int]) -> list[SystemFinding]:
    """What only a complete search may say: a trap, the states no instance reaches and the
    transitions no instance fires."""
    machine = system.machine
    findings: list[SystemFinding] = []
    trapped = _traps(sp, keys, succ_start, succ)
    if trapped is not None:
        findings.append(SystemFinding("trap", "trap", _TEXT["trap"], (),
                                      _counterexample(system, sp, keys, parent, trapped)))
    reached = {sp.configs[i].state for i in states_seen}
    findings.extend(SystemFinding("unreached_state", st, f"no instance ever reaches state {st!r}",
                                  ()) for st in machine.state_names if st not in reached)
    findings.extend(SystemFinding("unfired_transition", t.trigger,
                                  f"{t.trigger} from {list(t.source)} never fires in any instance",
                                  t.rules) for t in machine.transitions if id(t) not in sp.fired)
    return findings


def _mask(classify: Callable[[str, str, Any], int], moves: tuple[tuple[int, _Move], ...],
          own: Any) -> int:
    """The mask of a sync step (its movers share trigger and parameters) or an own step."""
    if moves:
        mv = moves[0][1]
        return classify(mv.step.transition.actor, mv.trigger, mv.params)
    t, p = own
    return classify(t.actor, t.trigger, p)


def _findings(system: System, sp: _Space, keys: _Keys, parent: array[int],
              first_bad: dict[tuple[str, str], tuple[int, int | None]]) -> list[SystemFinding]:
    machine = system.machine
    meta = {"invariant": {i.name: (i.rules, i.text) for i in machine.invariants},
            "system_invariant": {i.name: (i.rules, i.text) for i in system.invariants},
            "step_property": {p.name: (p.rules, p.text) for p in machine.step_properties}}
    out = []
    for (kind, name), (gid, child) in sorted(first_bad.items(), key=lambda kv: (kv[1][0], kv[0])):
        r, text = meta.get(kind, {}).get(name, ((), _TEXT.get(kind, name)))
        last = (keys[child], name) if child is not None else None
        out.append(SystemFinding(kind, name, text, tuple(r),
                                 _counterexample(system, sp, keys, parent, gid, last)))
    return out


_TEXT = {"deadlock": "a configuration where not every instance is terminal and no step is enabled",
         "trap": "a configuration from which no all-terminal configuration can be reached",
         "domain": "a system variable outside its declared domain"}


def _bad_props(machine: Any, before: Config, s: Step, after: Config,
               memo: dict[tuple[int, int, Any, int], tuple[str, ...]], sp: _Space) -> tuple[str, ...]:
    if not machine.step_properties:
        return ()
    pk = (sp.intern(before), id(s.transition), tuple(s.params.items()), sp.intern(after))
    bad = memo.get(pk)
    if bad is None:
        b, a = machine.snapshot(before), machine.snapshot(after)
        bad = memo[pk] = tuple(p.name for p in machine.step_properties
                               if not p.fn(b, s.transition, s.params, a))
    return bad


def _check_config(system: System, sp: _Space, ids: tuple[int, ...], sid: int, g: int,
                  first_bad: dict[tuple[str, str], tuple[int, int | None]],
                  domains: list[frozenset[Value]]) -> None:
    broken = sp.broken
    for i in ids:
        if broken[i]:
            for name in broken[i]:
                first_bad.setdefault(("invariant", name), (g, None))
    shared = sp.shareds[sid]
    if system.invariants:
        for inv in system.broken_invariants(sp.config((ids, shared))):
            first_bad.setdefault(("system_invariant", inv.name), (g, None))
    if sid in sp.checked_shared:
        return
    sp.checked_shared.add(sid)  # first seen here, so g is the first state that has it
    for v, x, dom in zip(system.variables, shared, domains, strict=True):
        if x not in dom:
            first_bad.setdefault(("domain", v.name), (g, None))


def _traps(sp: _Space, keys: _Keys, start: array[int], succ: array[int]) -> int | None:
    """The first (BFS order) configuration that cannot reach an all-terminal one, if any.

    Exact, in two parts. First one pass in reverse BFS order: a configuration is good when
    it is all-terminal or one of its successors is already known good (most successors
    come later in BFS order, so this settles nearly every configuration, at the cost of
    one look per configuration until its first good successor). Then a backward search
    from the good ones over the edges of the configurations still open, which finds the
    rest (a good successor with a smaller number, seen only after them)."""
    n = len(keys)
    good = bytearray(n)
    terminal = sp.terminal
    for g in range(n - 1, -1, -1):
        for k in range(start[g], start[g + 1]):
            if good[succ[k]]:
                good[g] = 1
                break
        else:
            if all(terminal[i] for i in keys[g][0]):
                good[g] = 1
    rev: dict[int, list[int]] = {}
    queue: deque[int] = deque()
    for g in range(n):
        if good[g]:
            continue
        for k in range(start[g], start[g + 1]):
            d = succ[k]
            if good[d]:
                if not good[g]:
                    good[g] = 1
                    queue.append(g)
            else:
                rev.setdefault(d, []).append(g)
    while queue:
        for p in rev.get(queue.popleft(), ()):
            if not good[p]:
                good[p] = 1
                queue.append(p)
    return next((g for g in range(n) if not good[g]), None)


def _counterexample(system: System, sp: _Space, keys: _Keys, parent: array[int],
                    target: int, last: tuple[tuple[Any, ...], str] | None = None
                    ) -> SystemCounterexample:
    """A concrete shortest run to (a configuration in the orbit of) ``keys[target]``; with
    ``last``, one more step into the orbit of ``last[0]`` that breaks step property ``last[1]``."""
    chain = []
    g = target
    while g >= 0:
        chain.append(keys[g])
        g = parent[g]
    chain.reverse()
    cfg = system.initial_config()
    configs = [cfg]
    steps: list[SystemTraceStep] = []
    for nxt in chain[1:]:
        for step in system.enabled(cfg, sp.local_steps):
            a = step.after
            if sp.canon(tuple(sp.intern(c) for c in a.instances), a.shared) == nxt:
                steps.append(label(step))
                cfg = a
                configs.append(cfg)
                break
        else:  # pragma: no cover - the canonical path always has a concrete witness
            raise AssertionError(f"{system.name}: no concrete step to a path state")
    if last is not None:
        for step in system.enabled(cfg, sp.local_steps):
            a = step.after
            if sp.canon(tuple(sp.intern(c) for c in a.instances), a.shared) != last[0]:
                continue
            if any(last[1] in _bad_props(system.machine, cfg.instances[i], s, a.instances[i], {}, sp)
                   for i, s in step.moves):
                steps.append(label(step))
                configs.append(a)
                break
        else:  # pragma: no cover
            raise AssertionError(f"{system.name}: no concrete step breaking {last[1]}")
    return SystemCounterexample(system, tuple(steps), tuple(configs))
