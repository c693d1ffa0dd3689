"""Linearizability of a concurrent history against a sequential model.

Theory of operation
-------------------
A *history* is what several clients did at once: each :class:`Operation` has
an invocation instant, a response instant (or none: it crashed or timed out)
and what it observed. The history is *linearizable* when some total order of
its operations (1) respects real time: an operation that returned before
another was invoked comes first, (2) is accepted by the sequential model, op
after op, each with the result it really observed. An operation whose
outcome is unknown (Jepsen's ``:info``: a crash, a timeout) may take effect at
any instant after its invocation, with any result, or never.

The search is Wing and Gong's, with Lowe's memoisation as Porcupine does it:
a search state is (the set of operations linearized so far, as a bitset; the
model's state after them). The next operation to linearize is any pending one
invoked before the earliest response among the pending known operations (it
may precede all of them). A (set, state) pair seen before is never expanded
again, which cuts the exponential search to the number of distinct pairs.
Success: every known operation is linearized (unknown ones may be left out).

P-compositionality: linearizability is local, so a history splits into
independent parts (one per model instance, say) checked one at a time. The
:class:`Model` says how (``partition``), and only where the caller has proven
the parts share nothing (see :mod:`._concurrent`).

The model is a small interface: ``init``, ``step`` (every state the operation
can lead to given what it observed; none when it could not have observed
that) and ``describe``. States must be hashable and compare equal exactly when
they are the same state (the model's configurations are frozen dataclasses).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

__all__ = ["FORMAT", "CheckResult", "History", "Model", "Operation", "check", "cut", "load_history",
           "save_history", "shrink", "timeline"]

FORMAT = "settled-history/1"
JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Operation:
    """One client's call. ``ret`` is None when the outcome is unknown (crash, timeout)."""

    id: int
    client: str
    key: str  # the instance it acts on: parts are split by key
    input: JSON  # what was asked, e.g. {"op": "claim", "worker": 1}
    output: JSON | None  # what was observed; None when unknown
    call: int  # instants from one shared clock (a counter), so order is exact
    ret: int | None

    @property
    def unknown(self) -> bool:
        return self.ret is None

    def to_json(self) -> JSON:
        return {"id": self.id, "client": self.client, "key": self.key, "input": self.input,
                "output": self.output, "call": self.call, "ret": self.ret}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Operation:
        ret = data["ret"]
        return Operation(int(data["id"]), str(data["client"]), str(data["key"]),
                         dict(data["input"]), None if data["output"] is None else dict(data["output"]),
                         int(data["call"]), None if ret is None else int(ret))


@dataclass(frozen=True, slots=True)
class History:
    operations: tuple[Operation, ...]
    meta: JSON = field(default_factory=dict)  # what made it: implementation, seed, mode, store


class Model(Protocol):
    """The sequential specification the history is checked against."""

    def init(self, key: str) -> Hashable: ...

    def step(self, state: Hashable, op: Operation) -> Iterable[Hashable]:
        """Every state ``op`` can lead to from ``state`` given what it observed (an unknown
        op: with any result). Empty: the op could not have observed that here."""
        ...

    def describe(self, op: Operation) -> str: ...

    def rules(self, op: Operation) -> tuple[str, ...]:
        """The rule IDs an operation's steps carry (named when a history fails)."""
        ...


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict. ``checked`` 0 means nothing was checked: never a pass."""

    ok: bool
    checked: int  # operations in the history
    parts: int  # independent parts checked
    failed_key: str | None = None  # the part that has no linearization
    failed_ops: tuple[Operation, ...] = ()  # that part's operations
    longest: tuple[int, ...] = ()  # ids of the longest linearizable prefix found in it
    explored: int = 0  # search states expanded (memoised (set, state) pairs)

    @property
    def nothing_checked(self) -> bool:
        return self.checked == 0

    def summary(self) -> str:
        if self.nothing_checked:
            return "nothing checked: the history is empty"
        if self.ok:
            return (f"linearizable: {self.checked} operations in {self.parts} independent "
                    f"part(s), {self.explored} search states")
        return (f"NOT linearizable: part {self.failed_key!r} ({len(self.failed_ops)} operations) "
                f"has no order consistent with real time that the model accepts; longest "
                f"linearizable prefix {len(self.longest)} operations")


def _by_key(ops: Sequence[Operation]) -> dict[str, list[Operation]]:
    parts: dict[str, list[Operation]] = {}
    for op in ops:
        parts.setdefault(op.key, []).append(op)
    return parts


def check(history: History | Sequence[Operation], model: Model, *,
          split: bool = True) -> CheckResult:
    """Is ``history`` linearizable under ``model``? Parts by key when ``split``."""
    ops = tuple(history.operations if isinstance(history, History) else history)
    for op in ops:
        if op.ret is not None and op.ret < op.call:
            raise ValueError(f"operation {op.id} returns ({op.ret}) before its call ({op.call})")
    if not ops:
        return CheckResult(ok=False, checked=0, parts=0)
    parts = _by_key(ops) if split else {"*": list(ops)}
    explored = 0
    for key, part in sorted(parts.items()):
        ok, longest, n = _check_part(part, model, key)
        explored += n
        if not ok:
            return CheckResult(False, len(ops), len(parts), key, tuple(part), longest, explored)
    return CheckResult(True, len(ops), len(parts), explored=explored)


_INFINITY = float("inf")


def _check_part(ops: list[Operation], model: Model, key: str) -> tuple[bool, tuple[int, ...], int]:
    n = len(ops)
    by_call = sorted(range(n), key=lambda i: ops[i].call)
    rets = [_INFINITY if op.ret is None else op.ret for op in ops]
    by_ret = sorted(range(n), key=lambda i: rets[i])
    known = 0
    for i, op in enumerate(ops):
        if not op.unknown:
            known |= 1 << i
    start = model.init(key)
    seen: set[tuple[int, Hashable]] = {(0, start)}
    # Depth first: (linearized bitset, state, order so far as op indices)
    stack: list[tuple[int, Hashable, tuple[int, ...]]] = [(0, start, ())]
    best: tuple[int, ...] = ()
    explored = 0
    while stack:
        done, state, order = stack.pop()
        explored += 1
        if len(order) > len(best):
            best = order
        if done & known == known:
            return True, tuple(ops[i].id for i in order), explored
        # The earliest response among pending operations bounds who may go next.
        horizon = next((rets[i] for i in by_ret if not done >> i & 1), _INFINITY)
        for i in by_call:
            if ops[i].call > horizon:
                break
            if done >> i & 1:
                continue
            for after in model.step(state, ops[i]):
                mark = (done | 1 << i, after)
                if mark not in seen:
                    seen.add(mark)
                    stack.append((*mark, (*order, i)))
    return False, tuple(ops[i].id for i in best), explored


# ---------------------------------------------------------------------------- minimal history
def cut(ops: Sequence[Operation], n: int) -> list[Operation]:
    """The run as it stood just before the (n+1)-th invocation: the first ``n`` operations by
    invocation, those that had not returned by then made unknown.

    Sound: a later call (left out) may have changed what a still-pending call observed, so
    that call keeps only what is certain, its invocation; an operation that returned before
    the cut cannot have seen anything invoked after it."""
    ordered = sorted(ops, key=lambda o: o.call)
    if n >= len(ordered):
        return ordered
    instant = ordered[n].call
    return [o if o.ret is not None and o.ret < instant else replace(o, output=None, ret=None)
            for o in ordered[:n]]


def shrink(ops: Sequence[Operation], fails: Callable[[Sequence[Operation]], bool],
           droppable: Callable[[Operation], bool] = lambda op: False) -> list[Operation]:
    """A smaller history that still fails, and fails for a real reason.

    Two moves, both sound: (1) the shortest failing *prefix* (:func:`cut`: the same
    execution at an instant, every operation invoked later left out), then (2) drop,
    one at a time while it still fails, operations ``droppable`` says can only constrain
    (a refusal: it changed nothing, so leaving it out can only make the rest easier to
    linearize). An operation that changed the state, or whose outcome is unknown, is never
    dropped from inside the prefix: without it, a later one could fail for a reason the
    real run never had."""
    ordered = sorted(ops, key=lambda o: o.call)
    if not fails(ordered):
        raise ValueError("shrink needs a failing history to start from")
    current = ordered
    for k in range(1, len(ordered) + 1):
        prefix = cut(ordered, k)
        if fails(prefix):
            current = prefix
            break
    changed = True
    while changed:
        changed = False
        for op in sorted(current, key=lambda o: -o.call):
            if not droppable(op):
                continue
            trial = [o for o in current if o is not op]
            if trial and fails(trial):
                current, changed = trial, True
    return current


def minimal_failure(ops: Sequence[Operation], model: Model) -> list[Operation]:
    """A smaller sub-history that ``model`` still rejects (see :func:`shrink`)."""
    first = check(ops, model)
    if first.ok or first.nothing_checked:
        raise ValueError("the history is linearizable; there is no failure to shrink")
    droppable = getattr(model, "only_constrains", lambda op: False)
    return shrink(first.failed_ops, lambda trial: not check(trial, model).ok, droppable)


# ---------------------------------------------------------------------------- drawing
def timeline(ops: Sequence[Operation], model: Model, width: int = 64) -> str:
    """The operations as bars on a shared time axis, one line per operation, grouped by client.

    ``|----|`` spans invocation to response; ``|----?`` an unknown outcome (it may
    take effect any time after its invocation, or never)."""
    if not ops:
        return "(no operations)"
    instants = sorted({o.call for o in ops} | {o.ret for o in ops if o.ret is not None})
    column = {t: round(i * (width - 1) / max(1, len(instants) - 1)) for i, t in enumerate(instants)}
    label = max(len(o.client) for o in ops)
    lines = []
    for op in sorted(ops, key=lambda o: (o.client, o.call)):
        a = column[op.call]
        b = width - 1 if op.ret is None else column[op.ret]
        bar = [" "] * width
        for x in range(a, b + 1):
            bar[x] = "-"
        bar[a] = "|"
        bar[b] = "?" if op.ret is None else "|"
        lines.append(f"{op.client:<{label}} {''.join(bar)}  #{op.id} {model.describe(op)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- files
def save_history(path: Path, history: History, *, minimal: Sequence[Operation] = (),
                 rules: Sequence[str] = (), verdict: str = "") -> Path:
    """Write a replayable file: the whole history, its minimal failing part, the rules."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "meta": history.meta, "verdict": verdict, "rules_broken": list(rules),
            "minimal": [o.to_json() for o in minimal],
            "operations": [o.to_json() for o in history.operations]}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_history(path: Path) -> tuple[History, list[Operation], JSON]:
    """(the history, its minimal failing part, the whole file); ValueError on a bad file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read history {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a {FORMAT} file")
    try:
        ops = tuple(Operation.from_json(o) for o in data["operations"])
        minimal = [Operation.from_json(o) for o in data.get("minimal", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{str(path)!r}: malformed operation ({exc})") from exc
    return History(ops, dict(data.get("meta") or {})), minimal, data


def renumber(ops: Sequence[Operation]) -> list[Operation]:
    """Operations with ids 0.. in invocation order (for a history built by hand)."""
    return [replace(o, id=i) for i, o in enumerate(sorted(ops, key=lambda o: o.call))]
