"""The local space: one instance of the declared machine, explored once through the
successor function.

Per local configuration it keeps the distinct successors, the broken invariants and
domains, and the step properties each of its steps breaks; the global search only adds
integers over it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable

from settled.model import Config, Params, Protocol, Snapshot, Step, Transition, Value, compile_machine

from .._counterexample import DOMAIN, INVARIANT

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
