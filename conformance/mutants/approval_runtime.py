# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The approval catalogue's runtime mutants: each a subclass of the shipped
:class:`~settled.impl.approval._approval.ApprovalRuntime` that gets one rule of approval,
recovery or lookup wrong. The catalogue, with each mutant's name and rule, is ``approval.py``."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any

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
from settled.impl.approval._business_normalize import normalize
from settled.impl.approval._business_rules import _APPLIERS
from settled.impl.approval._checkpoint import SessionBusy
from settled.impl.approval._reconciler import (
    LookupAnswer,
    LookupStatus,
)
from settled.impl.shared._db import write
from settled.impl.shared._errors import CallerError, InvalidInput, LookupFailed


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

    def _rerun(self, call: Call) -> Call:
        # bug: the re-run under the token the lookup used, the whole method
        rerun = self._update(call, "lookup_absent", _RECOVERING, S.EXECUTING, rerun_used=True)
        # bug; shipped: return super()._rerun(call)
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

    def _rerun(self, call: Call) -> Call:
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


# -- A6: the handler is never entered twice ------------------------------------------------------
class A6NeverEntersHandlerTwice(ApprovalRuntime):
    """After ``absent`` the call is handed to a person instead of re-run.

    "Never run a handler twice": but the handler entered before the crash committed
    nothing, and the one re-run with the original token is what yields the one commit.
    """

    def _rerun(self, call: Call) -> Call:
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
