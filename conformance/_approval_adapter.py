"""The approval adapter: the SQLite approval runtime held to ``model/approval.py``.

Each model instance is one write call in a session of its own, so instances
never wait for each other's session lock (A8). Its tool follows from the
``retry_safe`` the model proposes with and the instance's parity, so a
campaign spreads its calls over all four write tools. Everything runs on
real files: one checkpoint and one business database shared by all instances
(each instance owns its own products and order, so they do not interfere).

The runtime chains its steps (``execute`` checkpoints, enters the handler,
commits, checkpoints the result and answers in one call), while the model
takes them one at a time. So each instance's runtime lives in a thread of
its own (SQLite connections belong to the thread that opened them) and its
calls are *parked* at the runtime's own seams: the crash hook at ``R1``, at
``handler_entered``, ``R5`` (after the commit) and ``R6``, and the injectable
lookup function. A model step resumes the parked call with an instruction:

- go on (``commit``, ``save_result``, ``answer``, ``show``);
- lose the answer here (``retry``, ``outcome_uncertain``): a non-caller error
  raised at the seam, before the business transaction or after its commit;
- crash here: :class:`~settled.impl.shared._crash.CrashNow` unwinds the call with no
  ``except`` catching it, the runtime object is dropped and a new one opens
  the same files; ``crash_before_commit`` crashes at ``R4``, inside the
  business transaction. (Unwinding releases the session lock row, which a
  restarted process would take over anyway: its holder is dead.)
- answer the lookup from the business file, or from a file that is not
  there (``lookup_failed``: the database is unreachable, and the real
  reconciler says so).

The world is arranged where a step names it: ``deadline_passes`` moves the
instance's clock past the deadline promised at the proposal (never the one
the checkpoint now holds), ``business_rejected`` changes the business rows so
the store refuses, ``lookup_conflict`` puts another client's record under the
token for the length of one lookup, and ``contract_changed`` reopens the
runtime with the tool at contract version 2.

A caller cannot act on a call while the runtime is running it: the session
lock refuses (A8). So a cancel of a running call is delivered the only way
it can land, after that runtime died (see the model's A8 note); any other
caller action on a running call gets ``SessionBusy``, a refusal that changes
nothing.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

from settled.conformance import Adapter, Refused
from settled.impl.approval._approval import (
    HANDLER_ENTERED,
    TOOL_SPECS,
    ApprovalExpired,
    ApprovalRuntime,
    SessionBusy,
    ToolSpec,
)
from settled.impl.approval._business import BusinessStore, Product, fingerprint, normalize
from settled.impl.approval._checkpoint import CheckpointStore
from settled.impl.approval._checkpoint import trace_lines as checkpoint_trace_lines
from settled.impl.approval._reconciler import LookupAnswer, lookup
from settled.impl.shared._crash import CrashNow, unwatched
from settled.impl.shared._db import connect, write
from settled.impl.shared._errors import CallerError
from settled.impl.shared._pg import missing_database, release_store, scratch_store
from settled.model import APPROVAL, Protocol
from settled.model._core import Value

__all__ = ["ApprovalAdapter", "LostAnswer"]

T0: Final = 1_000_000.0
TTL: Final = 300.0
STOCK: Final = 100
SETUP_QUANTITY: Final = 2  # the order each instance may be asked to cancel
# (retry_safe, instance parity) -> tool: the model chooses retry_safe, the runtime's tool
# declares it (create_order and adjust_stock are not retry_safe, the other two are). The
# kit's coverage tour drives instance 0, mostly with retry_safe false, so that slot holds the
# tool with the most to get wrong: arguments with a normal form (W5), and a result that a
# recomputation could not reproduce (a new order gets a new id, A4).
TOOL_FOR: Final = {(False, 0): "create_order", (False, 1): "adjust_stock",
                   (True, 0): "cancel_order", (True, 1): "set_listing"}
PARKS: Final = frozenset({"R1", HANDLER_ENTERED, "R5", "R6"})
WAIT: Final = 60.0  # seconds a parked call may take to reach its next seam
# Checkpointed states from which recovery may look the call's token up, and so needs its
# record (W8): written out here, not imported, so a runtime that forgets one is caught.
LOOKUP_CHECKPOINTS: Final = frozenset({"executing", "recovering", "unknown"})


def _fresh() -> float:
    return time.time() + 10 * 365 * 24 * 3600.0


class LostAnswer(ConnectionError):
    """The handler's answer never arrived: not a caller error, so the outcome is uncertain."""


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True, slots=True)
class _Reply:
    kind: str  # parked | done | raised | crashed | ok
    value: Any = None


class _Worker:
    """One instance's runtime, in a thread of its own; runs one runtime call at a time."""

    def __init__(self, open_runtime: Callable[[Callable[[str], None], Any], ApprovalRuntime],
                 answer_lookup: Callable[[str, str, str, Mapping[str, Any]], LookupAnswer]) -> None:
        self._open, self._answer = open_runtime, answer_lookup
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._outbox: queue.Queue[_Reply] = queue.Queue()
        self._armed: set[str] = set()
        self._runtime: ApprovalRuntime | None = None  # touched by the runtime's thread only
        self.parked: str | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True, name="approval-runtime")
        self._thread.start()
        _check(self._wait())

    # -- the adapter's side ------------------------------------------------------------------
    def call(self, method: str, *args: Any, crash_at: str | None = None,
             **kwargs: Any) -> _Reply:
        if self.parked:
            raise RuntimeError(f"the runtime is still inside a call (at {self.parked})")
        return self._send("call", method, args, crash_at, kwargs)

    def resume(self, instruction: str, arg: Any = None) -> _Reply:
        if not self.parked:
            raise RuntimeError(f"the runtime is not inside a call, so it cannot {instruction}")
        return self._send(instruction, arg)

    def crash(self) -> None:
        """Kill the parked call where it is, or restart an idle runtime from the files."""
        _check(self.resume("crash") if self.parked else self._send("restart"))

    def stop(self) -> None:
        if self._thread.is_alive():
            if self.parked:
                self.crash()
            self._send("stop")
        self._thread.join(WAIT)

    def _send(self, *command: Any) -> _Reply:
        self._inbox.put(command)
        return self._wait()

    def _wait(self) -> _Reply:
        try:
            reply = self._outbox.get(timeout=WAIT)
        except queue.Empty:
            raise RuntimeError(f"the runtime did not reach a seam within {WAIT:.0f}s") from None
        self.parked = reply.value if reply.kind == "parked" else None
        return reply

    # -- the runtime's thread ----------------------------------------------------------------
    def _serve(self) -> None:
        self._outbox.put(self._restart())
        while True:
            command, *rest = self._inbox.get()
            if command == "stop":
                self._close()
                self._outbox.put(_Reply("ok"))
                return
            self._outbox.put(self._restart() if command == "restart" else self._run(*rest))

    def _run(self, method: str, args: tuple[Any, ...], crash_at: str | None,
             kwargs: Mapping[str, Any]) -> _Reply:
        if self._runtime is None:
            return _Reply("raised", RuntimeError("the runtime could not be opened"))
        self._armed = {crash_at} if crash_at else set()
        try:
            return _Reply("done", getattr(self._runtime, method)(*args, **kwargs))
        except CrashNow as crash:  # a hard exit: nothing after the point ran
            restarted = self._restart()  # a new process opens the same files
            return restarted if restarted.kind == "raised" else _Reply("crashed", crash.point)
        except Exception as exc:  # the reply carries it to the adapter's thread
            return _Reply("raised", exc)

    def _restart(self) -> _Reply:
        self._close()
        try:
            self._runtime = self._open(self._hook, self._lookup)
        except Exception as exc:
            return _Reply("raised", exc)
        return _Reply("ok")

    def _close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

    def _hook(self, point: str) -> None:
        if point in self._armed:
            self._armed.discard(point)
            raise CrashNow(point)
        if point in PARKS:
            self._park(point)

    def _park(self, point: str) -> Any:
        self._outbox.put(_Reply("parked", point))
        instruction, arg = self._inbox.get()
        if instruction == "crash":
            raise CrashNow(point)
        if instruction == "fail":
            raise LostAnswer(f"the answer was lost at {point}")
        if instruction == "crash_at":
            self._armed.add(arg)
        return arg

    def _lookup(self, token: str, tool: str, args: Mapping[str, Any]) -> LookupAnswer:
        source = self._park("lookup")
        return self._answer(source, token, tool, args)


@dataclass
class _Item:
    n: int
    worker: _Worker = field(init=False)
    clock: _Clock = field(default_factory=_Clock)
    tools: dict[str, ToolSpec] = field(default_factory=lambda: dict(TOOL_SPECS))
    proposed_at: float = T0
    stock_moved: int = 0  # by other writers, on the instance's own product (see _commits)
    order_id: str = ""  # the setup order, made from the instance's draft (W7)
    resubmits: int = 0
    replay_first: Any = None  # the setup adjustment's first result (W2)
    replay_answers: list[Any] = field(default_factory=list)  # what replaying its token returned
    # Its arguments under new tokens (W4): each token, taken before the call, and its answer.
    renewal_tokens: list[str] = field(default_factory=list)
    renewals: dict[str, Any] = field(default_factory=dict)

    @property
    def replay_token(self) -> str:
        return f"setup-stock-{self.n}"

    def replay_args(self) -> Any:
        return {"sku": f"R{self.n}", "delta": 1}  # a product of its own, touched by nothing else
    draft_answers: list[str] = field(default_factory=list)  # order ids a resubmission returned

    @property
    def draft_id(self) -> str:
        return f"draft-{self.n}"

    def draft_args(self) -> Any:
        return {"customer": f"setup-{self.n}", "draft_id": self.draft_id,
                "items": [{"sku": self.listed, "quantity": SETUP_QUANTITY}]}

    @property
    def session(self) -> str:
        return f"session-{self.n}"

    @property
    def run(self) -> str:
        """The run the instance's call is proposed in: it finds the call in the checkpoint."""
        return f"run-{self.n}"

    @property
    def listed(self) -> str:
        return f"L{self.n}"

    @property
    def other(self) -> str:
        return f"M{self.n}"

    @property
    def unlisted(self) -> str:
        return f"U{self.n}"

    @property
    def customer(self) -> str:
        return f"Customer {self.n}"

    def args(self, tool: str) -> Any:
        # create_order's arguments are deliberately not in normal form (W5): an untrimmed
        # name, a SKU split over two lines, items out of order.
        return {"create_order": {"customer": f"  {self.customer} ", "items": [
                    {"sku": self.other, "quantity": 1}, {"sku": self.listed, "quantity": 2},
                    {"sku": self.other, "quantity": 1}]},
                "cancel_order": {"order_id": self.order_id},
                "adjust_stock": {"sku": self.listed, "delta": -3},
                "set_listing": {"sku": self.unlisted, "listed": True}}[tool]


class ApprovalAdapter(Adapter):
    """Drives the bundled approval runtime; a mutant swaps ``runtime_class`` or the lookup."""

    runtime_class: ClassVar[type[ApprovalRuntime]] = ApprovalRuntime
    business_class: ClassVar[type[BusinessStore]] = BusinessStore  # the adapter's own store
    lookup_function: ClassVar[Callable[..., LookupAnswer]] = staticmethod(lookup)

    def __init__(self, instances: int = 3, directory: Path | None = None,
                 store: str | None = None) -> None:
        self.protocol: Protocol = APPROVAL
        self.instances = instances
        # Real files and transactions, on a RAM disk where there is one (as the query adapter).
        shm = Path("/dev/shm")
        self._tmp = None if directory else tempfile.TemporaryDirectory(
            prefix="settled-approval-", dir=str(shm) if shm.is_dir() else None)
        self.dir = Path(directory or self._tmp.name)  # type: ignore[union-attr]
        self.checkpoint_path = self.dir / "checkpoint.db"
        # ``store``: a postgresql:// URL; the business store is then a fresh schema in
        # that database (dropped on close) and lookup_failed reads a database that
        # does not exist. The checkpoint stays a file.
        self._scratch = None if store is None else scratch_store(store, "business")
        self.business_path: Path | str = self._scratch or self.dir / "business.db"
        self.unreachable: Path | str = (  # lookup_failed reads here
            self.dir / "gone" / "business.db" if store is None else missing_database(store))
        # The adapter's own writes (the setup order and adjustment, the draft resubmissions)
        # are stamped far in the future: retention (W8) never finds them old, so a replay of
        # a setup token stays within its record's lifetime whatever the calls' records do.
        self.world = self.business_class.create(self.business_path, now=_fresh, products=[
            Product(f"{kind}{n}", f"{kind}{n}", STOCK, listed=kind != "U")
            for n in range(instances) for kind in "LMUR"])
        CheckpointStore.open(self.checkpoint_path, _Clock()).close()  # the schema, for _read
        self._read = sqlite3.connect(self.checkpoint_path.resolve().as_uri() + "?mode=ro",
                                     uri=True, isolation_level=None)
        self._read.row_factory = sqlite3.Row
        self._first_results: dict[str, list[Any]] = {}  # per call: the business records' results
        self.items = [self._item(n) for n in range(instances)]
        self._closed = False

    def _item(self, n: int) -> _Item:
        item = _Item(n)
        item.order_id = self.world.create_order(f"setup-{n}", item.draft_args())["order_id"]
        item.replay_first = self.world.adjust_stock(item.replay_token, item.replay_args())

        def open_runtime(hook: Callable[[str], None], lookup_fn: Any) -> ApprovalRuntime:
            return self.runtime_class(self.checkpoint_path, self.business_path, clock=item.clock,
                                      hook=hook, approval_ttl=TTL, tools=item.tools,
                                      lookup_fn=lookup_fn)

        item.worker = _Worker(open_runtime, self._answer_lookup)
        return item

    def _answer_lookup(self, source: str, token: str, tool: str,
                       args: Mapping[str, Any]) -> LookupAnswer:
        return type(self).lookup_function(source, token, tool, args)

    # ------------------------------------------------------------------ perform
    def perform(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        item = self.items[instance]
        try:
            _STEPS[trigger](self, item, params)
        except (CallerError, SessionBusy) as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from exc

    def propose(self, item: _Item, params: Mapping[str, Value]) -> None:
        tool = TOOL_FOR[(bool(params["retry_safe"]), item.n % 2)]
        item.proposed_at = item.clock.now
        _check(item.worker.call("propose", item.session, tool, item.args(tool),
                                run_id=item.run))

    def go(self, item: _Item) -> None:
        _check(item.worker.resume("go"))

    def lose_answer(self, item: _Item) -> None:
        _check(item.worker.resume("fail"))

    def go_or_recover(self, item: _Item) -> None:
        """Continue a parked call; a restarted runtime continues through recover()."""
        if item.worker.parked:
            self.go(item)
        else:
            self.recover(item)

    def recover(self, item: _Item) -> None:
        if item.worker.parked:
            self.restart(item)
        _check(item.worker.call("recover", self._call_id(item)))

    def act(self, item: _Item, method: str, *extra: Any) -> None:
        """A caller's action on the instance's call (A8: never inside a running call)."""
        call_id = self._call_id(item)
        if item.worker.parked and method == "cancel" and item.worker.parked != "R6":
            self.restart(item)  # the cancel lands once the running runtime is gone
        if item.worker.parked:  # any other action meets the session lock
            runtime = self.runtime_class(self.checkpoint_path, self.business_path,
                                         clock=item.clock, approval_ttl=TTL, tools=item.tools)
            try:
                getattr(runtime, method)(call_id, *extra)
            finally:
                runtime.close()
            return
        try:
            _check(item.worker.call(method, call_id, *extra))
        except ApprovalExpired:
            if method != "approve":
                raise
            # approve after the deadline: the runtime records the expiry and says so (A2)

    def restart(self, item: _Item) -> None:
        """A crash of the parked call (or of an idle runtime); a new runtime opens the files."""
        item.worker.crash()

    def crash_in_handler(self, item: _Item) -> None:
        """crash_before_commit: die inside the business transaction (R4), restart, recover."""
        if item.worker.parked == HANDLER_ENTERED:
            item.worker.resume("crash_at", "R4")
        self.restart(item)
        self.recover(item)

    def crash_after_commit(self, item: _Item) -> None:
        self.restart(item)
        self.recover(item)

    def crash_before_handler(self, item: _Item) -> None:
        # A refusal (the session is busy, the call is not approved) is the implementation's
        # answer and must reach the kit; a call that never reached R3 shows in observe.
        _check(item.worker.call("execute", self._call_id(item), crash_at="R3"))
        self.restart(item)

    def recover_crash(self, instance: int, trigger: str, params: Mapping[str, Value]) -> None:
        """A crash in the runtime's thread has already restarted its runtime (``_Worker._run``);
        one in this thread (a caller's runtime, a business store client) leaves a parked
        call, another process, alone. Every business store client of this process dies too:
        the adapter's own connection is opened again (an open transaction rolls back). A
        restarted runtime that finds its call executing recovers it."""
        item = self.items[instance]
        self.world.close()
        self.world = self.business_class.open(self.business_path, now=_fresh)
        if item.worker.parked:
            return
        item.worker.crash()  # an idle runtime: its connections close, it opens the files again
        # The dead runtime's session lock row stays behind. Its holder is this (live) process,
        # so it is aged past the lock's lifetime instead: the restarted runtime's own takeover
        # of a dead holder (A8) then runs, as it would for a process that no longer exists.
        checkpoint = connect(self.checkpoint_path)
        try:
            with unwatched(), write(checkpoint):
                checkpoint.execute("UPDATE session_locks SET acquired_at = ? WHERE session_id = ?",
                                   (-1e12, item.session))
        finally:
            checkpoint.close()
        row = self._call_row(item)
        if row is not None and row["state"] == "executing":
            # The restarted runtime recovers an execution it finds unfinished, as the model's
            # crash_before_commit and crash_after_commit say (R4, R5).
            self.recover(item)

    def deadline_passes(self, item: _Item) -> None:
        # The deadline promised at the proposal, not whatever the checkpoint holds now (A2).
        item.clock.now = max(item.clock.now, item.proposed_at + TTL)

    def contract_changed(self, item: _Item) -> None:
        spec = item.tools[self._row(item)["tool"]]
        item.tools[spec.name] = ToolSpec(spec.name, spec.retry_safe, spec.contract_version + 1)
        self.restart(item)

    def business_rejects(self, item: _Item) -> None:
        """Another writer changes the rows the handler needs, then the parked handler goes on."""
        tool = self._row(item)["tool"]
        with unwatched(), write(self.world.connection) as conn:  # another client's write
            if tool == "create_order":
                conn.execute("UPDATE products SET listed = 0 WHERE sku = ?", (item.other,))
            elif tool == "cancel_order":
                conn.execute("UPDATE orders SET status = 'cancelled' WHERE order_id = ?",
                             (item.order_id,))
            elif tool == "adjust_stock":
                stock = conn.execute("SELECT stock FROM products WHERE sku = ?",
                                     (item.listed,)).fetchone()[0]
                conn.execute("UPDATE products SET stock = 0 WHERE sku = ?", (item.listed,))
                item.stock_moved -= int(stock)
            else:
                conn.execute("DELETE FROM products WHERE sku = ?", (item.unlisted,))
        self.go(item)

    def answer_lookup(self, item: _Item, source: Path | str) -> None:
        if item.worker.parked != "lookup":
            self.recover(item)
        if item.worker.parked == "lookup":  # else the runtime went elsewhere: observe says where
            _check(item.worker.resume("lookup", str(source)))

    def lookup_conflict(self, item: _Item) -> None:
        """Another client's record under this token, for the length of one lookup."""
        row = self._row(item)
        other = {"another": "client"}
        conn = self.world.connection
        with unwatched(), write(conn):  # another client's record
            added = conn.execute(
                "INSERT INTO mutation_requests (client_token, tool, normalized_args, "
                "args_fingerprint, result, created_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (client_token) DO NOTHING",
                (row["client_token"], row["tool"], json.dumps(other),
                 fingerprint(row["tool"], other), json.dumps(other), T0)).rowcount
        try:
            self.answer_lookup(item, self.business_path)
        finally:
            if added:
                with unwatched(), write(conn):
                    conn.execute("DELETE FROM mutation_requests WHERE client_token = ? AND "
                                 "args_fingerprint = ?",
                                 (row["client_token"], fingerprint(row["tool"], other)))

    def draft_resubmitted(self, item: _Item) -> None:
        """The instance's setup draft, submitted again under a new token (W7)."""
        item.resubmits += 1
        token = f"draft-{item.n}-again-{item.resubmits}"
        item.draft_answers.append(self.world.create_order(token, item.draft_args())["order_id"])

    def token_replayed(self, item: _Item) -> None:
        """The instance's setup stock adjustment, sent again under its token (W2)."""
        answer = self.world.adjust_stock(item.replay_token, item.replay_args())
        item.replay_answers.append(answer)

    def token_renewed(self, item: _Item) -> None:
        """The setup adjustment's arguments, sent again under a new token: a new call (W4)."""
        token = f"setup-stock-{item.n}-renewed-{len(item.renewal_tokens) + 1}"
        item.renewal_tokens.append(token)  # before the call: a crash inside it still counts
        item.renewals[token] = self.world.adjust_stock(token, item.replay_args())

    def retention_purge(self, item: _Item) -> None:
        """Every idempotency record's lifetime has run out; the runtime keeps what it needs."""
        runtime = self.runtime_class(self.checkpoint_path, self.business_path, clock=item.clock,
                                     approval_ttl=TTL, tools=item.tools)
        try:
            runtime.purge_idempotency_records(0)
        finally:
            runtime.close()

    def recovery_pass(self, item: _Item) -> None:
        """The runtime's own pass over the instance's session (:meth:`ApprovalRuntime.
        recovery_pass`): it takes up the call no runtime is running."""
        _check(item.worker.call("recovery_pass", item.session))

    # ------------------------------------------------------------------ quiescence
    # The quiescence phase's turn of the runtime's own scheduler: every worker step but the
    # proposal (the agent's, which the kit schedules). The business store's commit or refusal
    # and the clock are the world's, scheduled by the kit.
    acting = frozenset(t.trigger for t in APPROVAL.transitions
                       if t.actor == "worker" and t.trigger != "propose")

    def own_turn(self, instance: int) -> None:
        """The runtime does its own work on the instance's call: a call it is inside goes on
        to its next seam (the request shown, the result checkpointed, the answer), a lookup
        it waits on is answered by the business store, and an idle runtime runs its recovery
        pass over the session (which may then wait on a lookup, answered in the same turn).
        A handler waiting on the business store is the store's turn, not the runtime's."""
        item = self.items[instance]
        worker = item.worker
        if worker.parked in ("R1", "R5", "R6"):
            _check(worker.resume("go"))
            return
        if worker.parked is None:
            if self._call_row(item) is None:
                return  # nothing proposed: nothing for the runtime
            _check(worker.call("recovery_pass", item.session))
        if worker.parked == "lookup":
            _check(worker.resume("lookup", str(self.business_path)))

    # ------------------------------------------------------------------ observe
    def recorded_error(self, instance: int) -> str | None:
        row = self._call_row(self.items[instance])
        return None if row is None or "error" not in row.keys() else row["error"]  # noqa: SIM118 (a Row tests values)

    def observe(self, instance: int) -> Mapping[str, Value]:
        item = self.items[instance]
        row = self._call_row(item)
        if row is None:  # nothing durable yet: the model's initial configuration
            c = self.protocol.initial_config()
            view = self.protocol.view(c)
            return {"state": c.state, **{v.name: view[v.name] for v in self.protocol.variables
                                         if not v.ghost and v.name not in self.unobservable},
                    "draft_order": self._draft(item), "replay": self._replay(item),
                    "renewal": self._renewal(item)}
        commits = self._commits(item, row["tool"])
        state = row["state"]
        if state == "executing" and commits:  # the checkpoint cannot see the commit
            state = "committed"
        return {"state": state, "token_id": self._token(row), "shown": bool(row["shown"]),
                "running": item.worker.parked is not None,
                "deadline_passed": self._deadline_passed(item, row),
                "retry_safe": bool(row["retry_safe"]), "rerun": bool(row["rerun_used"]),
                "retries_allowed": bool(row["retries_allowed"]),
                "cancel_requested": bool(row["cancel_requested"]),
                "contract_compatible":
                    item.tools[row["tool"]].schema_fingerprint == row["schema_fingerprint"],
                "result": self._result(row), "commits": commits,
                "draft_order": self._draft(item), "replay": self._replay(item),
                "renewal": self._renewal(item), "token_record": self._token_record(row, commits)}

    def _renewal_answers(self, item: _Item) -> list[Any]:
        """Each renewal's answer: the one it got, else (a crash took it) what the store
        recorded under its token; a renewal the store has no record of never reached it."""
        out = []
        for token in item.renewal_tokens:
            if token in item.renewals:
                out.append(item.renewals[token])
                continue
            row = self.world.connection.execute(
                "SELECT result FROM mutation_requests WHERE client_token = ?", (token,)).fetchone()
            if row is not None:
                out.append(json.loads(row[0]))
        return out

    def _renewed(self, item: _Item) -> int:
        """The renewals that were applied as new calls (their answer is not the first one)."""
        return sum(1 for answer in self._renewal_answers(item) if answer != item.replay_first)

    def _renewal(self, item: _Item) -> str:
        """New call: every renewal was applied, not answered with the first call's result."""
        answers = self._renewal_answers(item)
        new = sum(1 for answer in answers if answer != item.replay_first)
        return "new_call" if new == len(answers) else "deduplicated"

    def _replay(self, item: _Item) -> str:
        """First: every replay answered with the first result, and the stock moved once (and
        once more for each renewal applied as a new call)."""
        moved_once = (self.world.stock(item.replay_args()["sku"])
                      == STOCK + 1 + self._renewed(item))
        same = all(answer == item.replay_first for answer in item.replay_answers)
        return "first" if same and moved_once else "applied_again"



    def _draft(self, item: _Item) -> str:
        """Original: every resubmission answered with the setup order, and it is the only one."""
        orders = self.world.connection.execute("SELECT COUNT(*) FROM orders WHERE draft_id = ?",
                                               (item.draft_id,)).fetchone()[0]
        same = all(answer == item.order_id for answer in item.draft_answers)
        return "original" if same and orders == 1 else "duplicate"

    def _token_record(self, row: sqlite3.Row, commits: int) -> str:
        """Lost: committed, recovery may still look the token up, and its record is gone (W8)."""
        if not commits or row["state"] not in LOOKUP_CHECKPOINTS:
            return "kept"
        found = self.world.connection.execute(
            "SELECT 1 FROM mutation_requests WHERE client_token = ?",
            (row["client_token"],)).fetchone()
        return "kept" if found else "lost"

    def _commits(self, item: _Item, tool: str) -> int:
        """Applications of the call's change, read off the business rows it changes."""
        conn = self.world.connection
        if tool == "create_order":
            return int(conn.execute("SELECT COUNT(*) FROM orders WHERE customer = ?",
                                    (item.customer,)).fetchone()[0])
        if tool == "set_listing":
            listed = conn.execute("SELECT listed FROM products WHERE sku = ?",
                                  (item.unlisted,)).fetchone()
            return 0 if listed is None else int(listed[0])
        stock = int(conn.execute("SELECT stock FROM products WHERE sku = ?",
                                 (item.listed,)).fetchone()[0])
        moved = stock - (STOCK - SETUP_QUANTITY) - item.stock_moved
        each = SETUP_QUANTITY if tool == "cancel_order" else item.args(tool)["delta"]
        return moved // each if moved % each == 0 else moved

    def _recorded(self, row: sqlite3.Row) -> list[sqlite3.Row]:
        """Records of the call's own (normalized) arguments, under any token."""
        args = normalize(row["tool"], json.loads(row["normalized_args"]))
        return list(self.world.connection.execute(
            "SELECT client_token, result FROM mutation_requests WHERE tool = ? AND "
            "args_fingerprint = ?", (row["tool"], fingerprint(row["tool"], args))))

    def _token(self, row: sqlite3.Row) -> str:
        tokens = {r["client_token"] for r in self._recorded(row)}
        return "new" if tokens - {row["client_token"]} else "original"

    def _result(self, row: sqlite3.Row) -> str:
        if row["result"] is None:
            return "none"
        first = [json.loads(r["result"]) for r in self._recorded(row)]
        # A retention purge (W8) may remove the record later; what it held when the result
        # was checkpointed is what the result is compared with, so keep it per call.
        known = self._first_results.setdefault(row["call_id"], [])
        known.extend(x for x in first if x not in known)
        return "first" if json.loads(row["result"]) in known else "rebuilt"

    def _deadline_passed(self, item: _Item, row: sqlite3.Row) -> bool:
        if row["state"] == "pending_approval":
            return bool(item.clock.now >= row["deadline"])
        # The model's deadline stops mattering when the call leaves pending.
        left = self._read.execute(
            "SELECT at FROM call_events WHERE call_id = ? AND from_state = 'pending_approval' "
            "AND state != 'pending_approval' ORDER BY seq LIMIT 1", (row["call_id"],)).fetchone()
        return left is not None and bool(left[0] >= row["deadline"])

    def _row(self, item: _Item) -> sqlite3.Row:
        row = self._call_row(item)
        if row is None:
            raise CallerError(f"{item.run} has no call yet")
        return row

    def _call_id(self, item: _Item) -> str:
        row = self._call_row(item)
        return "call-not-proposed" if row is None else str(row["call_id"])

    def _call_row(self, item: _Item) -> sqlite3.Row | None:
        """The instance's call as checkpointed (found by its run), or None before propose."""
        row: sqlite3.Row | None = self._read.execute("SELECT * FROM calls WHERE run_id = ?",
                                                     (item.run,)).fetchone()
        return row

    # ------------------------------------------------------------------ trace
    def trace_lines(self) -> Iterable[str]:
        return list(checkpoint_trace_lines(self.checkpoint_path))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for item in self.items:
            item.worker.stop()
        self._read.close()
        self.world.close()
        if self._scratch is not None:
            release_store(self._scratch, "business")
        if self._tmp is not None:
            self._tmp.cleanup()


def _check(reply: _Reply) -> _Reply:
    if reply.kind == "raised":
        raise reply.value
    return reply


Step = Callable[[ApprovalAdapter, _Item, Mapping[str, Value]], None]


def _caller(method: str, *extra: Any) -> Step:
    return lambda adapter, item, params: adapter.act(item, method, *extra)


def _do(method: str) -> Step:
    # Looked up on the adapter object, so a subclass's override is the one called.
    return lambda adapter, item, params: getattr(adapter, method)(item)


# Every model trigger, and the runtime call (or world change) that takes it.
_STEPS: Final[dict[str, Step]] = {
    "propose": lambda adapter, item, params: adapter.propose(item, params),
    "show": _do("go_or_recover"),
    "crash_before_shown": _do("restart"),
    "restart_while_pending": _do("restart"),
    "deadline_passes": _do("deadline_passes"),
    "approve": _caller("approve"),
    "expire": _do("recover"),
    "reject": _caller("reject"),
    "cancel": _caller("cancel"),
    "crash_before_handler": _do("crash_before_handler"),
    "execute": _caller("execute"),
    "commit": _do("go"),
    "business_rejected": _do("business_rejects"),
    "save_result": _do("go"),
    "retry": _do("lose_answer"),
    "outcome_uncertain": _do("lose_answer"),
    "resume_abandoned": _do("recovery_pass"),
    "crash_before_commit": _do("crash_in_handler"),
    "crash_after_commit": _do("crash_after_commit"),
    "crash_before_answer": _do("restart"),
    "answer": _do("go_or_recover"),
    "crash_while_recovering": _do("restart"),
    "contract_changed": _do("contract_changed"),
    "contract_incompatible": _do("recover"),
    "lookup_found": lambda adapter, item, p: adapter.answer_lookup(item, adapter.business_path),
    "lookup_absent": lambda adapter, item, p: adapter.answer_lookup(item, adapter.business_path),
    "lookup_conflict": _do("lookup_conflict"),
    "lookup_failed": lambda adapter, item, p: adapter.answer_lookup(item, adapter.unreachable),
    "resume_lookup": _caller("resume_lookup"),
    "reconcile": _caller("reconcile", "checked the business store by hand"),
    "draft_resubmitted": _do("draft_resubmitted"),
    "retention_purge": _do("retention_purge"),
    "token_replayed": _do("token_replayed"),
    "token_renewed": _do("token_renewed"),
}
if set(_STEPS) != set(APPROVAL.triggers()):  # checked when the table is made, not mid-run
    raise RuntimeError("the approval adapter maps triggers "
                       f"{sorted(set(_STEPS) ^ set(APPROVAL.triggers()))} wrongly")
