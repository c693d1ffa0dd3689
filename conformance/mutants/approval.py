# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Approval mutants: the runtime, the business store or the lookup, each wrong in one rule.

Every mutant is a small subclass (or, for the reconciler, a variant of its one
function) written the way an engineer might plausibly get it wrong, and an
adapter that drives it. None of them is reachable from ``impl/``.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from settled.conformance._bundled._approval_adapter import ApprovalAdapter
from settled.impl.approval._approval import (
    _APPROVED,
    _EXECUTING,
    _MAY_HAVE_STARTED,
    _NEVER_SHOWN,
    _NOT_STARTED,
    _PENDING,
    _RECOVERING,
    _RESUMABLE,
    ApprovalRuntime,
    Call,
    IllegalCallState,
    S,
    _text_id,
)
from settled.impl.approval._approval import CallState as State
from settled.impl.approval._business import (
    _APPLIERS,
    JSON,
    TOOLS,
    BusinessStore,
    _record,
    check_token,
    fingerprint,
    normalize,
)
from settled.impl.approval._checkpoint import SessionBusy
from settled.impl.approval._reconciler import (
    LookupAnswer,
    LookupStatus,
    _parse_result,
    _read_record,
    lookup,
)
from settled.impl.shared._db import DEFAULT_BUSY_TIMEOUT, write
from settled.impl.shared._errors import CallerError, InvalidInput, LookupFailed

from . import Mutant
from ._shipped import fork_of

__all__ = ["MUTANTS"]


def runtime_opening(store: type[BusinessStore]) -> type[ApprovalRuntime]:
    """The real runtime, opening the mutated business store ``store``."""
    return cast(type[ApprovalRuntime], type(f"{store.__name__}Runtime", (ApprovalRuntime,),
                                            {"business_class": store}))


# -- W6: the token record in a transaction of its own ------------------------------------------
class W6RecordInItsOwnTransaction(BusinessStore):
    """Applies the change, commits, then records the token: a crash between loses the record."""

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            now = self._now()
            result = _APPLIERS[tool](conn, normalized, now)
            # bug deleted; shipped: stored = _record(conn, token, (tool, normalized, wanted), result, now)
            # bug deleted; shipped: self._hook("before_commit")
        with write(self._conn) as conn:  # bug: a second transaction for the record
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
            self._hook("before_commit")
        return stored, False


_W6Runtime = runtime_opening(W6RecordInItsOwnTransaction)


# -- W3: a lookup that knows the token only --------------------------------------------------
@fork_of(lookup)
def lookup_by_token_only(source: str | Path | sqlite3.Connection, client_token: str, tool: str,
                         normalized_args: Mapping[str, Any], *,
                         timeout: float = DEFAULT_BUSY_TIMEOUT) -> LookupAnswer:
    """The token is the call's identity, so its record must be the call's (it need not be)."""
    token = check_token(client_token)
    if tool not in TOOLS:
        raise InvalidInput(f"unknown tool {tool!r}; use one of {', '.join(TOOLS)}")
    try:
        wanted = fingerprint(tool, normalized_args)  # noqa: F841 (the bug drops it)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"normalized_args for {tool} are not plain JSON values ({exc}); "
                           "pass what normalize() returned") from exc
    row = _read_record(source, token, timeout)
    if row is None:
        return LookupAnswer(LookupStatus.ABSENT)
    stored_tool, stored_fingerprint, result_text = row  # noqa: RUF059 (the bug drops two)
    # bug deleted; shipped: if stored_tool != tool or stored_fingerprint != wanted:
    # bug deleted; shipped:     return LookupAnswer(LookupStatus.CONFLICT)
    return LookupAnswer(LookupStatus.FOUND, _parse_result(token, result_text))


# -- W5: arguments checkpointed as given ---------------------------------------------------------
class W5ArgumentsNotNormalized(ApprovalRuntime):
    """Validates the arguments but checkpoints them as the agent wrote them."""

    def propose(self, session_id: str, tool: str, args: Mapping[str, Any], *,
                run_id: str | None = None) -> Call:
        session = _text_id("session_id", session_id)
        run = session if run_id is None else _text_id("run_id", run_id)
        spec = self._tools.get(tool) if isinstance(tool, str) else None
        if spec is None:
            raise InvalidInput(f"unknown tool {tool!r}; use one of {', '.join(self._tools)}")
        normalized = normalize(tool, args)  # noqa: F841 (the bug drops it)
        with self._checkpoints.session_lock(session, "propose"):
            call = self._checkpoints.insert(Call(
                call_id=f"call-{uuid.uuid4().hex[:16]}", session_id=session, run_id=run,
                tool=tool, client_token=f"tok-{uuid.uuid4().hex}",
                args=dict(args),  # bug: checked, then the original kept; shipped: args=normalized,
                schema_fingerprint=spec.schema_fingerprint, retry_safe=spec.retry_safe,
                deadline=self._clock() + self._ttl, state=S.PENDING), "propose")
            self._hook("R1")
            call = self._show_unless_expired(call)
            self._hook("R2")
            return call


# -- A3: a failed lookup read as absent ---------------------------------------------------------
class A3FailedLookupIsAbsent(ApprovalRuntime):
    """"Could not read the store" taken for "nothing there": the re-run goes ahead."""

    _lookup: Callable[[str, str, Mapping[str, Any]], LookupAnswer]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ask = self._lookup  # bug

        # bug: a failed lookup answered as absent
        def ask_or_absent(token: str, tool: str, call_args: Mapping[str, Any]) -> LookupAnswer:
            try:
                return ask(token, tool, call_args)
            except LookupFailed:
                return LookupAnswer(LookupStatus.ABSENT)
        self._lookup = ask_or_absent  # bug


# -- A1: recovery under a new token -------------------------------------------------------------
class A1RecoveryWithANewToken(ApprovalRuntime):
    """Recovery counts as a new execution: it looks up, and re-runs under, a fresh token."""

    def _lookup_and_act(self, call: Call) -> Call:
        # bug: a fresh token; shipped: return super()._lookup_and_act(call)
        return super()._lookup_and_act(
            dataclasses.replace(call, client_token=f"tok-{uuid.uuid4().hex}"))

    def _absent(self, call: Call) -> Call:
        if call.cancel_requested or call.rerun_used:  # bug
            return super()._absent(call)
        # bug: the re-run under the token the lookup used, the whole method
        rerun = self._update(call, "lookup_absent", _RECOVERING, S.EXECUTING, rerun_used=True)
        # bug; shipped: return super()._absent(call)
        return self._attempts(dataclasses.replace(rerun, client_token=call.client_token),
                              retries_allowed=False)


# -- A2: the deadline re-armed by a restart -----------------------------------------------------
class A2DeadlineRearmedOnRestart(ApprovalRuntime):
    """On start, gives every pending approval a full time-to-live again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with write(self.checkpoints.connection) as conn:  # bug: every deadline re-armed
            conn.execute("UPDATE calls SET deadline = ? WHERE state = ?",
                         (self._clock() + self._ttl, State.PENDING.value))


# -- A4: a found result rebuilt from the current rows -------------------------------------------
class A4ResultRebuiltFromCurrentStock(ApprovalRuntime):
    """Answers a found call by recomputing it against today's rows (a dry run, rolled back).

    The token is recorded, so "the same call now" looks like a fair answer. It is not the
    first result: stock has moved, a new order would get a new id, a listing is already set.
    """

    def _save(self, call: Call, event: str, allowed: frozenset[State],
              result: Mapping[str, Any]) -> Call:
        if event == "lookup_found":  # bug: recomputed on today's rows (a dry run, rolled back)
            conn = self.business.connection
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = dict(_APPLIERS[call.tool](conn, dict(call.args), self._clock())) or result
            except CallerError:  # the dry run is refused now (an order already cancelled)
                pass
            finally:
                conn.execute("ROLLBACK")
        return super()._save(call, event, allowed, result)


# -- A5: automatic retries for the re-run -------------------------------------------------------
class A5RetryAfterAbsent(ApprovalRuntime):
    """The re-run after ``absent`` goes out with automatic retries on, like any transport call."""

    def _absent(self, call: Call) -> Call:
        if call.cancel_requested:
            return self._update(call, "lookup_absent", _RECOVERING, S.CANCELLED)
        if call.rerun_used:
            return self._update(call, "lookup_absent", _RECOVERING, S.UNKNOWN,
                                error="absent after the one re-run; a person must decide")
        call = self._update(call, "lookup_absent", _RECOVERING, S.EXECUTING, rerun_used=True,
                            retries_allowed=True)  # bug: retries on; shipped: retries_allowed=False)
        return self._attempts(call, retries_allowed=call.retries_allowed)


# -- W8: retention that forgets the in-flight tokens --------------------------------------------
class W8PurgeForgetsInFlight(ApprovalRuntime):
    """Purges every old record by age alone, in-flight calls included.

    "Records older than the approval window are dead": but a call that committed and then
    crashed before its result checkpoint still needs its record to be found, or recovery
    sees ``absent`` and runs it again.
    """

    def purge_idempotency_records(self, older_than_seconds: float) -> int:
        # bug: by age alone; shipped: return self._business.purge_idempotency_records(older_than_seconds, in_flight=self.in_flight_tokens())  # noqa: E501
        return self._business.purge_idempotency_records(older_than_seconds)


# -- W7: an already submitted draft ordered again ----------------------------------------------
class W7DraftOrderedAgain(BusinessStore):
    """A draft already submitted is ordered again when the token is new.

    De-duplication is left to the token ("a new token is a new request", W4), so a user
    who submits the same draft twice, under two tokens, gets two orders.
    """

    def create_order(self, client_token: str, args: Mapping[str, Any]) -> Any:
        draft = args.get("draft_id")  # bug
        # bug: a submitted draft is forgotten
        if draft is not None and self._conn.execute(
                "SELECT 1 FROM orders WHERE draft_id = ?", (draft,)).fetchone() is not None:
            args = {**args, "draft_id": None}
        return super().create_order(client_token, args)


# -- W2: a replayed token applied again ---------------------------------------------------------
class W2ReplayAppliesAgain(BusinessStore):
    """Applies every call, then records its token, replacing an earlier record of it.

    "The record is a log of the last result": a retry of a committed call under the same
    token changes the business data a second time.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            # bug deleted; shipped: first = self._first_result(conn, token, tool, wanted)
            # bug deleted; shipped: if first is not None:
            # bug deleted; shipped:     return first, True
            now = self._now()
            result = _APPLIERS[tool](conn, normalized, now)
            # bug: the record replaced, not read
            conn.execute("DELETE FROM mutation_requests WHERE client_token = ?", (token,))
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
            self._hook("before_commit")
        return stored, False


_W2Runtime = runtime_opening(W2ReplayAppliesAgain)


# -- A7: cancel as a rollback of a started call -------------------------------------------------
class A7CancelSettlesStartedCall(ApprovalRuntime):
    """Cancels a call that may have started as if it had not: ``cancelled``, no verification.

    "Cancel means the user does not want it": a write whose outcome is unknown, or that
    committed, is reported cancelled although the business store may hold its change.
    """

    def cancel(self, call_id: str) -> Call:
        with self._locked(call_id, "cancel") as call:
            if call.state in _NOT_STARTED:
                return self._update(call, "cancel", _NOT_STARTED, S.CANCELLED)
            if call.state in _MAY_HAVE_STARTED:
                # bug: settled as cancelled; shipped: return self._update(call, "cancel", _MAY_HAVE_STARTED, cancel_requested=True)  # noqa: E501
                return self._update(call, "cancel", _MAY_HAVE_STARTED, S.CANCELLED)
            if call.state in (S.RESULT_CHECKPOINTED, S.ANSWERED):
                raise IllegalCallState(call, "cancel", "it committed and cancel is not a "
                                       "rollback; propose a compensating call to undo it")
            raise IllegalCallState(call, "cancel")


# -- R1: a restart drops approvals never shown --------------------------------------------------
class R1RestartExpiresUnshown(ApprovalRuntime):
    """On start, expires every pending approval that was never shown.

    "If the user never saw it, nobody is waiting for it": a crash between the approval
    checkpoint and its display loses the pending call instead of showing it after restart.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with write(self.checkpoints.connection) as conn:  # bug: unshown approvals expired
            conn.execute("UPDATE calls SET state = ? WHERE state = ? AND shown = 0",
                         (State.EXPIRED.value, State.PENDING.value))


# -- R2: an expired approval still reaches the handler ------------------------------------------
class R2ExpiredApprovalApproves(ApprovalRuntime):
    """Approves a shown call whatever the clock says once the runtime restarted.

    The deadline is only enforced by the process that showed the request ("a restarted
    runtime cannot know how long the person looked"): an approval after the deadline is
    accepted and the handler runs.
    """

    def approve(self, call_id: str) -> Call:
        with self._locked(call_id, "approve") as call:
            self._require(call, "approve", _PENDING)
            if not call.shown:
                raise IllegalCallState(call, "approve", _NEVER_SHOWN)
            # bug deleted; shipped: if self._clock() >= call.deadline:
            # bug deleted; shipped:     self._update(call, "approve", _PENDING, S.EXPIRED)
            # bug deleted; shipped:     raise ApprovalExpired(self.get(call_id), "approve")
            return self._update(call, "approve", _PENDING, S.APPROVED)


# -- W1: the record without the tool's name --------------------------------------------------
class W1RecordWithoutToolName(BusinessStore):
    """Records every write under the generic tool name ``write``.

    "The token is the key, the tool column is informational": but a lookup asks for the
    token AND the tool, so a committed call is reported as a conflict, never found.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            # bug: the record is read as it is written; shipped: first = self._first_result(conn, token, tool, wanted)  # noqa: E501
            first = self._first_result(conn, token, "write", wanted)
            if first is not None:
                return first, True
            now = self._now()
            result = _APPLIERS[tool](conn, normalized, now)
            # bug: the generic name; shipped: stored = _record(conn, token, (tool, normalized, wanted), result, now)  # noqa: E501
            stored = _record(conn, token, ("write", normalized, wanted), result, now)
            self._hook("before_commit")
        return stored, False


_W1Runtime = runtime_opening(W1RecordWithoutToolName)


# -- R4: the change commits before the runtime's commit point ----------------------------------
class R4ChangeCommittedEarly(BusinessStore):
    """Commits the change and its record, then reaches the point the runtime calls pre-commit.

    The before-commit hook sits after the ``with`` block ("once everything is written"), so
    a crash in the window the runtime believes is before the commit leaves a committed change.
    """

    def _apply(self, token: str, tool: str, normalized: JSON, wanted: str) -> tuple[JSON, bool]:
        with write(self._conn) as conn:
            first = self._first_result(conn, token, tool, wanted)
            if first is not None:
                return first, True
            now = self._now()
            result = _APPLIERS[tool](conn, normalized, now)
            stored = _record(conn, token, (tool, normalized, wanted), result, now)
            # bug deleted; shipped: self._hook("before_commit")
        self._hook("before_commit")  # bug: already committed
        return stored, False


_R4Runtime = runtime_opening(R4ChangeCommittedEarly)


# -- A6: the handler is never entered twice ------------------------------------------------------
class A6NeverEntersHandlerTwice(ApprovalRuntime):
    """After ``absent`` the call is handed to a person instead of re-run.

    "Never run a handler twice": but the handler entered before the crash committed
    nothing, and the one re-run with the original token is what yields the one commit.
    """

    def _absent(self, call: Call) -> Call:
        if call.cancel_requested:
            return self._update(call, "lookup_absent", _RECOVERING, S.CANCELLED)
        if call.rerun_used:
            return self._update(call, "lookup_absent", _RECOVERING, S.UNKNOWN,
                                error="absent after the one re-run; a person must decide")
        # bug: handed to a person; shipped: call = self._update(call, "lookup_absent", _RECOVERING, S.EXECUTING, rerun_used=True, retries_allowed=False)  # noqa: E501
        return self._update(call, "lookup_absent", _RECOVERING, S.UNKNOWN,
                            error="the handler was entered before; not entering it again")
        # bug deleted; shipped: return self._attempts(call, retries_allowed=call.retries_allowed)


# -- R5: recovery re-runs a possibly committed call without a lookup ----------------------------
class R5RecoveryRerunsWithoutLookup(ApprovalRuntime):
    """After a restart in ``executing`` re-runs the handler with the original token at once.

    "The token makes it idempotent, so just run it again": the handler is entered again
    for a call that committed, and the stored first result comes back through a re-run
    that recovery was meant to spare (and that used up the one re-run).
    """

    def _resume(self, call: Call) -> Call:
        if call.state is S.PENDING:
            return self._show_unless_expired(call)
        if call.state is S.APPROVED:
            return self._execute_approved(call)
        if call.state is S.EXECUTING:
            call = self._update(call, "restart_while_executing", _EXECUTING, S.RECOVERING)
            # bug: re-run at once, no lookup
            if self._compatible(call) and not call.rerun_used and not call.cancel_requested:
                call = self._update(call, "lookup_absent", _RECOVERING, S.EXECUTING,
                                    rerun_used=True)
                return self._attempts(call, retries_allowed=False)
        if call.state is S.RECOVERING:
            return self._lookup_and_act(call)
        if call.state is S.RESULT_CHECKPOINTED:
            return self._answer(call)
        return call


# -- L5: recovery that trusts the current contract ---------------------------------------------
class L5RecoveryIgnoresContractChange(ApprovalRuntime):
    """Recovers a call under the tool's current contract without comparing fingerprints.

    "The tool is the same tool": after an upgrade, recovery looks the token up and even
    re-runs the call with arguments checkpointed for the old contract, instead of stopping
    at unknown for a person to reconcile.
    """

    def _compatible(self, call: Call) -> bool:
        spec = self._tools.get(call.tool)
        # bug: the fingerprint is not compared; shipped: return spec is not None and spec.schema_fingerprint == call.schema_fingerprint  # noqa: E501
        return spec is not None


# -- R6: a restart after the result checkpoint runs the call again -------------------------------
class R6RestartRefreshesResult(ApprovalRuntime):
    """After a restart, re-runs a checkpointed call under a fresh token to refresh its result.

    "The result may be stale after a crash": the business change is made a second time
    before the answer that only had to be sent.
    """

    def _resume(self, call: Call) -> Call:
        if call.state is State.RESULT_CHECKPOINTED:  # bug: run again to refresh the result
            self._business.execute(call.tool, f"refresh-{uuid.uuid4().hex}", call.args)
        return super()._resume(call)


# -- A2: a recovery pass that looks back only as far as its window ------------------------------
RECOVERY_WINDOW = 60.0  # seconds: the look-back of the mutant's recovery pass


class A2RecoveryPassSkipsOldCalls(ApprovalRuntime):
    """A2 broken by the runtime's own scheduler: its recovery pass takes up only the calls
    proposed within its look-back window, and an older call is never taken up again.

    How it gets written: "the reconciler scans recent calls; anything older was dealt with
    long ago", a window that keeps each pass cheap. But a pending approval whose deadline
    passed is older than such a window exactly when it must be expired, and it stays pending
    for ever. Every step the kit asks for is right (expiry itself is untouched), so only the
    quiescence phase, where the runtime's own pass must settle every call, shows it.
    """

    def recovery_pass(self, session_id: str | None = None) -> list[Call]:
        taken: list[Call] = []
        for call in self._checkpoints.calls(_RESUMABLE):
            if session_id is not None and call.session_id != session_id:
                continue
            # bug: the call's age, since its proposal (its deadline less the time-to-live)
            if self._clock() - (call.deadline - self._ttl) > RECOVERY_WINDOW:
                continue
            try:
                taken.append(self.recover(call.call_id))
            except SessionBusy:
                continue  # a live process is inside an operation of this session
        return taken


# -- W4: a new token deduplicated by its arguments ----------------------------------------------
class W4NewTokenDeduplicatedByArguments(BusinessStore):
    """W4 broken: a new token whose arguments match a recorded request gets that request's
    result; the call is neither validated nor applied.

    How it gets written: "idempotency protects the user from doing the same thing twice",
    so an unknown token falls back to the request's fingerprint. But a token is the call's
    identity, not the user's intent: the same stock adjustment asked for again, under a new
    token, is a new call the store must validate and apply.
    """

    @staticmethod
    def _first_result(conn: sqlite3.Connection, token: str, tool: str,
                      wanted: str) -> JSON | None:
        first = BusinessStore._first_result(conn, token, tool, wanted)
        if first is not None:  # bug
            return first
        row = conn.execute(  # bug: the request's arguments stand in for its identity
            "SELECT result FROM mutation_requests WHERE tool = ? AND args_fingerprint = ? "
            "ORDER BY created_at LIMIT 1", (tool, wanted)).fetchone()
        # bug: the first request with these arguments answers; shipped: return first
        return None if row is None else json.loads(row["result"])


# -- R3: a restart proposes an approved call again ----------------------------------------------
class R3ApprovedCallProposedAgain(ApprovalRuntime):
    """R3 broken: a restart withdraws an approved call that never reached its handler and
    proposes it again, a new call under a new token.

    How it gets written: "an approval answers the process that asked for it", so a new
    process does not trust approvals it did not see being given: it cancels every call
    approved but not yet executing and asks again. Recovery then consumes a copy, not the
    original call, and the original's approval is thrown away.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        approved = [row[0] for row in self.checkpoints.connection.execute(  # bug
            "SELECT call_id FROM calls WHERE state = ?", (State.APPROVED.value,))]
        for call_id in approved:  # bug: every approved call withdrawn and proposed again
            call = self.get(call_id)
            try:
                with self.checkpoints.session_lock(call.session_id, "recover"):
                    self._update(self.get(call_id), "cancel", _APPROVED, State.CANCELLED)
            except SessionBusy:  # the session is held by a live runtime: leave it to that one
                continue
            self.propose(call.session_id, call.tool, call.args, run_id=call.run_id)


# -- V1: display replay deciding a business fact ------------------------------------------------
class V1DisplayDecidesRecovery(ApprovalRuntime):
    """V1 broken: recovery reads the display log instead of asking the business store.

    How it gets written: "the client saw everything that happened, in order", so a call
    whose success event is missing from the display log never committed, and recovery
    re-runs it without a lookup. A crash after the commit and before the result
    checkpoint leaves no success event, so the handler is entered again for a call the
    business store already holds.
    """

    def _lookup_and_act(self, call: Call) -> Call:
        # bug: no success event displayed, so nothing committed: absent without a lookup
        if self._compatible(call):
            shown = {e.kind for e in self.events_since(call.run_id) if e.call_id == call.call_id}
            if State.ANSWERED.value not in shown:
                return self._absent(call)
        return super()._lookup_and_act(call)


def _adapter(name: str, **attributes: Any) -> type[ApprovalAdapter]:
    return type(name, (ApprovalAdapter,), attributes)


MUTANTS: list[Mutant] = [
    Mutant("W6-token-record-in-its-own-transaction", "W6", "approval",
           "the business change and the token record commit in two transactions",
           _adapter("W6Adapter", runtime_class=_W6Runtime)),
    Mutant("W3-lookup-replays-other-arguments", "W3", "approval",
           "the lookup answers found for a token recorded with other arguments",
           _adapter("W3Adapter", lookup_function=staticmethod(lookup_by_token_only))),
    Mutant("W5-arguments-checkpointed-unnormalized", "W5", "approval",
           "the checkpoint keeps the arguments as written, so the lookup misses the record",
           _adapter("W5Adapter", runtime_class=W5ArgumentsNotNormalized)),
    Mutant("A3-failed-lookup-is-absent", "A3", "approval",
           "a lookup that could not read the store counts as absent and the call re-runs",
           _adapter("A3Adapter", runtime_class=A3FailedLookupIsAbsent)),
    Mutant("A1-recovery-with-a-new-token", "A1", "approval",
           "recovery looks the call up, and re-runs it, under a freshly created token",
           _adapter("A1Adapter", runtime_class=A1RecoveryWithANewToken)),
    Mutant("A2-deadline-extended-on-restart", "A2", "approval",
           "a restart gives pending approvals a full time-to-live again",
           _adapter("A2Adapter", runtime_class=A2DeadlineRearmedOnRestart)),
    Mutant("A4-result-rebuilt-from-current-stock", "A4", "approval",
           "a found call is answered by recomputing it on the current rows",
           _adapter("A4Adapter", runtime_class=A4ResultRebuiltFromCurrentStock)),
    Mutant("A5-automatic-retry-after-absent", "A5", "approval",
           "the re-run after absent goes out with automatic retries on",
           _adapter("A5Adapter", runtime_class=A5RetryAfterAbsent)),
    Mutant("W8-purge-forgets-in-flight-tokens", "W8", "approval",
           "retention deletes records by age alone, the tokens of calls still in flight too",
           _adapter("W8Adapter", runtime_class=W8PurgeForgetsInFlight)),
    Mutant("W7-submitted-draft-ordered-again", "W7", "approval",
           "an already submitted draft under a new token becomes a second order",
           _adapter("W7Adapter", business_class=W7DraftOrderedAgain)),
    Mutant("W2-replayed-token-applied-again", "W2", "approval",
           "a retry under the same token changes the business data again",
           _adapter("W2Adapter", runtime_class=_W2Runtime, business_class=W2ReplayAppliesAgain)),
    Mutant("A7-cancel-settles-a-started-call", "A7", "approval",
           "a cancel of a call that may have committed reports it cancelled",
           _adapter("A7Adapter", runtime_class=A7CancelSettlesStartedCall)),
    Mutant("R1-restart-expires-unshown-approvals", "R1", "approval",
           "a restart expires the pending approvals that were never shown",
           _adapter("R1Adapter", runtime_class=R1RestartExpiresUnshown)),
    Mutant("R2-expired-approval-reaches-handler", "R2", "approval",
           "an approval after the deadline is accepted and the handler runs",
           _adapter("R2Adapter", runtime_class=R2ExpiredApprovalApproves)),
    Mutant("W1-record-without-tool-name", "W1", "approval",
           "the token record names every write 'write', so a lookup by token and tool misses it",
           _adapter("W1Adapter", runtime_class=_W1Runtime)),
    Mutant("R4-change-committed-before-the-commit-point", "R4", "approval",
           "the change commits before the point the runtime treats as pre-commit",
           _adapter("R4Adapter", runtime_class=_R4Runtime)),
    Mutant("A6-handler-never-entered-twice", "A6", "approval",
           "after absent the call goes to a person instead of the one re-run",
           _adapter("A6Adapter", runtime_class=A6NeverEntersHandlerTwice)),
    Mutant("R5-recovery-reruns-without-lookup", "R5", "approval",
           "a restart in executing re-runs the handler at once instead of looking the token up",
           _adapter("R5Adapter", runtime_class=R5RecoveryRerunsWithoutLookup)),
    Mutant("L5-recovery-ignores-the-contract-change", "L5", "approval",
           "recovery looks up and re-runs a call whose tool contract changed",
           _adapter("L5Adapter", runtime_class=L5RecoveryIgnoresContractChange)),
    Mutant("R6-restart-reruns-checkpointed-call", "R6", "approval",
           "a restart after the result checkpoint runs the call again under a fresh token",
           _adapter("R6Adapter", runtime_class=R6RestartRefreshesResult)),
    Mutant("W4-new-token-deduplicated-by-arguments", "W4", "approval",
           "a new token whose arguments match a recorded request gets that request's result",
           _adapter("W4Adapter", business_class=W4NewTokenDeduplicatedByArguments,
                    runtime_class=runtime_opening(W4NewTokenDeduplicatedByArguments))),
    Mutant("R3-approved-call-proposed-again", "R3", "approval",
           "a restart withdraws an approved call and proposes a copy under a new token",
           _adapter("R3Adapter", runtime_class=R3ApprovedCallProposedAgain)),
    Mutant("A2-recovery-pass-skips-calls-older-than-its-window", "A2", "approval",
           "the runtime's recovery pass skips calls proposed before its look-back window, so "
           "a pending approval past its deadline is never expired (only the quiescence phase "
           "shows it)",
           _adapter("A2WindowAdapter", runtime_class=A2RecoveryPassSkipsOldCalls)),
    Mutant("V1-display-log-decides-recovery", "V1", "approval",
           "recovery re-runs a call whose success event the display log lacks, without a lookup",
           _adapter("V1Adapter", runtime_class=V1DisplayDecidesRecovery)),
]
