"""The explorer: breadth-first model checking of a declared protocol and its environment.

What is explored
----------------
``instances`` copies of one declared machine (N queries), each with the
workers that the declaration already models inside it. A global state is the
tuple of the N per-instance configurations. From a global state, every step
that ``Protocol.enabled`` (the table's successor function) allows on instance
``i`` replaces instance ``i`` and leaves the others alone, EXCEPT a ``sync``
transition (say, a crash that takes every lease of one worker at once): it is
offered once per parameter value for the whole composition and fires
together on every instance where it is enabled. A global state is terminal
when every instance is in a terminal state.

Checked on every run: each invariant on every reachable state (per instance),
each step property on every step, values outside a variable's declared
domain, deadlocks (a non-terminal state with no successor), traps (a state
from which no all-terminal state can be reached), declared states never
reached and declared transitions never fired. Each finding carries the
shortest path from the initial state, replayable as a step list and as ITF;
only the first (shortest) finding per property name is kept. A configuration
with a value outside its domain is reported and not explored further (past
its bounds the space may be infinite).

How it stays fast
-----------------
The instances never read each other's variables, so everything about one
instance is computed once per *local* configuration (the query machine has
about 9k of them) and the global search only does integer arithmetic:

* The local space is explored first, through the successor function. Per
  local configuration it keeps the distinct successors, the broken
  invariants and domains, and the step properties each of its steps breaks.
* A global state is one int: local id ``c_i`` in bits ``[B*i, B*(i+1))``.
  A local step on instance ``i`` is ``key + (dest - c_i) << B*i``, so a
  successor costs one addition and one dict lookup. Ids are dense and given
  in BFS order; a parents array gives the shortest paths.
* A property broken by a local configuration (or one of its steps) is first
  reached in the first global state, in BFS order, that contains that
  configuration, so the search only records where each local configuration
  was first seen and the findings are read off afterwards.
* Traps: if every reached local configuration can settle by its own
  non-sync steps (which no other instance can disable), no global state is
  a trap and nothing more is computed. Otherwise: backward reachability from
  the all-terminal states, where the reverse edges are never stored: a
  predecessor of ``g`` is ``g`` with one instance replaced by a local
  predecessor (or a sync pre-image), looked up among the reached states.

``explore_via_transitions`` (``_oracle_check``) runs the same search but
computes every local step by firing it through the ``transitions.Machine``
oracle; it fails loudly on any edge where the oracle and the table disagree.
Counterexamples, their step lists and their replay are in ``_counterexample``.
"""

from __future__ import annotations

import itertools
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...model._compiled import compile_machine
from ...model._core import (
    Config,
    Params,
    Protocol,
    Snapshot,
    Step,
    StepProperty,
    Transition,
    Value,
    lockstep_only,
)
from .. import _itf
from .._paused import gc_paused

if TYPE_CHECKING:  # networkx is imported by graph(), not by every command that explores
    import networkx as nx

from .._counterexample import (
    DEADLOCK,
    DOMAIN,
    INVARIANT,
    STEP_PROPERTY,
    TRAP,
    UNFIRED,
    UNREACHED,
    Counterexample,
    Finding,
    TraceStep,
    parse_steps,
    replay,
    to_plain,
)

# Counterexamples and their replay live in _counterexample; they are re-exported here, where the
# explorer's callers have always found them.
__all__ = ["Counterexample", "ExploreResult", "Finding", "Progress", "TraceStep", "explore",
           "explore_via_transitions", "parse_steps", "replay"]

Progress = Callable[[int, int, float], None]
Successors = Callable[[Config], Iterable[Step]]
TransitionKey = tuple[str, tuple[str, ...], "str | None", str]

_PROGRESS_EVERY = 0.2  # seconds between progress calls: at most ~5 per second

# --------------------------------------------------------------------------
# The local space: one instance, computed once
# --------------------------------------------------------------------------
def _transition_key(t: Transition) -> TransitionKey:
    return (t.trigger, t.source, t.dest, t.guard_text)


def _params_key(params: Params) -> tuple[tuple[str, Value], ...]:
    return tuple(params.items())


class _Local:
    """Every configuration one instance can reach, with its steps and what they break."""

    def __init__(self, protocol: Protocol, successors: Successors, limit: int | None,
                 *, checks: bool = True) -> None:
        """``checks=False``: the configurations and steps only, no invariant or step property
        evaluated, and configurations outside a domain expanded like any other: the space
        ``Protocol.enabled`` walks (for the coverage tour)."""
        p = protocol
        self.protocol = p
        self.checks = checks
        self.configs: list[Config] = []
        self.ids: dict[Config, int] = {}
        self.labels: list[tuple[Transition, Params]] = []
        self.moves: list[tuple[tuple[int, int], ...]] = []  # (dest, label), distinct dest != c
        self.moveset: list[frozenset[int]] = []
        self.selfloop = bytearray()
        self.syncs: list[tuple[tuple[int, int, int], ...]] = []  # (sync id, dest, label)
        self.sync_steps: list[tuple[str, tuple[tuple[str, Value], ...]]] = []
        self.terminal = bytearray()
        self.broken: list[tuple[tuple[str, int], ...]] = []  # (INVARIANT|DOMAIN, index)
        self.bad_steps: list[tuple[tuple[int, bool, tuple[int, ...]], ...]] = []  # (label, sync, props)
        self.fired: list[frozenset[TransitionKey]] = []
        self.label_start = array("q")  # labels of configuration c: label_start[c]:label_start[c+1]
        self.label_dest = array("q")  # the local id each label leads to
        self.complete = True
        self._sync_ids: dict[tuple[str, tuple[tuple[str, Value], ...]], int] = {}
        terminal = p.terminal_states
        domains = [frozenset(v.domain) for v in p.variables]
        if successors == p.enabled:
            head = self._expand_table(limit, domains, terminal)
        else:
            head = self._expand(successors, limit, domains, terminal)
        self.expanded = head
        self.label_start.append(len(self.labels))
        for c in self.configs[head:]:  # reached but left unexpanded by the limit
            self._check(c, p.snapshot(c), domains, terminal)
        self.settles_alone = self._settles_alone()

    def _expand_table(self, limit: int | None, domains: list[frozenset[Value]],
                      terminal: frozenset[str]) -> int:
        """:meth:`_expand` for the table's own successor function, generated.

        The same semantics as ``Protocol.enabled`` (per state, each parameter choice takes the
        first transition of its trigger group whose guards pass), run by the functions
        ``model._compiled`` generates from the declaration's expressions: one per control
        state over the plain values tuple, with the parameters, the step's label and the
        variables it does not write folded in, the step properties each step breaks computed
        in the same function, and the invariants in one more."""
        p = self.protocol
        gen = compile_machine(p, step_properties=self.checks)
        keys: dict[int, TransitionKey] = {}
        label_of = [(t, params, keys.get(id(t)) or keys.setdefault(id(t), _transition_key(t)),
                     t.sync, t.trigger) for t, params in gen.labels]
        successors = gen.successors
        invariants = gen.broken_invariants if self.checks else None
        pairs = [(t, params) for t, params in gen.labels]
        ids: dict[tuple[str, tuple[Value, ...]], int] = {}
        configs, labels, label_dest = self.configs, self.labels, self.label_dest
        add_label, add_dest, starts = labels.append, label_dest.append, self.label_start
        add_config = configs.append
        ids[(p.initial, p.initial_config().values)] = 0
        add_config(p.initial_config())
        head = 0
        while head < len(configs):
            if limit is not None and head >= limit:
                self.complete = False
                break
            c = configs[head]
            cid = head
            head += 1
            state, values = c.state, c.values
            outside = self._check(c, None, domains, terminal,
                                  () if invariants is None else invariants(state, values))
            moves: dict[int, int] = {}
            syncs: list[tuple[int, int, int]] = []
            bad: list[tuple[int, bool, tuple[int, ...]]] = []
            lids: set[int] = set()
            loop = False
            starts.append(len(labels))
            # Outside a domain: not expanded when checking (reported; past its bounds the
            # space may be infinite); a walk without checks goes on, as Protocol.enabled does.
            steps = () if outside and self.checks else successors[state](values) \
                if state in successors else ()
            for lid, dest, after_values, broken in steps:
                key = (dest, after_values)
                d = ids.get(key)
                if d is None:  # a new configuration (interned inline: this loop is the hot one)
                    d = ids[key] = len(configs)
                    add_config(Config(dest, after_values))
                label = len(labels)
                add_label(pairs[lid])
                add_dest(d)
                lids.add(lid)
                _t, params, _tkey, sync, trigger = label_of[lid]
                if broken:
                    bad.append((label, sync, broken))
                if sync:
                    syncs.append((self._sync_id(trigger, params), d, label))
                elif d == cid:
                    loop = True
                elif d not in moves:
                    moves[d] = label
            self.moves.append(tuple(moves.items()))
            self.moveset.append(frozenset(moves))
            self.selfloop.append(loop)
            self.syncs.append(tuple(syncs))
            self.bad_steps.append(tuple(bad))
            self.fired.append(frozenset(label_of[lid][2] for lid in lids))
        return head

    def _expand(self, successors: Successors, limit: int | None, domains: list[frozenset[Value]],
                terminal: frozenset[str]) -> int:
        """Breadth-first over one instance, through any successor function (the oracle's)."""
        p = self.protocol
        snaps: dict[Config, Snapshot] = {}
        keys: dict[int, TransitionKey] = {}

        def snap(c: Config) -> Snapshot:
            s = snaps.get(c)
            if s is None:
                s = snaps[c] = p.snapshot(c)
            return s

        self._intern(p.initial_config())
        head = 0
        while head < len(self.configs):
            if limit is not None and head >= limit:
                self.complete = False
                break
            c = self.configs[head]
            cid = head
            head += 1
            before = snap(c)
            outside = self._check(c, before, domains, terminal)
            moves: dict[int, int] = {}
            syncs: list[tuple[int, int, int]] = []
            bad: list[tuple[int, bool, tuple[int, ...]]] = []
            fired: set[TransitionKey] = set()
            loop = False
            self.label_start.append(len(self.labels))
            for step in () if outside and self.checks else successors(c):
                t = step.transition
                dest = self._intern(step.after)
                label = len(self.labels)
                self.labels.append((t, step.params))
                self.label_dest.append(dest)
                fired.add(keys.get(id(t)) or keys.setdefault(id(t), _transition_key(t)))
                after = snap(step.after)
                props = tuple(k for k, sp in enumerate(p.step_properties)
                              if self.checks and not sp.fn(before, t, step.params, after))
                if props:
                    bad.append((label, t.sync, props))
                if t.sync:
                    syncs.append((self._sync_id(t.trigger, step.params), dest, label))
                elif dest == cid:
                    loop = True
                else:
                    moves.setdefault(dest, label)
            self.moves.append(tuple(moves.items()))
            self.moveset.append(frozenset(moves))
            self.selfloop.append(loop)
            self.syncs.append(tuple(syncs))
            self.bad_steps.append(tuple(bad))
            self.fired.append(frozenset(fired))
        return head

    def _settles_alone(self) -> bytearray:
        """1 for each configuration that reaches a terminal one by non-sync steps alone."""
        rev: list[list[int]] = [[] for _ in self.configs]
        for c in range(self.expanded):
            for d, _label in self.moves[c]:
                rev[d].append(c)
        good = bytearray(len(self.configs))
        queue = [c for c in range(self.expanded) if self.terminal[c]]
        for c in queue:
            good[c] = 1
        for c in queue:
            for p in rev[c]:
                if not good[p]:
                    good[p] = 1
                    queue.append(p)
        return good

    def _check(self, c: Config, snap: Snapshot | None, domains: list[frozenset[Value]],
               terminal: frozenset[str], invariants: tuple[int, ...] | None = None) -> bool:
        """Record what ``c`` breaks and whether it counts as settled; True if outside a domain.
        ``invariants``: the broken ones, already computed (else evaluated on ``snap``)."""
        p = self.protocol
        if invariants is not None:
            broken = [(INVARIANT, i) for i in invariants]
        else:
            snap = snap or p.snapshot(c)
            broken = [(INVARIANT, i) for i, inv in enumerate(p.invariants)
                      if self.checks and not inv.fn(c.state, snap.v)]
        try:
            outside = [(DOMAIN, i) for i, x in enumerate(c.values) if x not in domains[i]]
        except TypeError:  # an unhashable value: certainly not one of the declared values
            outside = [(DOMAIN, i) for i, (x, dom) in enumerate(zip(c.values, domains, strict=True))
                       if not _in_domain(x, dom)]
        self.broken.append((*broken, *outside))
        # A configuration outside the declared domains is reported and not explored: past the
        # bounds the space may be infinite (a count that never stops growing). For deadlocks and
        # traps it counts as settled, so it is blamed once, as a domain finding.
        self.terminal.append(c.state in terminal or bool(outside))
        return bool(outside)

    def labels_from(self, c: int) -> range:
        return range(self.label_start[c], self.label_start[c + 1])

    def sync_id_of(self, trigger: str, params: Params) -> int:
        return self._sync_ids[(trigger, _params_key(params))]

    def _intern(self, c: Config) -> int:
        cid = self.ids.get(c)
        if cid is None:
            cid = self.ids[c] = len(self.configs)
            self.configs.append(c)
        return cid

    def _sync_id(self, trigger: str, params: Params) -> int:
        key = (trigger, _params_key(params))
        sid = self._sync_ids.get(key)
        if sid is None:
            sid = self._sync_ids[key] = len(self.sync_steps)
            self.sync_steps.append(key)
        return sid


def _in_domain(x: Value, domain: frozenset[Value]) -> bool:
    try:
        return x in domain
    except TypeError:  # unhashable: certainly not one of the declared values
        return False


# --------------------------------------------------------------------------
# The global search
# --------------------------------------------------------------------------
class _Space:
    """The reachable global states (as ints) with BFS parents; built by :meth:`search`."""

    def __init__(self, local: _Local, instances: int) -> None:
        if instances < 1:
            raise ValueError(f"explore: instances must be at least 1, got {instances}")
        self.local = local
        self.n = instances
        self.bits = max(1, (len(local.configs) - 1).bit_length())
        self.mask = (1 << self.bits) - 1
        self.shifts = [self.bits * i for i in range(instances)]
        self.ids: dict[int, int] = {}
        self.keys: list[int] = []
        self.parent = array("q")
        self.via = array("q")  # label * (n + 1) + instance; instance == n: sync id
        self.first_gid = array("q", [-1]) * len(local.configs)
        self.first_inst = array("q", [-1]) * len(local.configs)
        self.edges = 0
        self.deadlocks: list[int] = []
        self.all_terminal: list[int] = []
        self.complete = True

    # -- encoding --------------------------------------------------------------
    def cids(self, key: int) -> list[int]:
        return [(key >> s) & self.mask for s in self.shifts]

    def configs_of(self, gid: int) -> tuple[Config, ...]:
        return tuple(self.local.configs[c] for c in self.cids(self.keys[gid]))

    def _sync_targets(self, key: int, cids: Sequence[int]) -> dict[int, tuple[int, list[tuple[int, int]]]]:
        """sync id -> (target key, [(instance, dest)] of the instances it changes)."""
        out: dict[int, tuple[int, list[tuple[int, int]]]] = {}
        for i, c in enumerate(cids):
            for sid, dest, _label in self.local.syncs[c]:
                nk, changed = out.get(sid, (key, []))
                if dest != c:
                    changed.append((i, dest))
                out[sid] = (nk + ((dest - c) << self.shifts[i]), changed)
        return out

    # -- the BFS -----------------------------------------------------------------
    def search(self, max_states: int | None, progress: Progress | None, t0: float) -> None:
        local, n, shifts, mask = self.local, self.n, self.shifts, self.mask
        width = n + 1
        # Per instance i, per local id c: (moves, distinct targets, self-loop, syncs) where a move
        # is (key delta, dest, via code) and a sync is (sync id, key delta, dest); None for a
        # local configuration that max_states left unexpanded.
        rows: list[list[tuple[Any, int, bool, Any] | None]] = []
        for i in range(n):
            sh = shifts[i]
            row: list[tuple[Any, int, bool, Any] | None] = [None] * len(local.configs)
            for c in range(local.expanded):
                moves = tuple(((d - c) << sh, d, lab * width + i) for d, lab in local.moves[c])
                syncs = tuple((sid, (d - c) << sh, d) for sid, d, _lab in local.syncs[c])
                row[c] = (moves, len(moves), bool(local.selfloop[c]), syncs)
            rows.append(row)
        per_instance = list(zip(range(n), shifts, rows, strict=True))
        moveset = local.moveset
        first_gid, first_inst = self.first_gid, self.first_inst
        ids, keys, parent, via = self.ids, self.keys, self.parent, self.via
        setdefault, add_key, add_parent, add_via = ids.setdefault, keys.append, parent.append, via.append
        init = 0  # every instance starts at local id 0
        ids[init], count = 0, 1
        add_key(init), add_parent(-1), add_via(-1)
        first_gid[0], first_inst[0] = 0, 0
        limit = max_states if max_states is not None else -1
        edges, head, next_report = 0, 0, time.perf_counter() + _PROGRESS_EVERY
        while head < count:
            if count >= limit >= 0:
                self.complete = False
                break
            key, g = keys[head], head
            head += 1
            if not head & 1023 and progress is not None:
                now = time.perf_counter()
                if now >= next_report:
                    progress(count, count - head, now - t0)
                    next_report = now + _PROGRESS_EVERY
            out = 0
            loop = False
            sync_here = False
            for i, sh, row in per_instance:
                info = row[(key >> sh) & mask]
                if info is None:  # the local space was cut short by max_states
                    self.complete = False
                    break
                moves, k, self_loop, syncs = info
                out += k
                if self_loop:
                    loop = True
                if syncs:
                    sync_here = True
                for delta, d, code in moves:
                    nk = key + delta
                    if setdefault(nk, count) == count:
                        count += 1
                        add_key(nk), add_parent(g), add_via(code)
                        if first_gid[d] < 0:
                            first_gid[d], first_inst[d] = count - 1, i
            if not self.complete:
                head -= 1
                break
            if sync_here:
                # sync id -> [key delta, [(instance, dest) of the instances it changes]]
                acc: dict[int, list[Any]] = {}
                cids = self.cids(key)
                for i, _sh, row in per_instance:
                    info = row[cids[i]]
                    assert info is not None
                    for sid, delta, d in info[3]:
                        entry = acc.get(sid)
                        if entry is None:
                            entry = acc[sid] = [0, []]
                        if delta:
                            entry[0] += delta
                            entry[1].append((i, d))
                seen_targets: set[int] = set()
                for sid in sorted(acc):
                    delta, changed = acc[sid]
                    if not delta:
                        loop = True
                        continue
                    nk = key + delta
                    if nk in seen_targets:
                        continue
                    seen_targets.add(nk)
                    # A sync step that changes one instance exactly as one of its local steps
                    # joins the same two states: one DiGraph edge, not two.
                    if len(changed) != 1 or changed[0][1] not in moveset[cids[changed[0][0]]]:
                        out += 1
                    if setdefault(nk, count) == count:
                        count += 1
                        add_key(nk), add_parent(g), add_via(sid * width + n)
                        for i, d in changed:
                            if first_gid[d] < 0:
                                first_gid[d], first_inst[d] = count - 1, i
            edges += out + loop
            if out == 0 and not loop:
                if all(local.terminal[c] for c in self.cids(key)):
                    self.all_terminal.append(g)
                else:
                    self.deadlocks.append(g)
        self.edges = edges
        self.head = head
        if head < count:
            self.complete = False

    # -- paths ------------------------------------------------------------------
    def step_of(self, code: int) -> TraceStep:
        width = self.n + 1
        label, inst = divmod(code, width)
        if inst == self.n:
            trigger, params = self.local.sync_steps[label]
            return TraceStep(None if self.n > 1 else 0, trigger, params)
        t, p = self.local.labels[label]
        return TraceStep(inst, t.trigger, _params_key(p))

    def path(self, gid: int) -> tuple[list[TraceStep], list[int]]:
        gids = []
        while gid >= 0:
            gids.append(gid)
            gid = self.parent[gid]
        gids.reverse()
        return [self.step_of(self.via[g]) for g in gids[1:]], gids

    def counterexample(self, gid: int, extra: tuple[TraceStep, tuple[Config, ...]] | None,
                       meta: Mapping[str, Any]) -> Counterexample:
        steps, gids = self.path(gid)
        configs = [self.configs_of(g) for g in gids]
        if extra is not None:
            steps.append(extra[0])
            configs.append(extra[1])
        return Counterexample(self.local.protocol, tuple(steps), tuple(configs), dict(meta))

    # -- every labelled step, for the graph views --------------------------------
    def labelled_steps(self, gid: int) -> Iterator[tuple[TraceStep, int]]:
        """Every step (parallel ones and self-loops included) from ``gid``: (step, target key)."""
        key = self.keys[gid]
        cids = self.cids(key)
        local = self.local
        for i, c in enumerate(cids):
            for label in local.labels_from(c):
                t, p = local.labels[label]
                if t.sync:
                    continue
                dest = local.label_dest[label]
                yield TraceStep(i, t.trigger, _params_key(p)), key + ((dest - c) << self.shifts[i])
        for sid, (nk, _changed) in sorted(self._sync_targets(key, cids).items()):
            trigger, params = local.sync_steps[sid]
            yield TraceStep(None if self.n > 1 else 0, trigger, params), nk

    # -- traps ------------------------------------------------------------------
    def can_settle(self, *, shortcut: bool = True) -> bytearray:
        """1 for every reached state from which an all-terminal state is reachable."""
        local, n, shifts, mask, ids = self.local, self.n, self.shifts, self.mask, self.ids
        size = len(local.configs)
        if shortcut and all(local.settles_alone[c] for c in range(local.expanded)
                            if self.first_gid[c] >= 0):
            # Every instance can settle by its own non-sync steps, which no other instance can
            # disable: from any reached state, settle q0, then q1, ... So no state is a trap.
            return bytearray(b"\x01") * len(self.keys)
        rev: list[list[int]] = [[] for _ in range(size)]
        for c in range(local.expanded):
            for d, _label in local.moves[c]:
                rev[d].append(c)
        drev = [[tuple((p - c) << shifts[i] for p in rev[c]) for c in range(size)] for i in range(n)]
        # sync pre-images: sid -> c -> [p with sync(p) == c, p != c]; and where each sync is enabled
        nsync = len(local.sync_steps)
        srev: list[dict[int, list[int]]] = [{} for _ in range(nsync)]
        enabled = [bytearray(size) for _ in range(nsync)]
        for c in range(local.expanded):
            for sid, dest, _label in local.syncs[c]:
                enabled[sid][c] = 1
                if dest != c:
                    srev[sid].setdefault(dest, []).append(c)
        good = bytearray(len(self.keys))
        queue = array("q", self.all_terminal)
        for g in queue:
            good[g] = 1
        get = ids.get
        qi = 0
        while qi < len(queue):
            g = queue[qi]
            qi += 1
            key = self.keys[g]
            for i in range(n):
                c = (key >> shifts[i]) & mask
                for delta in drev[i][c]:
                    pg = get(key + delta)
                    if pg is not None and not good[pg]:
                        good[pg] = 1
                        queue.append(pg)
            for sid in range(nsync):
                for pk in self._sync_preimages(key, sid, srev[sid], enabled[sid]):
                    pg = get(pk)
                    if pg is not None and not good[pg]:
                        good[pg] = 1
                        queue.append(pg)
        return good

    def _sync_preimages(self, key: int, sid: int, srev: dict[int, list[int]],
                        enabled: bytearray) -> Iterator[int]:
        options: list[list[int]] = []  # per instance: key deltas; 0 = unchanged (if allowed)
        for i, c in enumerate(self.cids(key)):
            opts = [(p - c) << self.shifts[i] for p in srev.get(c, ())]
            if not enabled[c]:
                opts.append(0)
            if not opts:
                return
            options.append(opts)
        for deltas in itertools.product(*options):
            total = sum(deltas)
            if any(deltas):
                yield key + total


# --------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------
@dataclass
class ExploreResult:
    """What one exploration found. ``to_json()`` is the machine-readable report."""

    model: str
    bounds: dict[str, Any]
    states: int
    edges: int
    seconds: float
    states_per_second: float
    violations: list[Finding]
    deadlocks: list[Finding]
    traps: list[Finding]
    unreached_states: list[Finding]
    unfired_transitions: list[Finding]
    _space: _Space = field(repr=False, compare=False)
    # Properties no declared effect can break: exploring cannot fail them, so they are not
    # reported as passing here but as checked by lockstep only.
    lockstep_only: list[dict[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """False when ``max_states`` stopped the search (then no deadlock-free, trap, unreached
        or unfired verdict is given: those need the whole space)."""
        return bool(self.bounds["complete"])

    @property
    def findings(self) -> list[Finding]:
        return [*self.violations, *self.deadlocks, *self.traps, *self.unreached_states,
                *self.unfired_transitions]

    @property
    def ok(self) -> bool:
        """No finding of any kind. A search cut short by ``max_states`` can still be ok;
        check :attr:`complete` for a verdict about the whole space."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "bounds": to_plain(self.bounds), "states": self.states,
            "edges": self.edges, "seconds": self.seconds,
            "states_per_second": self.states_per_second,
            "violations": [f.to_json() for f in self.violations],
            "deadlocks": [f.to_json() for f in self.deadlocks],
            "traps": [f.to_json() for f in self.traps],
            "unreached_states": [f.to_json() for f in self.unreached_states],
            "unfired_transitions": [f.to_json() for f in self.unfired_transitions],
            "lockstep_only": self.lockstep_only,
        }

    def iter_steps(self) -> Iterator[tuple[tuple[Config, ...], TraceStep, tuple[Config, ...]]]:
        """Every labelled step of the reached graph: (before, step, after), in BFS order."""
        space = self._space
        for g in range(space.head):
            before = space.configs_of(g)
            for step, nk in space.labelled_steps(g):
                yield before, step, space.configs_of(space.ids[nk])

    def graph(self) -> nx.DiGraph:
        """The reached global graph. Nodes are state ids in BFS order (0 is initial) and carry
        ``q<i>.state`` and ``q<i>.<variable>``; an edge carries the first step between the two
        states (``instance``, ``trigger``, ``params``) and ``steps``, the text of all of them."""
        space = self._space
        p = space.local.protocol
        import networkx as nx

        g = nx.DiGraph(model=self.model, instances=space.n)
        for gid in range(len(space.keys)):
            configs = space.configs_of(gid)
            attrs: dict[str, Any] = {"initial": gid == 0,
                                     "terminal": all(c.state in p.terminal_states for c in configs)}
            for i, c in enumerate(configs):
                attrs[f"q{i}.state"] = c.state
                attrs.update({f"q{i}.{k}": v for k, v in p.view(c).items()})
            g.add_node(gid, **attrs)
        for gid in range(space.head):
            for step, nk in space.labelled_steps(gid):
                target = space.ids[nk]
                if g.has_edge(gid, target):
                    g.edges[gid, target]["steps"].append(step.text())
                else:
                    g.add_edge(gid, target, instance=step.instance, trigger=step.trigger,
                               params=step.params_dict, steps=[step.text()])
        return g

    def graph_json(self) -> dict[str, Any]:
        """The graph as node-link JSON (deterministic: BFS ids, edges in BFS order)."""
        import networkx as nx

        data = nx.node_link_data(self.graph(), edges="edges")
        plain: dict[str, Any] = to_plain(data)
        return plain

    def write_itf(self, directory: str | Path) -> list[Path]:
        """One ``<kind>-<name>.itf.json`` per finding that has a counterexample."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for f in self.findings:
            if f.counterexample is not None:
                written.append(_itf.write_itf(out / f.file_name, f.counterexample.to_itf()))
        return written


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------
def explore(protocol: Protocol, *, instances: int = 1, max_states: int | None = None,
            progress: Progress | None = None) -> ExploreResult:
    """Explore ``instances`` copies of ``protocol`` exhaustively (or up to ``max_states``).

    ``progress(states, frontier, seconds)`` is called at most about five times
    a second. ``max_states`` stops the search once that many states are known
    (it may overshoot by one state's successors); the result then says
    ``complete = False`` and gives no deadlock, trap, unreached or unfired verdict.
    """
    return _run(protocol, protocol.enabled, instances, max_states, progress, "table")


def explore_via_transitions(protocol: Protocol, instances: int = 1, max_states: int | None = None,
                            *, progress: Progress | None = None) -> ExploreResult:
    """:func:`explore`, with every local step fired through the ``transitions`` oracle
    (see ``_oracle_check``)."""
    from .._oracle_check import explore_via_transitions as via

    return via(protocol, instances, max_states, progress=progress)


def _run(protocol: Protocol, successors: Successors, instances: int, max_states: int | None,
         progress: Progress | None, stepper: str) -> ExploreResult:
    t0 = time.perf_counter()
    if instances < 1:
        raise ValueError(f"explore: instances must be at least 1, got {instances}")
    if max_states is not None and max_states < 1:
        raise ValueError(f"explore: max_states must be at least 1 (or None), got {max_states}")
    with gc_paused():  # millions of live tuples: see _paused
        local = _Local(protocol, successors, max_states)
        space = _Space(local, instances)
        space.search(max_states, progress, t0)
    complete = space.complete and local.complete
    bounds: dict[str, Any] = {"instances": instances, "max_states": max_states,
                              "complete": complete, "local_configs": len(local.configs),
                              "stepper": stepper}
    meta = {"bounds": bounds}
    violations = _violations(space, meta)
    deadlocks = _stuck(space, space.deadlocks, DEADLOCK, meta)
    traps: list[Finding] = []
    unreached: list[Finding] = []
    unfired: list[Finding] = []
    if complete:
        good = space.can_settle()
        dead = set(space.deadlocks)
        traps = _stuck(space, (g for g in range(len(space.keys)) if not good[g] and g not in dead),
                       TRAP, meta) if good.count(0) > len(dead) else []
        unreached, unfired = _coverage(space)
    seconds = time.perf_counter() - t0
    if progress is not None:
        progress(len(space.keys), len(space.keys) - space.head, seconds)
    return ExploreResult(
        model=protocol.name, bounds=bounds, states=len(space.keys), edges=space.edges,
        seconds=round(seconds, 6), states_per_second=round(len(space.keys) / seconds, 1) if seconds else 0.0,
        violations=violations, deadlocks=deadlocks, traps=traps, unreached_states=unreached,
        unfired_transitions=unfired, _space=space,
        lockstep_only=lockstep_only(protocol.unbreakable()))


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


