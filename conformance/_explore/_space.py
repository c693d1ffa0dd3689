"""The global search: N instances as one integer per global state, explored breadth-first.

A local step on instance ``i`` is ``key + (dest - c_i) << B*i``; ids are dense and given in
BFS order, and a parents array gives the shortest paths. Traps are found by backward
reachability from the all-terminal states, the reverse edges never stored.
"""

from __future__ import annotations

import itertools
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from settled.model import Config

from .._counterexample import Counterexample, TraceStep
from ._local import _PROGRESS_EVERY, Progress, _Local, _params_key


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
        per_instance = list(zip(range(n), shifts, self._rows(), strict=True))
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
                count, more, sync_loop = self._sync_successors(key, g, count, per_instance)
                out += more
                loop = loop or sync_loop
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

    def _rows(self) -> list[list[tuple[Any, int, bool, Any] | None]]:
        """Per instance i, per local id c: (moves, distinct targets, self-loop, syncs) where a
        move is (key delta, dest, via code) and a sync is (sync id, key delta, dest); None for
        a local configuration that max_states left unexpanded."""
        local, width = self.local, self.n + 1
        rows: list[list[tuple[Any, int, bool, Any] | None]] = []
        for i, sh in enumerate(self.shifts):
            row: list[tuple[Any, int, bool, Any] | None] = [None] * len(local.configs)
            for c in range(local.expanded):
                moves = tuple(((d - c) << sh, d, lab * width + i) for d, lab in local.moves[c])
                syncs = tuple((sid, (d - c) << sh, d) for sid, d, _lab in local.syncs[c])
                row[c] = (moves, len(moves), bool(local.selfloop[c]), syncs)
            rows.append(row)
        return rows

    def _sync_successors(self, key: int, g: int, count: int, per_instance: list[Any]
                         ) -> tuple[int, int, bool]:
        """The synchronised steps out of global state ``g`` (key ``key``): new states are
        added from id ``count``; returns the new count, the DiGraph edges they add and
        whether one of them is a self-loop."""
        n, width, moveset = self.n, self.n + 1, self.local.moveset
        first_gid, first_inst, ids = self.first_gid, self.first_inst, self.ids
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
        out, loop = 0, False
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
            if ids.setdefault(nk, count) == count:
                count += 1
                self.keys.append(nk)
                self.parent.append(g)
                self.via.append(sid * width + n)
                for i, d in changed:
                    if first_gid[d] < 0:
                        first_gid[d], first_inst[d] = count - 1, i
        return count, out, loop

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
