"""The space of one instance of the declared machine, explored breadth-first.

A configuration is interned as its key ``(state, *values)`` and numbered densely in BFS
order; per configuration the search keeps its steps (``label_dest``/``label_lid`` from
``label_start[c]``), its BFS parent and the step that first reached it (the shortest paths),
and, sparsely, the invariants and domains it breaks and the step properties its steps break.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping

from settled.model import Config, Params, Protocol, Snapshot, Step, Transition, Value

from .._counterexample import DOMAIN, INVARIANT

Progress = Callable[[int, int, float], None]
Successors = Callable[[Config], Iterable[Step]]
TransitionKey = tuple[str, tuple[str, ...], "str | None", str]
Key = tuple[Value, ...]  # (state, *values)

_PROGRESS_EVERY = 0.2  # seconds between progress calls: at most ~5 per second


def _transition_key(t: Transition) -> TransitionKey:
    return (t.trigger, t.source, t.dest, t.guard_text)


def _params_key(params: Params) -> tuple[tuple[str, Value], ...]:
    return tuple(params.items())


class _Configs:
    """The reached configurations by id, made from their keys when asked for."""

    def __init__(self, keys: list[Key]) -> None:
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, c: int) -> Config:
        key = self._keys[c]
        return Config(key[0], key[1:])

    def __iter__(self) -> Iterator[Config]:
        return (Config(k[0], k[1:]) for k in self._keys)


class _Labels:
    """Every recorded step by label: (transition, params)."""

    def __init__(self, pairs: list[tuple[Transition, Params]], lids: array[int]) -> None:
        self._pairs, self._lids = pairs, lids

    def __len__(self) -> int:
        return len(self._lids)

    def __getitem__(self, label: int) -> tuple[Transition, Params]:
        return self._pairs[self._lids[label]]


class _Local:
    """Every configuration one instance reaches (up to ``limit``), with its steps and what
    they break."""

    def __init__(self, protocol: Protocol, successors: Successors, limit: int | None,
                 progress: Progress | None = None, t0: float = 0.0, *, checks: bool = True
                 ) -> None:
        """``checks=False``: the configurations and steps only, no invariant or step property
        evaluated, and configurations outside a domain expanded like any other: the space
        ``Protocol.enabled`` walks (for the coverage tour)."""
        p = protocol
        self.protocol = p
        init = p.initial_config()
        self.keys: list[Key] = [(init.state, *init.values)]
        self.ids: dict[Key, int] = {self.keys[0]: 0}
        self.parent = array("q", [-1])  # the BFS parent of each configuration
        self.via = array("q", [-1])  # the label of the step that first reached it
        self.label_start = array("q")  # labels of configuration c: label_start[c]:label_start[c+1]
        self.label_dest = array("q")  # the configuration each label leads to
        self.label_lid = array("q")  # each label's (transition, params): pairs[lid]
        self.pairs: list[tuple[Transition, Params]] = []
        self.label_state: list[str] = []  # the state each lid leaves
        self.broken: dict[int, tuple[tuple[str, int], ...]] = {}  # (INVARIANT|DOMAIN, index)
        self.outside: set[int] = set()  # configurations with a value outside its domain
        self.bad_steps: dict[int, list[tuple[int, tuple[int, ...]]]] = {}  # c -> (label, props)
        self.terminal_states = p.terminal_states
        self._domains = [frozenset(v.domain) for v in p.variables]
        self._report = (progress, t0)
        self.complete = True
        if successors == p.enabled and checks:
            head = self._expand_table(limit)
        else:
            head = self._expand(successors, limit, checks)
        self.expanded = head
        self.label_start.append(len(self.label_dest))
        for c in range(head, len(self.keys)) if checks else ():  # left unexpanded by the limit
            self._check(c, p.snapshot(self.configs[c]))
        self.labels = _Labels(self.pairs, self.label_lid)

    @property
    def configs(self) -> _Configs:
        return _Configs(self.keys)

    def _expand_table(self, limit: int | None) -> int:
        """BFS through the functions ``model._compiled`` generates from the declaration's
        expressions (the semantics of ``Protocol.enabled``): one per control state, which
        checks the configuration and interns and records each of its steps itself."""
        gen = self.protocol.compiled_explorer()
        self.pairs, self.label_state = list(gen.labels), list(gen.label_states)
        keys, ids, parent, via, dest = self.keys, self.ids, self.parent, self.via, self.label_dest
        add_key, add_parent, add_via = keys.append, parent.append, via.append

        def new(key: Key, cid: int) -> int:
            d = ids[key] = len(keys)
            add_key(key), add_parent(cid), add_via(len(dest))
            return d

        bad_steps = self.bad_steps

        def bsteps(cid: int, props: tuple[int, ...], run: int = 1) -> None:
            """The last ``run`` labels recorded break ``props``."""
            end = len(dest)
            bad_steps.setdefault(cid, []).extend((k, props) for k in range(end - run, end))

        expand = gen.make(ids.get, new, dest.append, self.label_lid.append, self._broken,
                          bsteps)
        return self._bfs(expand, limit)

    def _bfs(self, expand: Mapping[Value, Callable[[Key, int], None]], limit: int | None) -> int:
        """Expand configurations in id order until none is left or ``limit`` are known (the
        last one's successors may overshoot it); the number expanded."""
        keys, start = self.keys, self.label_start.append
        dest = self.label_dest
        progress, t0 = self._report
        next_report = time.perf_counter() + _PROGRESS_EVERY
        stop = limit if limit is not None else -1
        head = 0
        while head < len(keys):
            if len(keys) >= stop >= 0:
                self.complete = False
                break
            if progress is not None and not head & 1023:
                now = time.perf_counter()
                if now >= next_report:
                    progress(len(keys), len(keys) - head, now - t0)
                    next_report = now + _PROGRESS_EVERY
            start(len(dest))
            key = keys[head]
            expand[key[0]](key, head)
            head += 1
        return head

    def _expand(self, successors: Successors, limit: int | None, checks: bool) -> int:
        """The same search, through any successor function (the oracle's)."""
        p = self.protocol
        ids, keys, dest = self.ids, self.keys, self.label_dest
        snaps: dict[Config, Snapshot] = {}
        lids: dict[tuple[str, int, tuple[tuple[str, Value], ...]], int] = {}

        def snap(c: Config) -> Snapshot:
            s = snaps.get(c)
            if s is None:
                s = snaps[c] = p.snapshot(c)
            return s

        def expand(key: Key, cid: int) -> None:
            c = Config(key[0], key[1:])
            before = snap(c)
            if checks and self._check(cid, before):
                return
            for step in successors(c):
                t, after = step.transition, step.after
                akey = (after.state, *after.values)
                d = ids.get(akey)
                if d is None:
                    d = ids[akey] = len(keys)
                    keys.append(akey)
                    self.parent.append(cid)
                    self.via.append(len(dest))
                lk = (c.state, id(t), _params_key(step.params))
                lid = lids.get(lk)
                if lid is None:
                    lid = lids[lk] = len(self.pairs)
                    self.pairs.append((t, step.params))
                    self.label_state.append(c.state)
                dest.append(d)
                self.label_lid.append(lid)
                props = tuple(k for k, sp in enumerate(p.step_properties if checks else ())
                              if not sp.fn(before, t, step.params, snap(after)))
                if props:
                    self.bad_steps.setdefault(cid, []).append((len(dest) - 1, props))

        return self._bfs(dict.fromkeys(p.state_names, expand), limit)

    def _broken(self, cid: int, invariants: tuple[int, ...], domains: tuple[int, ...]) -> None:
        """Record what configuration ``cid`` breaks. A configuration outside the declared
        domains is reported and not explored: past the bounds the space may be infinite (a
        count that never stops growing). For deadlocks and traps it counts as settled, so it
        is blamed once, as a domain finding."""
        self.broken[cid] = (*((INVARIANT, i) for i in invariants),
                            *((DOMAIN, i) for i in domains))
        if domains:
            self.outside.add(cid)

    def _check(self, cid: int, snap: Snapshot) -> bool:
        """Check configuration ``cid`` by each declaration's own compiled function; True if it
        is outside a domain."""
        p, key = self.protocol, self.keys[cid]
        invariants = tuple(i for i, inv in enumerate(p.invariants) if not inv.fn(key[0], snap.v))
        domains = tuple(i for i, (x, dom) in enumerate(zip(key[1:], self._domains, strict=True))
                        if not _in_domain(x, dom))
        if invariants or domains:
            self._broken(cid, invariants, domains)
        return bool(domains)

    def terminal(self, c: int) -> bool:
        """Settled: in a terminal state, or outside a domain (blamed as a domain finding)."""
        return self.keys[c][0] in self.terminal_states or c in self.outside

    def labels_from(self, c: int) -> range:
        return range(self.label_start[c], self.label_start[c + 1])


def _in_domain(x: Value, domain: frozenset[Value]) -> bool:
    try:
        return x in domain
    except TypeError:  # unhashable: certainly not one of the declared values
        return False
