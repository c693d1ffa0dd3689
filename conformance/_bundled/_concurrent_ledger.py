"""Several runtimes on one session at once: the ledger runtime under concurrency.

Theory of operation
-------------------
The ledger's runs fence each other through the session row (L2): a runtime
that takes a session over (``resume``, a new ``run_id``) makes every unpaired
call of the latest assistant message ``recovering``, and from then on the run
it replaced may no longer pair, recover or continue anything. A crash test
shows the old run dead; here it is alive. Four runtimes (threads, each with
its own connections and ``run_id``, as four processes that each believe they
own the session) share one session file and one business store. A runtime
called ``origin`` opens the session and registers the first turn's calls
(depending on the seed it also runs the first call, or runs and pairs it),
then stops; the clients then race: take the session over (``resume``),
``recover_call``, ``run_call``, ``pair_call``, ``continue_turn``, ``begin_turn``
of the next turn (each call id registered once, L1/L3), ``redeliver`` a call
id with its own parameters (L3) and read the session's ledger rows (one SQL
statement, so one instant). Most calls are ``advance``: the step a runtime
driving the turn would take next, chosen from the rows just before (a runtime
that finds the session under another run takes it over, or only looks). A call
names "call k of the latest turn"; the client resolves it to a call id when it
makes the call and the history records that id and the step. After the
clients, an audit reads the rows and the stock.

The model state is the session's owner (the run it runs under), the number of
turns and the ledger machine's configuration of every registered call, each
moved only by the machine's own transitions (:meth:`Protocol.fire`): a
takeover fires ``crash`` on every call that has not continued, ``run`` fires
``run`` (the business change, ``executions`` + 1), and so on. What the model
adds is the fence: pairing, recovering, continuing and beginning a turn are
refused to a run that does not own the session. ``run`` is not fenced: it is
the platform executing under the call's ORIGINAL operation_id, which the
business store de-duplicates (W2), so a stale run's business call is harmless;
a run that finds the call already has a success receipt is that replay and
changes nothing. The business change of a run taken over while its call was in
flight may commit after the takeover, while the call is ``recovering`` (the
receipt lives in the business store, beside the session file); the model then
takes it as the ``run`` the machine allows before the takeover, committed late,
and a recovery that read the receipt before that commit may have sent the call
back to ``registered``: it is then receipted, and paired from its receipt. The
stock the audit reads must be the initial stock minus the model's executions
(``executed_at_most_once``): each call of a turn orders its own quantity.

Every call acts on the one session, so the history is checked as one part.
The ledger runtime keeps its session file in SQLite: ``store`` is accepted for
the campaigns' common signature, and the campaign runs on SQLite files whatever
it says (the history's ``store`` records that).
"""

from __future__ import annotations

import functools
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, Final

from settled.conformance._lockstep._concurrent import DEFAULT_MODE, CampaignResult, Mode, judge, run_clients
from settled.conformance._lockstep._linearize import History, Operation
from settled.impl.approval._business import BusinessStore, Product
from settled.impl.ledger._ledger import LedgerRuntime
from settled.impl.ledger._ledger_values import ToolCall
from settled.impl.shared._errors import Busy, CallerError
from settled.model import LEDGER, Config, IllegalTransition
from settled.model.ledger import LedgerState as L

__all__ = ["LedgerSessionModel", "run_ledger_campaign"]

JSON = dict[str, Any]
SESSION: Final = "s1"
SKU: Final = "P1"
STOCK: Final = 100  # never runs out: no order is rejected for stock
CALLS: Final = 2  # tool calls per assistant message
CLIENTS: Final = 4
TAKE: Final = 0.5  # how often a runtime that finds the session under another run takes it over
ORIGIN: Final = "origin"
# ``advance``: the next step of call k of the latest turn, as a runtime driving it would
# choose from the call's row (read just before): recover it, run it, pair it, continue the
# turn or begin the next one. The history records the step chosen.
OPS: Final = ("advance", "resume", "recover_call", "run_call", "pair_call", "continue_turn",
              "begin_turn", "redeliver", "rows")
_WEIGHTS: Final = (12, 2, 2, 1, 1, 1, 1, 1, 1)
TRIGGERS: Final[dict[str, tuple[str, ...]]] = {
    "resume": ("crash",), "recover_call": ("recover_pair", "resume"), "run_call": ("run",),
    "pair_call": ("pair",), "continue_turn": ("continue",), "begin_turn": ("register",),
    "redeliver": ("reregister",), "rows": (), "stock": ("run",)}
# What the session file stores for each model state (a receipt lives beside the row).
_STORED: Final = {L.REGISTERED: "registered", L.RECEIPTED: "registered",
                  L.RECOVERING: "recovering", L.PAIRED: "paired", L.CONTINUED: "continued"}


def call_id(turn: int, position: int) -> str:
    return f"t{turn}-c{position}"


def _quantity(position: int) -> int:
    """Each call of a turn orders its own quantity: the stock tells which calls ran."""
    return 1 + position


def _args(turn: int, position: int) -> dict[str, Any]:
    return {"customer": f"turn {turn}", "items": [{"sku": SKU, "quantity": _quantity(position)}]}


@functools.cache
def _fire(c: Config, trigger: str, params: tuple[tuple[str, str], ...] = ()) -> Config | None:
    try:
        return LEDGER.fire(c, trigger, dict(params)).after
    except IllegalTransition:
        return None


def _get(c: Config, name: str) -> Any:
    return c.values[LEDGER.variable_names.index(name)]


@functools.cache
def _registered() -> Config:
    after = _fire(LEDGER.initial_config(), "register", (("kind", "write"),))
    assert after is not None
    return after


# (owner, turns, every registered call's config, the calls whose receipt came late: below)
State = tuple[str, int, tuple[Config, ...], frozenset[int]]


@functools.cache
def _late_run(c: Config) -> Config | None:
    """A recovering call's business change committed by a run taken over after it started
    the call: the run the machine allows before the takeover (``resume`` undone by the
    ``crash`` that made the call recovering), committed late. The call stays recovering."""
    registered = _fire(c, "resume")
    ran = _fire(registered, "run") if registered is not None else None
    return _fire(ran, "crash") if ran is not None else None


class LedgerSessionModel:
    """One session's calls under several runs, stepped by the ledger machine's transitions."""

    def __init__(self, progress: int = 0) -> None:
        self.progress = progress  # how far the origin run got: 0 registered, 1 ran, 2 paired
        self._rules = tuple(sorted({r for t in LEDGER.transitions
                                    for trigger in TRIGGERS.values() if t.trigger in trigger
                                    for r in t.rules}))

    def init(self, key: str) -> Hashable:
        first = _registered()
        for trigger in ("run", "pair")[:self.progress]:
            after = _fire(first, trigger)
            assert after is not None
            first = after
        return (ORIGIN, 1, (first, *(_registered() for _ in range(CALLS - 1))), frozenset())

    # -------------------------------------------------------------------- outcomes
    def _outcomes(self, state: State, op: Operation) -> tuple[list[tuple[State, JSON]], bool]:
        """(every (state after, what the call returns) the model allows, whether a refusal
        is allowed instead)."""
        owner, turns, calls, late = state
        name, me = str(op.input["op"]), str(op.input.get("by", ""))
        if name in ("rows", "stock", "resume", "continue_turn", "begin_turn"):
            return self._session_outcomes(state, name, me, op)
        index = _index(str(op.input.get("call", "")), turns)
        if index is None:  # not registered: NotFound
            return [], True
        c = calls[index]
        if name == "redeliver":
            if c.state != L.CONTINUED and _fire(c, "reregister", (("params", "same"),)):
                return [(state, {})], False
            return [], True
        if name == "run_call":
            return _run_call(state, index, owner == me)
        if name == "pair_call":
            paired = _fire(c, "pair") if owner == me else None
            if paired is None:
                return [], True
            return [((owner, turns, _put(calls, index, paired), late),
                     {"result": _get(paired, "result")})], False
        if name == "recover_call":
            return _recover_call(state, index, owner == me)
        raise ValueError(f"no ledger operation named {name!r}")

    @staticmethod
    def _session_outcomes(state: State, name: str, me: str, op: Operation
                          ) -> tuple[list[tuple[State, JSON]], bool]:
        """:meth:`_outcomes` of the operations on the session and the stores as a whole."""
        owner, turns, calls, late = state
        latest = range((turns - 1) * CALLS, turns * CALLS)
        if name == "rows":
            return [(state, {"run": owner, "calls": [_STORED[L(c.state)] for c in calls]})], False
        if name == "stock":
            taken = sum(int(_get(c, "executions")) * _quantity(i % CALLS)
                        for i, c in enumerate(calls))
            return [(state, {"stock": STOCK - taken})], False
        if name == "resume":
            if owner == me:
                return [(state, {"took": False})], False
            moved = tuple(c if c.state == L.CONTINUED else _fire(c, "crash") or c for c in calls)
            return [((me, turns, moved, late), {"took": True})], False
        if name == "continue_turn":
            if owner == me and all(calls[i].state == L.PAIRED for i in latest):
                done = tuple(_fire(c, "continue") or c if i in latest else c
                             for i, c in enumerate(calls))
                return [((owner, turns, done, late), {})], False
            return [], True
        # begin_turn
        if (owner == me and int(op.input["turn"]) == turns
                and all(calls[i].state == L.CONTINUED for i in latest)):
            return [((owner, turns + 1, calls + (_registered(),) * CALLS, late), {})], False
        return [], True

    def step(self, state: Hashable, op: Operation) -> Iterable[Hashable]:
        assert isinstance(state, tuple)
        oks, refusable = self._outcomes(state, op)
        out = op.output
        if out is None:  # unknown: took effect (any way the model allows) or not at all
            return [state, *(after for after, _seen in oks)]
        if out.get("ok"):
            seen = {k: v for k, v in out.items() if k != "ok"}
            return [after for after, expected in oks if expected == seen]
        if out.get("void"):  # busy: nothing was written
            return [state]
        return [state] if refusable and not out.get("unexpected") else []

    def only_constrains(self, op: Operation) -> bool:
        """A refusal or a read changes nothing."""
        return op.output is not None and (not op.output.get("ok")
                                          or op.input["op"] in ("rows", "stock", "redeliver"))

    def describe(self, op: Operation) -> str:
        out = op.output
        shown = ("?" if out is None else
                 ", ".join(f"{k}={v}" for k, v in out.items() if k != "ok") or "ok"
                 if out.get("ok") else f"refused ({out.get('error')})")
        target = op.input.get("call") or op.input.get("turn", "")
        return f"{op.input.get('by', 'audit')} {op.input['op']}({target}) -> {shown}"

    def rules(self, op: Operation) -> tuple[str, ...]:
        triggers = TRIGGERS.get(str(op.input["op"]), ())
        found = {r for t in LEDGER.transitions if t.trigger in triggers for r in t.rules}
        return tuple(sorted(found)) or self._rules


def _index(cid: str, turns: int) -> int | None:
    try:
        turn, position = (int(part[1:]) for part in cid.split("-"))
    except ValueError:
        return None
    if not (0 <= turn < turns and 0 <= position < CALLS):
        return None
    return turn * CALLS + position


def _put(calls: tuple[Config, ...], k: int, c: Config) -> tuple[Config, ...]:
    return (*calls[:k], c, *calls[k + 1:])


# ---------------------------------------------------------------------------- the clients
class _RuntimeSession:
    """One runtime of its own (connections, run_id) on the shared session file."""

    def __init__(self, runtime_class: type[LedgerRuntime], directory: Path, index: int) -> None:
        self.name = f"c{index}"
        self.runtime = runtime_class(directory / "sessions.db", directory / "business.db",
                                     run_id=f"run-{self.name}")

    def _turns(self) -> int:
        row = self.runtime.connection.execute(
            "SELECT COUNT(DISTINCT message_id) FROM ledger WHERE session_id = ?",
            (SESSION,)).fetchone()
        return int(row[0])

    def _next_step(self, call: JSON) -> str:
        """The step a runtime driving the turn takes next: from call k on, the first call of
        the latest turn not yet paired is recovered, run or paired; a turn whose calls are all
        paired continues, a continued one is followed by the next. A runtime that finds the
        session under another run takes it over when the plan says so (``take``)."""
        rt = self.runtime
        if rt.session(SESSION)["run_id"] != rt.run_id:  # another run's session: take it, or look
            return "resume" if call.get("take") else "rows"
        turn, first = self._turns() - 1, int(call["position"])
        entries = [rt.entry(call_id(turn, (first + k) % CALLS)) for k in range(CALLS)]
        entry = next((e for e in entries if e.state in ("registered", "recovering")), None)
        if entry is None:
            return "begin_turn" if entries[0].state == "continued" else "continue_turn"
        call["call"] = entry.call_id
        if entry.state == "recovering":
            return "recover_call"
        return "run_call" if entry.receipt == "none" else "pair_call"

    def perform(self, key: str, call: JSON) -> JSON:
        rt, name = self.runtime, str(call["op"])
        if "position" in call and name != "advance":  # call k of the latest turn: resolved now
            call["call"] = call_id(self._turns() - 1, int(call["position"]))
        if name == "advance":
            name = call["op"] = self._next_step(call)
        if name == "rows":
            return {"ok": True, **rows(rt)}
        if name == "resume":
            return {"ok": True, "took": rt.resume(SESSION)}
        if name == "continue_turn":
            rt.continue_turn(SESSION)
            return {"ok": True}
        if name == "begin_turn":
            turn = call["turn"] = self._turns()
            rt.begin_turn(SESSION, [ToolCall(call_id(turn, k), "create_order", _args(turn, k))
                                    for k in range(CALLS)])
            return {"ok": True}
        cid = str(call["call"])
        if name == "redeliver":
            turn, position = (int(part[1:]) for part in cid.split("-"))
            rt.redeliver(SESSION, cid, "create_order", _args(turn, position))
            return {"ok": True}
        entry = getattr(rt, name)(SESSION, cid)
        if name == "run_call":
            return {"ok": True, "receipt": entry.receipt}
        if name == "pair_call":  # a paired result stands: the entry read after it still shows it
            return {"ok": True, "result": (entry.result or {}).get("status")}
        # recover_call: the entry it returns is read after its transaction, when another run
        # may already have moved the call again; what it did shows in later calls and rows
        return {"ok": True}

    def close(self) -> None:
        self.runtime.close()


def rows(runtime: LedgerRuntime) -> JSON:
    """The session's run and its calls' stored states, read in one statement."""
    found = runtime.connection.execute(
        "SELECT s.run_id, l.state FROM sessions AS s LEFT JOIN ledger AS l USING (session_id) "
        "WHERE s.session_id = ? ORDER BY l.registered_at, l.rowid", (SESSION,)).fetchall()
    run = str(found[0]["run_id"])
    return {"run": run.removeprefix("run-"), "calls": [r["state"] for r in found if r["state"]]}


def _classify(exc: Exception) -> JSON | None:
    if isinstance(exc, Busy):
        return {"ok": False, "void": True, "error": type(exc).__name__}
    if isinstance(exc, CallerError):
        return {"ok": False, "error": type(exc).__name__}
    return None


def _plans(seed: int, clients: int, ops: int) -> list[list[tuple[str, JSON]]]:
    plans = []
    for i in range(clients):
        rng = random.Random(f"{seed}/ledger/{i}")
        plan: list[tuple[str, JSON]] = []
        for _ in range(ops):
            name = rng.choices(OPS, _WEIGHTS)[0]
            call: JSON = {"op": name, "by": f"c{i}"}
            if name in ("advance", "recover_call", "run_call", "pair_call", "redeliver"):
                call["position"] = rng.randrange(CALLS)
            if name == "advance":
                call["take"] = rng.random() < TAKE
            plan.append((SESSION, call))
        plans.append(plan)
    return plans


def _origin(runtime_class: type[LedgerRuntime], directory: Path, progress: int) -> None:
    """The run that opened the session and registered the first turn, then stopped."""
    BusinessStore.create(directory / "business.db", [Product(SKU, "Ledger mug", STOCK)]).close()
    with runtime_class(directory / "sessions.db", directory / "business.db",
                       run_id=f"run-{ORIGIN}") as rt:
        rt.open_session(SESSION, "order two mugs")
        rt.begin_turn(SESSION, [ToolCall(call_id(0, k), "create_order", _args(0, k))
                                for k in range(CALLS)])
        if progress >= 1:
            rt.run_call(SESSION, call_id(0, 0))
        if progress >= 2:
            rt.pair_call(SESSION, call_id(0, 0))


def _audit(directory: Path, ops: list[Operation]) -> list[Operation]:
    """After every client returned: the rows and the stock, read once."""
    last = max((o.ret or o.call for o in ops), default=0)
    with LedgerRuntime(directory / "sessions.db", directory / "business.db",
                       run_id="run-audit") as rt:
        seen = [{"ok": True, **rows(rt)}, {"ok": True, "stock": rt.business.stock(SKU)}]
    return [Operation(len(ops) + k, "audit", SESSION, {"op": op}, out, last + 1 + 2 * k,
                      last + 2 + 2 * k)
            for k, (op, out) in enumerate(zip(("rows", "stock"), seen, strict=True))]


def run_ledger_campaign(seed: int, *, mode: Mode = DEFAULT_MODE, ops_per_client: int = 30,
                        store: str | None = None,
                        adapter_class: Callable[..., object] | None = None,
                        mutant: str | None = None, out: Path | None = None,
                        shrink: bool = True, schedule: int = 0) -> CampaignResult:
    """Four runtimes at once on one session, checked against the ledger machine.

    ``adapter_class``: a ledger adapter whose ``runtime_class`` is run (a mutant's).
    ``store`` is ignored: the ledger runtime has SQLite files only."""
    runtime_class: type[LedgerRuntime] = getattr(adapter_class, "runtime_class", LedgerRuntime)
    progress = seed % 3
    start = time.perf_counter()
    directory = Path(tempfile.mkdtemp(prefix="settled-ledger-race-"))
    try:
        _origin(runtime_class, directory, progress)
        t_run = time.perf_counter()
        ops, errors = run_clients(f"{seed}/{schedule}", mode,
                                  _plans(seed, CLIENTS, ops_per_client),
                                  lambda i: _RuntimeSession(runtime_class, directory, i),
                                  _classify)
        run_seconds = time.perf_counter() - t_run
        ops = [*ops, *_audit(directory, ops)]
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    meta = {"implementation": "ledger", "seed": seed, "schedule": schedule, "mode": mode,
            "clients": CLIENTS, "ops_per_client": ops_per_client, "progress": progress,
            "calls": CALLS, "stock": STOCK, "store": "sqlite", "mutant": mutant}
    return judge(History(tuple(ops), meta), LedgerSessionModel(progress), split=False,
                 shrink=shrink, out=out, start=start, run_seconds=run_seconds, errors=errors,
                 independence="not split: every call acts on the one session")


def _run_call(state: State, index: int, fenced_in: bool) -> tuple[list[tuple[State, JSON]], bool]:
    """``run_call``'s outcomes: the run, a run landing late, or a replay of a success."""
    owner, turns, calls, late = state
    c = calls[index]
    out: list[tuple[State, JSON]] = []
    ran = _fire(c, "run") if c.state == L.REGISTERED else None
    if ran is not None:
        out.append(((owner, turns, _put(calls, index, ran), late), {"receipt": "success"}))
    # A run taken over while its business call was in flight (it is not the owner:
    # a client's calls are one at a time, so it cannot have taken the session back).
    landed = _late_run(c) if c.state == L.RECOVERING and not fenced_in else None
    if landed is not None:
        out.append(((owner, turns, _put(calls, index, landed), late | {index}),
                    {"receipt": "success"}))
    if _get(c, "receipt") == "success":  # a replay under the same operation_id (W2)
        out.append((state, {"receipt": "success"}))
    return out, not (fenced_in and ran is not None)


def _recover_call(state: State, index: int, fenced_in: bool
                  ) -> tuple[list[tuple[State, JSON]], bool]:
    """``recover_call``'s outcomes: paired from its receipt, or sent back to run."""
    owner, turns, calls, late = state
    c = calls[index]
    if not fenced_in or c.state != L.RECOVERING or index not in range((turns - 1) * CALLS,
                                                                        turns * CALLS):
        return [], True
    settled: list[tuple[State, JSON]] = [
        ((owner, turns, _put(calls, index, after), late - {index}), {})
        for after in (_fire(c, "recover_pair"), _fire(c, "resume")) if after is not None]
    if index in late and _get(c, "receipt") == "success":
        # The recovery read the receipt (in the business store) before that late
        # commit and sent the call back to registered: with its receipt, receipted;
        # its result will be paired from the receipt, and nothing runs again.
        settled.append(((owner, turns, _put(calls, index, Config(L.RECEIPTED, c.values)),
                         late - {index}), {}))
    return settled, not settled
