"""What the approval adapter observes: the checkpoint row and the business store's rows.

A mixin of :class:`~._approval_adapter.ApprovalAdapter`: the call as checkpointed (found
by its run), the business commits read off the rows the call changes (the runtime cannot
see its own commit), and the content the model compares (the draft, replayed and renewed
tokens, the token record, the result against the store's first results).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, Final

from settled.impl.approval._business import BusinessStore
from settled.impl.approval._business_normalize import fingerprint, normalize
from settled.impl.shared._errors import CallerError
from settled.model import Protocol, Value

from ._approval_items import SETUP_QUANTITY, STOCK, _Item

__all__ = ["LOOKUP_CHECKPOINTS"]

# Checkpointed states from which recovery may look the call's token up, and so needs its
# record (W8): written out here, not imported, so a runtime that forgets one is caught.
LOOKUP_CHECKPOINTS: Final = frozenset({"executing", "recovering", "unknown"})


class _Observing:
    """The adapter's observations (see the module); the adapter sets the attributes."""

    protocol: Protocol
    unobservable: frozenset[str]
    items: list[_Item]
    world: BusinessStore
    _read: sqlite3.Connection
    _first_results: dict[str, list[Any]]

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
