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

In the quiescence phase the runtime takes its own turns (:meth:`ApprovalAdapter.own_turn`):
a parked call goes on to its next seam, a lookup it waits on is answered by the business
store, and an idle runtime runs its recovery pass over the instance's session.

The adapter's parts live beside it: ``_approval_worker`` (the runtime's thread and its
seams), ``_approval_items`` (one instance: its session, clock, tools and setup rows) and
``_approval_observe`` (what is observed, in the checkpoint and the business store).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

from settled.conformance import Adapter, Refused
from settled.conformance._bundled._scratch import run_folder
from settled.impl.approval._approval import (
    HANDLER_ENTERED,
    ApprovalExpired,
    ApprovalRuntime,
    SessionBusy,
    ToolSpec,
)
from settled.impl.approval._business import BusinessStore, Product
from settled.impl.approval._business_normalize import fingerprint
from settled.impl.approval._checkpoint import CheckpointStore
from settled.impl.approval._checkpoint import trace_lines as checkpoint_trace_lines
from settled.impl.approval._reconciler import LookupAnswer, lookup
from settled.impl.shared._crash import unwatched
from settled.impl.shared._db import connect, write
from settled.impl.shared._errors import CallerError
from settled.impl.shared._pg import missing_database
from settled.model import APPROVAL, Protocol, Value

from ._approval_items import STOCK, T0, TOOL_FOR, TTL, _Clock, _fresh, _Item
from ._approval_observe import LOOKUP_CHECKPOINTS, _Observing
from ._approval_worker import LostAnswer, _check, _Worker

# The adapter's parts live beside it (the runtime's thread, an instance, the observations);
# these names are imported from here by other modules.
__all__ = ["LOOKUP_CHECKPOINTS", "STOCK", "TTL", "ApprovalAdapter", "LostAnswer", "_Item",
           "_check"]


class ApprovalAdapter(_Observing, Adapter):
    """Drives the bundled approval runtime; a mutant swaps ``runtime_class`` or the lookup."""

    runtime_class: ClassVar[type[ApprovalRuntime]] = ApprovalRuntime
    business_class: ClassVar[type[BusinessStore]] = BusinessStore  # the adapter's own store
    lookup_function: ClassVar[Callable[..., LookupAnswer]] = staticmethod(lookup)

    def __init__(self, instances: int = 3, directory: Path | None = None,
                 store: str | None = None) -> None:
        self.protocol: Protocol = APPROVAL
        self.instances = instances
        self._folder = run_folder("settled-approval-", directory)
        self.dir = self._folder.path
        self.checkpoint_path = self.dir / "checkpoint.db"
        # ``store``: a postgresql:// URL; the business store is then a fresh schema in
        # that database (dropped on close) and lookup_failed reads a database that
        # does not exist. The checkpoint stays a file.
        self.business_path: Path | str = (self.dir / "business.db" if store is None
                                          else self._folder.store(store, "business"))
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

    # ------------------------------------------------------------------ trace
    def trace_lines(self) -> Iterable[str]:
        return list(checkpoint_trace_lines(self.checkpoint_path))

    def close(self) -> None:
        if self._folder.released:
            return
        for item in self.items:
            item.worker.stop()
        self._read.close()
        self.world.close()
        self._folder.release()



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
    # The step the recovery pass takes for this call (own_turn runs the pass itself; here the
    # call is named, so that in a system the pass does not take up another call of the session).
    "resume_abandoned": _do("recover"),
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
