"""The system explorer's compiled space: interned instance configurations, their moves
compiled once per shared value, the symmetry group (instances, and worker processes when the
system names its ``worker`` parameter), and the synchronised and system steps (see
``_system.py``, whose search runs on it)."""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Callable, Mapping
from typing import Any

from settled.model import (
    Config,
    DeclarationError,
    Step,
    System,
    SystemConfig,
    Value,
    compile_machine,
)

SHIFT = 32  # a code: canonical instance tuple's number | (shared values' number << SHIFT)
MASK = (1 << SHIFT) - 1
SYNC_BITS = 24  # a digit of a sync combination's key: one instance's sync moves' number
SYNC_MASK = (1 << SYNC_BITS) - 1
GROUPED_MAX = 1 << 20  # sync groupings cached at most (the 2-query, 2-worker system: 552,692)


class _Move:
    """One local step of an instance, compiled once per (local configuration, bound values)."""

    __slots__ = ("dest", "params", "pkey", "props", "step", "trigger", "write")

    def __init__(self, step: Step, dest: int, write: tuple[Value, ...] | None,
                 props: tuple[str, ...]) -> None:
        self.step = step
        self.trigger = step.transition.trigger
        self.params = step.params
        self.pkey = tuple(sorted(step.params.items()))
        self.dest = dest
        self.write = write  # the shared machine variables after the step, if it changed them
        self.props = props  # step properties this step breaks


class _Space:
    """Interned local configurations, their compiled moves, and the symmetry group; the
    numbering of canonical instance tuples and shared values that codes are made of, the
    search's visited set (``rows``) and its step tables (``trans``)."""

    def __init__(self, system: System, symmetry: bool) -> None:
        self.system = system
        self.machine = system.machine
        self.ids: dict[Config, int] = {}
        self.configs: list[Config] = []
        self.steps: dict[Config, tuple[tuple[Step, tuple[int, ...]], ...]] = {}
        self.gen = compile_machine(self.machine)
        self.broken: list[tuple[str, ...]] = []  # per local id: broken machine invariants
        self.terminal: list[bool] = []
        self.shared_idx = system.shared_indices
        self.symmetry = symmetry
        self.perms: list[tuple[int, ...]] = [()]
        self.held = -1
        if system.worker is not None:
            _param, var = system.worker
            self.held = self.machine.variable_names.index(var)
            self.width = len(self.machine.initial_config().values[self.held])
            if symmetry:
                self.perms = list(itertools.permutations(range(self.width)))
        self.images: list[list[int]] = [[] for _ in self.perms]
        self._moves: dict[tuple[int, tuple[Value, ...]], tuple[_Move, ...]] = {}
        self._with: dict[tuple[int, tuple[Value, ...]], int] = {}
        self._held_back: dict[tuple[int, str, Any], bool] = {}
        self._shared_info: dict[tuple[Value, ...], Any] = {}
        # A configuration is searched as one int, its code: the number of its canonical
        # instance tuple (``cids``) in the low bits, of its shared values (``shareds``) above.
        self.cids: list[tuple[int, ...]] = []
        self._cid: dict[tuple[int, ...], int] = {}  # canonical instance tuple -> its number
        self._canon: dict[tuple[int, ...], int] = {}  # any instance tuple -> canonical number
        self.shareds: list[tuple[Value, ...]] = []
        self._sid: dict[tuple[Value, ...], int] = {}
        # The visited set: per canonical number, per shared values' number, the number the
        # search gave that configuration (-1: not reached yet). Indexing a list, then an array
        # (8 bytes an entry, not tracked by the cyclic collector), no hashing.
        self.rows: list[array[int]] = []
        self.row_width = 4
        self._blank = array("q", [-1] * self.row_width)
        # Per canonical number, per instance: its own step's outcome -> the successor's
        # canonical number; one table per tuple of the other instances (``_steps_beside``).
        self.trans: list[list[dict[int, int]]] = []
        self._beside: dict[Any, dict[int, int]] = {}
        self._compiled: dict[int, _Compiled] = {}  # (shared number << SHIFT) | instance id
        self._own: dict[int, tuple[tuple[int, Any], ...]] = {}
        self._grouped: dict[int, tuple[_Joint, ...]] = {}
        self._refined: dict[tuple[int, str, Any], int] = {}
        self._outcome: dict[tuple[int, tuple[Value, ...]], int] = {}
        self._outcomes: list[tuple[int, tuple[Value, ...]]] = []
        # Sync move tuples of the same moves have one number (the empty tuple 0); the
        # instances' numbers, SYNC_BITS each, make the key of their combination.
        self._sync_no: dict[tuple[_Move, ...], int] = {(): 0}
        self.sync_moves: list[tuple[_Move, ...]] = [()]
        self.fired: set[int] = set()  # id() of every machine transition some step took
        self.checked_shared: set[int] = set()  # shared values (numbers) domain-checked
        # (actor, trigger, params) -> a mask (``_liveness.system_classifier``): when set, every
        # edge keeps the mask of the steps it stands for, for the liveness check.
        self.classify: Callable[[str, str, Any], int] | None = None

    def intern(self, c: Config) -> int:
        i = self.ids.get(c)
        if i is None:
            i = self.ids[c] = len(self.configs)
            self.configs.append(c)
            invariants = self.machine.invariants
            self.broken.append(tuple(invariants[k].name
                                     for k in self.gen.broken_invariants(c.state, c.values)))
            self.terminal.append(c.state in self.machine.terminal_states)
            for k in range(len(self.perms)):
                self.images[k].append(-1)
        return i

    def image(self, k: int, i: int) -> int:
        j = self.images[k][i]
        if j < 0:
            c = self.configs[i]
            perm = self.perms[k]
            values = list(c.values)
            held = values[self.held]
            values[self.held] = tuple(held[perm.index(w)] for w in range(len(perm)))
            j = self.intern(Config(c.state, tuple(values)))
            self.images[k][i] = j
        return j

    def canon(self, ids: tuple[int, ...], shared: tuple[Value, ...]) -> tuple[Any, ...]:
        """The representative of a concrete configuration, as (instance ids, shared values)."""
        return (self.cids[self.cid_of(ids)], shared)

    def cid_of(self, ids: tuple[int, ...]) -> int:
        """The number of the canonical form of the instance tuple ``ids``."""
        n = self._canon.get(ids)
        if n is None:
            best = self.canon_ids(ids)
            n = self._cid.get(best)
            if n is None:
                n = self._cid[best] = len(self.cids)
                if n > MASK:  # pragma: no cover - 4 billion instance tuples
                    raise MemoryError(f"{self.system.name}: over {MASK} instance tuples")
                self.cids.append(best)
                self.rows.append(self._blank[:])
                self.trans.append([self._steps_beside(best, i) for i in range(len(best))])
            self._canon[ids] = n
        return n

    def _steps_beside(self, ids: tuple[int, ...], i: int) -> dict[int, int]:
        """Where instance ``i`` of ``ids`` goes by each outcome: a table shared by every
        canonical tuple with the same other instances, as the canonical form of the result
        depends on them alone (and, without symmetry, on the position ``i``)."""
        rest = ids[:i] + ids[i + 1:]
        key = rest if self.symmetry else (rest, i)
        table = self._beside.get(key)
        if table is None:
            table = self._beside[key] = {}
        return table

    def sid_of(self, shared: tuple[Value, ...]) -> int:
        """The number of the shared values ``shared``."""
        n = self._sid.get(shared)
        if n is None:
            n = self._sid[shared] = len(self.shareds)
            self.shareds.append(shared)
            if n >= self.row_width:  # rare: each row doubles, in place
                grow = self._blank[:]
                self.row_width *= 2
                self._blank = grow * 2
                for row in self.rows:
                    row.extend(grow)
        return n

    def code(self, ids: tuple[int, ...], shared: tuple[Value, ...]) -> int:
        """The search's number for a concrete configuration: its representative's code."""
        return self.cid_of(ids) | (self.sid_of(shared) << SHIFT)

    def key(self, code: int) -> tuple[tuple[int, ...], tuple[Value, ...]]:
        """The representative a code stands for, as (instance ids, shared values)."""
        return (self.cids[code & MASK], self.shareds[code >> SHIFT])

    def outcome(self, dest: int, write: tuple[Value, ...]) -> int:
        """An instance's move to ``dest`` that writes the shared machine variables ``write``
        into every instance, as one negative int (a step table's key hashes as an int)."""
        n = self._outcome.get((dest, write))
        if n is None:
            n = self._outcome[(dest, write)] = -1 - len(self._outcomes)
            self._outcomes.append((dest, write))
        return n

    def step_cid(self, ids: tuple[int, ...], i: int, out: int) -> int:
        """The canonical number after instance ``i`` of ``ids`` moves to ``out``: its new
        id, or (negative, :meth:`outcome`) its new id and the shared machine variables it
        wrote into every instance."""
        if out >= 0:
            return self.cid_of((*ids[:i], out, *ids[i + 1:]))
        dest, write = self._outcomes[-1 - out]
        return self.cid_of(tuple(dest if j == i else self.with_shared(x, write)
                                 for j, x in enumerate(ids)))

    def canon_ids(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        """The representative of ``ids`` under the symmetry group (the shared values are not
        permuted: they name no instance and no worker)."""
        if not self.symmetry:
            return ids
        best = tuple(sorted(ids))  # perms[0] is the identity; instances are interchangeable
        for k in range(1, len(self.perms)):
            images = self.images[k]
            moved = tuple(sorted([j if (j := images[i]) >= 0 else self.image(k, i) for i in ids]))
            if moved < best:
                best = moved
        return best

    def orbit(self, ids: tuple[int, ...]) -> int:
        """How many concrete configurations a representative with instance configurations
        ``ids`` stands for (its shared values are never permuted). Each worker permutation
        gives a multiset of instance configurations; distinct multisets give disjoint sets
        of sequences, each of n! / (product of multiplicities!) arrangements."""
        if len(self.perms) == 1:
            return _arrangements(tuple(sorted(ids)))
        forms = set()
        for k, images in enumerate(self.images):
            forms.add(tuple(sorted([j if (j := images[i]) >= 0 else self.image(k, i)
                                    for i in ids])))
        return sum(map(_arrangements, forms))

    def local(self, c: Config) -> tuple[tuple[Step, tuple[int, ...]], ...]:
        """The machine's steps from ``c`` with the step properties each breaks, from the
        successor function generated for the machine (the one ``Protocol.enabled`` and the
        single-machine explorer run)."""
        s = self.steps.get(c)
        if s is None:
            succ = self.gen.successors.get(c.state)
            labels = self.gen.labels
            s = self.steps[c] = () if succ is None else tuple(
                (Step(labels[lid][0], labels[lid][1], Config(dest, values)), bad)
                for lid, dest, values, bad in succ(c.values))
        return s

    def local_steps(self, c: Config) -> tuple[Step, ...]:
        """:meth:`local` without the broken step properties (``System.enabled``'s ``local``)."""
        return tuple(s for s, _broken in self.local(c))

    def config(self, key: tuple[Any, ...]) -> SystemConfig:
        ids, shared = key
        return SystemConfig(tuple(self.configs[i] for i in ids), shared)

    # -- compiled successor pieces -------------------------------------------------
    def moves(self, c: int, ctx: tuple[Value, ...], bound: Mapping[str, Value]) -> tuple[_Move, ...]:
        key = (c, ctx)
        m = self._moves.get(key)
        if m is None:
            cfg = self.configs[c]
            before = tuple(cfg.values[k] for k in self.shared_idx)
            names = [p.name for p in self.machine.step_properties]
            out = []
            for s, broken in self.local(cfg):
                if any(n in s.params and s.params[n] != x for n, x in bound.items()):
                    continue
                after = tuple(s.after.values[k] for k in self.shared_idx)
                props = tuple(names[k] for k in broken)
                out.append(_Move(s, self.intern(s.after), after if after != before else None, props))
            m = self._moves[key] = tuple(out)
        return m

    def compiled(self, c: int, sid: int) -> _Compiled:
        """Instance configuration ``c``'s steps under the shared values numbered ``sid``, once.

        Its own (non-sync) steps become one entry per distinct outcome, in first-seen order:
        (the instance's outcome, as :meth:`step_cid` takes it; the new shared values'
        number). Beside them: how many labelled steps they
        stand for, and (for the liveness check) each entry's mask. Steps that
        differ only in a parameter no one reads (a fault's kind) cost one successor, and
        the discovery order, so the BFS ids and the shortest paths, stay those of the
        uncompiled search. Steps that break a step property are kept apart, one each, and
        sync steps are left to the caller: they depend on the other instances."""
        shared = self.shareds[sid]
        sv, bound, ctx, _own = self.shared_info(shared)
        sys = self.system
        sync = sys.sync
        plain: dict[tuple[int, tuple[Value, ...] | None, tuple[Value, ...]], int] = {}
        masks: dict[tuple[int, tuple[Value, ...] | None, tuple[Value, ...]], int] = {}
        classify = self.classify
        bad: list[tuple[int, _Move]] = []  # (index of its outcome in plain, the move)
        syncs: list[_Move] = []
        lock, cfg = sys.mutex is not None, self.configs[c]
        for mv in self.moves(c, ctx, bound):
            if mv.trigger in sync:
                syncs.append(mv)
                continue
            locked = shared
            if lock:  # the shared lock decides from this instance's own step alone
                got = sys.lock_after(shared, cfg, mv.step.after, mv.trigger)
                if got is None:
                    continue
                locked = got
            new_shared = sys.refined(mv.trigger, mv.params, sv, locked)
            if new_shared is None:
                continue
            # Taken from every reached configuration holding (c, shared): it fires.
            self.fired.add(id(mv.step.transition))
            out = (mv.dest, mv.write, new_shared)
            plain[out] = plain.get(out, 0) + 1
            if classify is not None:
                masks[out] = masks.get(out, 0) | classify(mv.step.transition.actor, mv.trigger,
                                                          mv.params)
            if mv.props:  # a finding: rare, so its slot is looked up, not kept for every move
                bad.append((list(plain).index(out), mv))
        compiled = self._compiled[(sid << SHIFT) | c] = (
            tuple((d if w is None else self.outcome(d, w), self.sid_of(ns)) for d, w, ns in plain),
            tuple(bad), self.sync_no(tuple(syncs)), sum(plain.values()),
            tuple(masks.get(out, 0) for out in plain))
        return compiled

    def sync_no(self, moves: tuple[_Move, ...]) -> int:
        """The number of an instance's sync moves (0: none), a digit of a combination's key."""
        n = self._sync_no.get(moves)
        if n is None:
            n = self._sync_no[moves] = len(self.sync_moves)
            if n >> SYNC_BITS:  # pragma: no cover - 16 million distinct tuples of sync moves
                raise MemoryError(f"{self.system.name}: over {1 << SYNC_BITS} tuples of sync moves")
            self.sync_moves.append(moves)
        return n

    def own(self, sid: int) -> tuple[tuple[int, Any], ...]:
        """The system's own steps under the shared values numbered ``sid`` (only the shared
        values change): each as (the new values' number, (transition, parameters))."""
        got = self._own.get(sid)
        if got is None:
            got = self._own[sid] = tuple(
                (self.sid_of(new_shared), (t, p))
                for t, p, new_shared in self.shared_info(self.shareds[sid])[3])
        return got

    def sync_steps(self, key: int) -> tuple[_Joint, ...]:
        """The sync steps the instances' sync moves make (``key``: their numbers, the first
        instance's in the highest digit), in ``System.enabled``'s order, grouped by
        ``System.sync_groups`` (once per combination): each as (trigger, parameters, the
        first mover's parameter key, the whole parameters' key, (instance, move)s, the
        instances that do not move)."""
        got = self._grouped.get(key)
        if got is None:
            n = self.system.instances
            per = [self.sync_moves[(key >> (SYNC_BITS * (n - 1 - i))) & SYNC_MASK]
                   for i in range(n)]
            move_of = {id(mv.step): mv for moves in per for mv in moves}
            steps = []
            for trigger in self.system.sync:
                choices = [[(i, mv.step) for mv in moves if mv.trigger == trigger]
                           for i, moves in enumerate(per)]
                for params, group in self.system.sync_groups(trigger, choices):
                    moved = tuple((i, move_of[id(st)]) for i, st in group)
                    movers = {i for i, _ in moved}
                    steps.append((trigger, params, moved[0][1].pkey,
                                  tuple(sorted(params.items())), moved,
                                  tuple(j for j in range(len(per)) if j not in movers)))
            if len(self._grouped) >= GROUPED_MAX:  # where combinations rarely repeat (a
                # canonical tuple per state), memory stays bounded: the older half goes
                for old in list(itertools.islice(self._grouped, GROUPED_MAX // 2)):
                    del self._grouped[old]
            got = self._grouped[key] = tuple(steps)
        return got

    def refined_sid(self, sid: int, trigger: str, params: Any, fkey: Any) -> int:
        """The number of the shared values after sync step ``trigger`` with ``params`` (its
        key ``fkey``) from those numbered ``sid`` (``System.refined``); -1 when the
        refinement refuses it."""
        key = (sid, trigger, fkey)
        n = self._refined.get(key)
        if n is None:
            shared = self.shareds[sid]
            new = self.system.refined(trigger, params, self.shared_info(shared)[0], shared)
            n = self._refined[key] = -1 if new is None else self.sid_of(new)
        return n

    def with_shared(self, c: int, values: tuple[Value, ...]) -> int:
        key = (c, values)
        j = self._with.get(key)
        if j is None:
            cfg = self.configs[c]
            vals = list(cfg.values)
            for k, x in zip(self.shared_idx, values, strict=True):
                vals[k] = x
            j = self._with[key] = self.intern(Config(cfg.state, tuple(vals)))
        return j

    def held_back(self, c: int, trigger: str, params: Any, pkey: Any) -> bool:
        key = (c, trigger, None if trigger in self.system.per_instance else pkey)
        h = self._held_back.get(key)
        if h is None:
            h = self._held_back[key] = self.system.held_back_any(self.configs[c], trigger, params)
        return h

    def shared_info(self, shared: tuple[Value, ...]) -> Any:
        """Per value of the system's variables: the view, the bound parameters, and the
        system's own steps."""
        info = self._shared_info.get(shared)
        if info is None:
            sys = self.system
            sv = sys.view_of_shared(shared)
            bound = {b.param: b.fn(sv) for b in sys.bind}
            own = []
            for t in sys.transitions:
                for p in t.param_choices():
                    if all(g.fn(sv, p) for g in t.guards):
                        own.append((t, p, sys.with_shared(shared, t.effect(sv, p))))
            info = self._shared_info[shared] = (sv, bound, tuple(bound.values()), tuple(own))
        return info


def _arrangements(form: tuple[int, ...]) -> int:
    """Distinct orderings of the multiset ``form`` (sorted): n! / (each run's length)!."""
    if len(form) == 2:
        return 1 if form[0] == form[1] else 2
    out, run = math.factorial(len(form)), 1
    for a, b in itertools.pairwise(form):
        if a == b:
            run += 1
        else:
            out //= math.factorial(run)
            run = 1
    return out // math.factorial(run)


# (instance ids, shared values' number, the moving instances' moves): a synchronised
# step's outcome
_Succ = tuple[tuple[int, ...], int, tuple[tuple[int, _Move], ...]]
# (outcomes, the step-property breakers among them, the sync moves' number, labelled
# steps, masks)
_Compiled = tuple[tuple[tuple[int, int], ...], tuple[tuple[int, _Move], ...],
                  int, int, tuple[int, ...]]
# (trigger, parameters, first mover's parameter key, parameters' key, movers, the rest)
_Joint = tuple[str, Any, Any, Any, tuple[tuple[int, _Move], ...], tuple[int, ...]]


def _sync(sp: _Space, ids: tuple[int, ...], sid: int, key: int) -> list[_Succ]:
    """The synchronised steps from the instances' sync moves (``key``, see
    :meth:`_Space.sync_steps`) under the shared values numbered ``sid``; the system's own
    steps follow them (:meth:`_Space.own`)."""
    sys = sp.system
    out: list[_Succ] = []
    held_back = sp.held_back
    for trigger, params, pkey, fkey, moves, rest in sp.sync_steps(key):
        for j in rest:
            if held_back(ids[j], trigger, params, pkey):
                break
        else:
            _joint(sp, sys, ids, sid, trigger, params, fkey, moves, rest, out)
    return out


def _joint(sp: _Space, sys: System, ids: tuple[int, ...], sid: int, trigger: str, params: Any,
           fkey: Any, moves: tuple[tuple[int, _Move], ...], rest: tuple[int, ...],
           out: list[_Succ]) -> None:
    """One synchronised step no other instance holds back, added to ``out`` unless the
    system's refinement refuses it."""
    if sys.mutex is not None:  # as System._apply, first: a sync step may not move the lock
        sys.locked(SystemConfig(tuple(sp.configs[c] for c in ids), sp.shareds[sid]),
                   tuple((i, mv.step) for i, mv in moves), trigger)
    new_sid = sp.refined_sid(sid, trigger, params, fkey)
    if new_sid < 0:
        return
    new = list(ids)
    written = None
    for i, mv in moves:
        new[i] = mv.dest
        if mv.write is not None:
            if written is not None and written != mv.write:
                raise DeclarationError(
                    f"{sys.name}: sync step {trigger!r} writes the shared variables "
                    f"{list(sys.shared)} differently on two instances; make the effects agree")
            written = mv.write
    if written is not None:
        for j in rest:
            new[j] = sp.with_shared(ids[j], written)
    out.append((tuple(new), new_sid, moves))
