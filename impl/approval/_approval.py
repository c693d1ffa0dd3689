"""The approval runtime: approved, idempotent write calls and their crash recovery.

Theory of operation. This is the implementation of ``settled.model.approval``;
every state change below is one of that table's transitions and is logged
under its trigger name (``call_events``), so a run can be replayed through
the model (:func:`._checkpoint.trace_lines` exports it as ``settled.trace/1``).
Two files, never one transaction across them:

- the *checkpoint* (:mod:`._checkpoint`): calls, their events, session locks
  and display events;
- the *business store* (:mod:`._business`): products, orders and
  ``mutation_requests``, which it commits atomically with each change (W6).

A call goes: ``propose`` creates the client token ONCE and checkpoints it
with the normalized arguments, the tool's schema fingerprint and an absolute
deadline *before* the request is shown (A1); ``approve`` compares the clock
with that stored deadline (a restart cannot extend it, A2); ``execute``
checkpoints ``executing`` *before* entering the handler, so ``approved`` in a
checkpoint means "certainly not started" and ``executing`` means "possibly
started". An answer is checkpointed first and shown second.

Recovery (A4, A5) trusts neither side alone: it checks the contract, then
asks the reconciler about the ORIGINAL token. ``found`` restores the stored
first result exactly as stored; ``absent`` re-runs the original call once
with retries off; conflict, a failed lookup, or a second uncertain outcome
leave the call ``unknown``, where nothing writes until a person steps in.

The runtime's own scheduler is :meth:`ApprovalRuntime.recovery_pass`: a deployment
runs it periodically (and after a restart) so that no call is left waiting on a
runtime that died, a deadline that passed, or an answer not yet shown.

Crash points: the injectable ``hook`` is called with ``"R1"`` … ``"R6"`` at
the protocol's crash windows and with ``"handler_entered"`` each time the
business handler starts; a crash test makes it ``os._exit``.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from ..shared._db import DEFAULT_BUSY_TIMEOUT
from ..shared._errors import CallerError, InvalidInput, LookupFailed, NotAllowed
from ..shared._ids import require_id
from ..shared._pg import is_url
from ._business import SCHEMA_VERSION as BUSINESS_SCHEMA_VERSION
from ._business import BusinessStore
from ._business_normalize import canonical_json, normalize
from ._checkpoint import Call, CallState, CheckpointStore, SessionBusy, StateMoved
from ._display import DisplayEvent
from ._reconciler import LookupAnswer, LookupStatus, lookup

__all__ = [
    "AUTO_RETRIES",
    "CRASH_POINTS",
    "HANDLER_ENTERED",
    "TOOL_SPECS",
    "ApprovalExpired",
    "ApprovalRuntime",
    "Call",
    "CallState",
    "IllegalCallState",
    "SessionBusy",
    "StateMoved",
    "ToolSpec",
]

Hook = Callable[[str], None]
Lookup = Callable[[str, str, Mapping[str, Any]], LookupAnswer]

CRASH_POINTS: Final = MappingProxyType({
    "R1": "after the pending checkpoint, before the approval request is shown",
    "R2": "while pending: after the request was shown",
    "R3": "after the approved checkpoint, before the executing checkpoint and the handler",
    "R4": "inside the business transaction, before it commits",
    "R5": "after the business commit, before the result checkpoint",
    "R6": "after the result checkpoint, before the answer is shown",
})
HANDLER_ENTERED: Final = "handler_entered"
AUTO_RETRIES: Final = 1  # the model's auto_retries bound: one resend per run, same token
DEFAULT_APPROVAL_TTL: Final = 300.0
_BUSINESS_POINTS: Final = {"handler_entered": HANDLER_ENTERED, "before_commit": "R4",
                           "after_commit": "R5"}

S = CallState
_PENDING = frozenset({S.PENDING})
_APPROVED = frozenset({S.APPROVED})
_EXECUTING = frozenset({S.EXECUTING})
_RECOVERING = frozenset({S.RECOVERING})
_UNKNOWN = frozenset({S.UNKNOWN})
_NOT_STARTED = frozenset({S.PENDING, S.APPROVED})
_MAY_HAVE_STARTED = frozenset({S.EXECUTING, S.RECOVERING, S.UNKNOWN})
_IN_FLIGHT = frozenset({S.PENDING, S.APPROVED, S.EXECUTING, S.RECOVERING, S.UNKNOWN,
                        S.RESULT_CHECKPOINTED})
# What the runtime's recovery pass takes up: every open call no person must decide (A4).
_RESUMABLE = _IN_FLIGHT - {S.UNKNOWN}

# What to tell a caller who tries an action in a state that does not allow it.
_HINTS: Final = {
    S.PENDING: "approve or reject it first",
    S.APPROVED: "execute it (or recover it after a restart)",
    S.REJECTED: "it was rejected; propose a new call if it is still wanted",
    S.EXPIRED: "its approval expired; propose a new call if it is still wanted",
    S.CANCELLED: "it was cancelled; propose a new call if it is still wanted",
    S.EXECUTING: "it may have started; run recover(call_id) after a restart",
    S.RECOVERING: "run recover(call_id) to finish the lookup",
    S.RESULT_CHECKPOINTED: "it committed; run recover(call_id) to show the answer",
    S.ANSWERED: "it committed and was answered; its first result is call.result",
    S.FAILED: "the business store refused it; see call.error and propose a corrected call",
    S.UNKNOWN: "its outcome is unknown; a person must reconcile() it or resume_lookup() it",
    S.RECONCILED: "a person already settled it by hand",
}
# States a reader is shown; result_checkpointed is internal (the answer is the success event).
_DISPLAYED: Final = frozenset(CallState) - {S.RESULT_CHECKPOINTED}
_NEVER_SHOWN: Final = "it was never shown to a person; recover(call_id) shows it"


class IllegalCallState(NotAllowed):
    """The action is not allowed in the call's current state; nothing changed."""

    def __init__(self, call: Call, action: str, hint: str | None = None) -> None:
        self.call_id, self.state, self.action = call.call_id, call.state, action
        super().__init__(f"cannot {action} call {call.call_id!r} ({call.tool}): it is "
                         f"{call.state.value}; {hint or _HINTS[call.state]}")


class ApprovalExpired(IllegalCallState):
    """The approval came after the checkpointed deadline; the handler was not entered (A2)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A write tool's contract: its version and whether it may be retried automatically.

    ``contract_version`` changes when the argument schema changes incompatibly; a
    call checkpointed under another version is never re-run by recovery (A4).
    """

    name: str
    retry_safe: bool = False
    contract_version: int = 1

    @property
    def schema_fingerprint(self) -> str:
        text = canonical_json({"tool": self.name, "contract": self.contract_version,
                               "business_schema": BUSINESS_SCHEMA_VERSION})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Listing and cancelling are idempotent by nature, so they may be resent on their own;
# creating an order and adjusting stock rely on the token alone and must not (A5).
TOOL_SPECS: Final = MappingProxyType({s.name: s for s in (
    ToolSpec("create_order"), ToolSpec("cancel_order", retry_safe=True),
    ToolSpec("adjust_stock"), ToolSpec("set_listing", retry_safe=True))})


def _no_hook(point: str) -> None:
    """Production never crashes on purpose."""


def _text_id(name: str, value: object) -> str:
    return require_id(name, value, "pass the id of this session or run")


class ApprovalRuntime:
    """Propose, approve, execute, recover and cancel write calls (A1–A8, R1–R6, V1)."""

    business_class: type[BusinessStore] = BusinessStore  # what a subclass opens instead

    def __init__(self, checkpoint_path: str | Path, business_path: str | Path, *,
                 clock: Callable[[], float] = time.time, hook: Hook | None = None,
                 approval_ttl: float = DEFAULT_APPROVAL_TTL,
                 tools: Mapping[str, ToolSpec] = TOOL_SPECS, lookup_fn: Lookup | None = None,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        if isinstance(approval_ttl, bool) or not isinstance(approval_ttl, int | float) \
                or not approval_ttl > 0:
            raise InvalidInput(f"approval_ttl is {approval_ttl!r}; pass a number of seconds > 0")
        self._clock, self._hook, self._ttl, self._tools = clock, hook or _no_hook, approval_ttl, tools
        # A file path, or a postgresql:// URL of the business store (see impl/shared/_pg.py).
        self._business_path: Path | str = (str(business_path) if is_url(business_path)
                                            else Path(business_path))
        self._lookup = lookup_fn or self._lookup_business
        self._checkpoints = CheckpointStore.open(checkpoint_path, clock, busy_timeout=busy_timeout)
        try:
            self._business = self.business_class.open(business_path, hook=self._business_hook,
                                                      busy_timeout=busy_timeout)
        except BaseException:
            self._checkpoints.close()
            raise

    def close(self) -> None:
        self._business.close()
        self._checkpoints.close()

    def __enter__(self) -> ApprovalRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reads -------------------------------------------------------------------------------
    def get(self, call_id: str) -> Call:
        return self._checkpoints.get(call_id)

    def events(self, call_id: str) -> list[str]:
        """The call's logged triggers, in order (names from the approval model)."""
        return [event for event, _, _ in self._checkpoints.events(call_id)]

    def trace(self, call_id: str) -> list[tuple[str, str, str]]:
        """The call's steps: (trigger, from, to); a logged executing may be the model's committed."""
        return self._checkpoints.events(call_id)

    def events_since(self, run_id: str, seq: int = 0) -> list[DisplayEvent]:
        """Display replay (V1): reads the display log only, never calls a tool."""
        return self._checkpoints.events_since(run_id, seq)

    def in_flight_tokens(self) -> set[str]:
        """Tokens recovery may still need; pass them to ``purge_idempotency_records`` (W8)."""
        return {c.client_token for c in self._checkpoints.calls(_IN_FLIGHT)}

    def purge_idempotency_records(self, older_than_seconds: float) -> int:
        """Retention (W8): delete token records older than the age, never an in-flight token's.

        The tokens are read first and the purge is one transaction afterwards; a call
        proposed in between has no record yet (its record commits with its business
        change), so it has nothing to lose. Returns how many records were deleted.
        """
        return self._business.purge_idempotency_records(older_than_seconds,
                                                        in_flight=self.in_flight_tokens())

    # -- the user's steps ----------------------------------------------------------------------
    def propose(self, session_id: str, tool: str, args: Mapping[str, Any], *,
                run_id: str | None = None) -> Call:
        """Checkpoint a new call (token, normalized args, fingerprint, deadline), then show it."""
        session = _text_id("session_id", session_id)
        run = session if run_id is None else _text_id("run_id", run_id)
        spec = self._tools.get(tool) if isinstance(tool, str) else None
        if spec is None:
            raise InvalidInput(f"unknown tool {tool!r}; use one of {', '.join(self._tools)}")
        normalized = normalize(tool, args)  # the business store's own validation (W5)
        with self._checkpoints.session_lock(session, "propose"):
            # A1: the one token of this call, durable before anyone is asked to approve it.
            call = self._checkpoints.insert(Call(
                call_id=f"call-{uuid.uuid4().hex[:16]}", session_id=session, run_id=run,
                tool=tool, client_token=f"tok-{uuid.uuid4().hex}", args=normalized,
                schema_fingerprint=spec.schema_fingerprint, retry_safe=spec.retry_safe,
                deadline=self._clock() + self._ttl, state=S.PENDING), "propose")
            self._hook("R1")
            call = self._show_unless_expired(call)
            self._hook("R2")
            return call

    def approve(self, call_id: str) -> Call:
        """Approve a shown, pending call before its deadline; else a typed error (A2)."""
        with self._locked(call_id, "approve") as call:
            self._require(call, "approve", _PENDING)
            if not call.shown:
                raise IllegalCallState(call, "approve", _NEVER_SHOWN)
            if self._clock() >= call.deadline:
                self._update(call, "approve", _PENDING, S.EXPIRED)
                raise ApprovalExpired(self.get(call_id), "approve")
            return self._update(call, "approve", _PENDING, S.APPROVED)

    def reject(self, call_id: str) -> Call:
        """The person refuses a shown, pending call; it never reaches the handler."""
        with self._locked(call_id, "reject") as call:
            self._require(call, "reject", _PENDING)
            if not call.shown:
                raise IllegalCallState(call, "reject", _NEVER_SHOWN)
            return self._update(call, "reject", _PENDING, S.REJECTED)

    def execute(self, call_id: str) -> Call:
        """Run an approved call with its original token; returns the settled call."""
        with self._locked(call_id, "execute") as call:
            self._require(call, "execute", _APPROVED)
            return self._execute_approved(call)

    def recover(self, call_id: str) -> Call:
        """Resume a call after a restart from whatever its checkpoint says (A4, A5, R1–R6)."""
        with self._locked(call_id, "recover") as call:
            return self._resume(call)

    def cancel(self, call_id: str) -> Call:
        """Stop what has not started; for a started write only record the request (A7)."""
        with self._locked(call_id, "cancel") as call:
            if call.state in _NOT_STARTED:
                return self._update(call, "cancel", _NOT_STARTED, S.CANCELLED)
            if call.state in _MAY_HAVE_STARTED:
                return self._update(call, "cancel", _MAY_HAVE_STARTED, cancel_requested=True)
            if call.state in (S.RESULT_CHECKPOINTED, S.ANSWERED):
                raise IllegalCallState(call, "cancel", "it committed and cancel is not a "
                                       "rollback; propose a compensating call to undo it")
            raise IllegalCallState(call, "cancel")

    def resume_lookup(self, call_id: str) -> Call:
        """A person asks for another lookup of an unknown call (the store is readable again)."""
        with self._locked(call_id, "resume_lookup") as call:
            self._require(call, "resume_lookup", _UNKNOWN)
            if not self._compatible(call):
                raise IllegalCallState(call, "resume_lookup", "the tool's contract changed "
                                       "since the checkpoint; reconcile it by hand")
            return self._lookup_and_act(self._update(call, "resume_lookup", _UNKNOWN, S.RECOVERING))

    def reconcile(self, call_id: str, note: str) -> Call:
        """A person settles an unknown call by hand; ``note`` says what they found."""
        if not isinstance(note, str) or not note.strip():
            raise InvalidInput(f"note is {note!r}; say what the business store showed")
        with self._locked(call_id, "reconcile") as call:
            self._require(call, "reconcile", _UNKNOWN)
            return self._update(call, "reconcile", _UNKNOWN, S.RECONCILED, error=note)

    # -- the runtime's own scheduler ------------------------------------------------------------
    def recovery_pass(self, session_id: str | None = None) -> list[Call]:
        """One pass of the runtime's own scheduler over the checkpoint (of one session, when
        ``session_id`` is given): every open call that no person must decide is taken up
        where its checkpoint says (:meth:`recover`), however long ago it was last touched. A
        pending call is shown, or expired at its deadline (A2); an approved one is executed;
        a started call that no process runs (its runtime died, or a cancel landed after it
        did) is looked up and answered or cancelled, never rolled back (A3, A4, A7, R4, R5);
        a checkpointed result is answered (R6). A call whose session a live process holds is
        that process's (A8); an unknown call waits for a person (A4). Returns the calls
        taken up, as the pass left them."""
        taken: list[Call] = []
        for call in self._checkpoints.calls(_RESUMABLE):
            if session_id is not None and call.session_id != session_id:
                continue
            try:
                taken.append(self.recover(call.call_id))
            except SessionBusy:
                continue  # a live process is inside an operation of this session
        return taken

    # -- the runtime's steps ---------------------------------------------------------------------
    def _resume(self, call: Call) -> Call:
        if call.state is S.PENDING:
            return self._show_unless_expired(call)
        if call.state is S.APPROVED:
            return self._execute_approved(call)
        if call.state is S.EXECUTING:
            # No live process holds the session (we do), so the handler is not running:
            # the crash fell before or after the commit, and only the store knows which.
            call = self._update(call, "restart_while_executing", _EXECUTING, S.RECOVERING)
        if call.state is S.RECOVERING:
            return self._lookup_and_act(call)
        if call.state is S.RESULT_CHECKPOINTED:
            return self._answer(call)
        return call  # unknown waits for a person; terminal states are settled

    def _show_unless_expired(self, call: Call) -> Call:
        """A request is shown only while it can still be approved (A2, R2)."""
        if self._clock() >= call.deadline:
            return self._update(call, "expire", _PENDING, S.EXPIRED)
        return call if call.shown else self._show(call)

    def _show(self, call: Call) -> Call:
        payload = {"tool": call.tool, "args": dict(call.args), "deadline": call.deadline}
        return self._update(call, "show", _PENDING, shown=True, display=("approval_requested",
                                                                          payload))

    def _execute_approved(self, call: Call) -> Call:
        self._hook("R3")
        # The run's retry switch is recorded with the step that enters the handler (A5).
        call = self._update(call, "execute", _APPROVED, S.EXECUTING,
                            retries_allowed=call.retry_safe)
        return self._attempts(call, retries_allowed=call.retries_allowed)

    def _attempts(self, call: Call, *, retries_allowed: bool) -> Call:
        """Enter the handler; resend the same token only while retries are allowed (A5)."""
        for attempt in range(AUTO_RETRIES + 1):
            try:
                result = self._business.execute(call.tool, call.client_token, call.args)
            except CallerError as exc:  # an explicit refusal: nothing was stored (W6)
                return self._update(call, "business_rejected", _EXECUTING, S.FAILED,
                                    error=str(exc))
            except Exception as exc:  # any other failure may have committed: uncertain
                if retries_allowed and attempt < AUTO_RETRIES and not call.cancel_requested:
                    call = self._update(call, "retry", _EXECUTING, error=_why(exc))
                    continue
                return self._uncertain(call, exc)
            return self._save(call, "save_result", _EXECUTING, result)
        raise AssertionError("unreachable: the last attempt always returns")

    def _uncertain(self, call: Call, exc: Exception) -> Call:
        if call.rerun_used:  # the one re-run is uncertain again (A5)
            return self._update(call, "outcome_uncertain", _EXECUTING, S.UNKNOWN, error=_why(exc))
        call = self._update(call, "outcome_uncertain", _EXECUTING, S.RECOVERING, error=_why(exc))
        return self._lookup_and_act(call)

    def _lookup_and_act(self, call: Call) -> Call:
        """Recovery proper: contract first, then the reconciler's evidence (A3, A4)."""
        if not self._compatible(call):
            return self._update(call, "contract_incompatible", _RECOVERING, S.UNKNOWN,
                                error=f"the contract of {call.tool} changed since the checkpoint")
        try:
            answer = self._lookup(call.client_token, call.tool, call.args)
        except LookupFailed as exc:  # not absent: no evidence at all
            return self._update(call, "lookup_failed", _RECOVERING, S.UNKNOWN, error=str(exc))
        if answer.status is LookupStatus.FOUND:
            assert answer.result is not None
            return self._save(call, "lookup_found", _RECOVERING, answer.result)
        if answer.status is LookupStatus.CONFLICT:
            return self._update(call, "lookup_conflict", _RECOVERING, S.UNKNOWN,
                                error=f"token {call.client_token!r} is recorded with other args")
        return self._absent(call)

    def _absent(self, call: Call) -> Call:
        if call.cancel_requested:  # the re-run has not started, so the cancel stops it (A7)
            return self._update(call, "lookup_absent", _RECOVERING, S.CANCELLED)
        if call.rerun_used:
            return self._update(call, "lookup_absent", _RECOVERING, S.UNKNOWN,
                                error="absent after the one re-run; a person must decide")
        return self._rerun(call)

    def _rerun(self, call: Call) -> Call:
        """The one re-run after ``absent``: under the call's own token, automatic retries off
        (A5), so the handler that committed nothing is entered once more (A6)."""
        call = self._update(call, "lookup_absent", _RECOVERING, S.EXECUTING, rerun_used=True,
                            retries_allowed=False)
        return self._attempts(call, retries_allowed=call.retries_allowed)

    def _save(self, call: Call, event: str, allowed: frozenset[CallState],
              result: Mapping[str, Any]) -> Call:
        """Checkpoint the first result exactly as the store returned it, then answer."""
        call = self._update(call, event, allowed, S.RESULT_CHECKPOINTED, result=result)
        self._hook("R6")
        return self._answer(call)

    def _answer(self, call: Call) -> Call:
        assert call.result is not None
        return self._update(call, "answer", frozenset({S.RESULT_CHECKPOINTED}), S.ANSWERED)

    # -- plumbing ------------------------------------------------------------------------------
    def _update(self, call: Call, event: str, allowed: frozenset[CallState],
                to: CallState | None = None, *, display: tuple[str, Mapping[str, Any]] | None = None,
                **changes: object) -> Call:
        if display is None and to is not None and to is not call.state and to in _DISPLAYED:
            display = (to.value, _display_payload(call, to, changes))
        return self._checkpoints.update(call, event, allowed=allowed, to=to, display=display,
                                        **changes)

    @contextmanager
    def _locked(self, call_id: str, action: str) -> Iterator[Call]:
        """Hold the call's session (A8), then re-read the call: another holder may have moved it."""
        with self._checkpoints.session_lock(self.get(call_id).session_id, action):
            yield self.get(call_id)

    @staticmethod
    def _require(call: Call, action: str, allowed: frozenset[CallState]) -> None:
        if call.state not in allowed:
            raise IllegalCallState(call, action)

    def _compatible(self, call: Call) -> bool:
        spec = self._tools.get(call.tool)
        return spec is not None and spec.schema_fingerprint == call.schema_fingerprint

    def _lookup_business(self, token: str, tool: str, args: Mapping[str, Any]) -> LookupAnswer:
        return lookup(self._business_path, token, tool, args)

    def _business_hook(self, point: str) -> None:
        self._hook(_BUSINESS_POINTS[point])

    @property
    def checkpoints(self) -> CheckpointStore:
        return self._checkpoints

    @property
    def business(self) -> BusinessStore:
        return self._business


def _display_payload(call: Call, to: CallState, changes: Mapping[str, object]) -> dict[str, Any]:
    payload: dict[str, Any] = {"tool": call.tool, "state": to.value}
    if to is S.ANSWERED:
        payload["result"] = dict(call.result or {})
    elif "error" in changes:
        payload["error"] = changes["error"]
    return payload


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
