"""The approved-write protocol (PROTOCOL.md rules A1–A8, R1–R6, W1–W6, V1) as one table.

Theory of operation
-------------------
One configuration describes ONE write tool call (create order, cancel order,
adjust stock, list/unlist) from the agent's proposal until it is settled:
answered with its first result, refused, expired, cancelled, or handed to a
person. The control state is where the runtime's checkpoint says the call is
*plus one fact the runtime cannot see*: whether the business transaction has
committed.

- The business store is folded in, like the platform in the query machine.
  Its commit is a ``platform`` step (``commit``: ``executing → committed``)
  that leaves no event in the runtime's log. ``executing`` therefore means
  "the handler may have started, nothing committed yet" and ``committed``
  means "committed, result not yet checkpointed"; the runtime sees both as
  ``executing`` and must ask the business store (A3, A4). ``commits`` counts
  business commits under this call's token, up to 2 so that a double commit
  is representable and the explorer can show how it would happen.
- The runtime checkpoints ``executing`` BEFORE it enters the handler (the
  same move as Q12's ``submitting``). So ``approved`` in a checkpoint means
  "the handler was certainly not entered": a crash there (R3) resumes by
  simply executing the original call. ``executing`` means "possibly
  entered": a restart from it goes to ``recovering`` and looks up first.
- Crashes are ``environment`` transitions, one per window R1–R6. A crash
  changes no durable variable (only ``running``, see A8 below): everything
  that matters is durable in the checkpoint or the business store, and in
  particular a restart never recomputes the deadline (A2). Crashes from
  ``executing`` and ``committed`` share one observed name, because the
  restarted runtime cannot tell them apart.
- The deadline is a boolean only the environment sets (``deadline_passes``);
  the runtime compares the stored absolute instant with its clock.
- ``recovering`` first compares the checkpoint's schema fingerprint with the
  tool's current contract (an upgrade is the environment step
  ``contract_changed``); incompatible → ``unknown`` without a lookup. Then
  the reconciler answers: found → the FIRST stored result, restored as is
  (``result := first``; a result rebuilt from current rows would be
  ``rebuilt`` and is a violation); absent → one re-run with the original
  token and automatic retries off (A5), or ``cancelled`` if a cancel was
  requested (the re-run is a side effect that has not started, A7), or
  ``unknown`` if the one re-run is used up; conflict or a failed lookup →
  ``unknown``.
- ``unknown`` never writes. Only a person leaves it: ``reconcile`` settles
  the call by hand, ``resume_lookup`` asks for another lookup once the store
  is readable again (it cannot buy a second re-run: ``rerun`` is kept).
- Cancel (A7) ends a call that has not started (pending, approved); from
  ``executing`` on it only records ``cancel_requested``: it stops automatic
  retries and a not-yet-started re-run, never a commit that happened. A
  committed result stands; cancel after the result checkpoint is illegal
  (it is not a rollback — a compensating call is a new call).
- A cancel that arrives in ``executing`` or ``committed`` lands only after
  the runtime running the call died (A8, below), so nobody runs the call
  (``running`` is false). The runtime's recovery pass then takes it up
  (``resume_abandoned``, a fair runtime step logged as a restart): it asks the
  business store, because a cancel of a write that may have started still
  needs verification (A7). A write that committed before the cancel arrived
  cannot be undone: the lookup finds it and its first result is checkpointed
  and answered as recorded (A4, R5, W2), with the cancel request on record;
  a write that did not commit is cancelled before its re-run (A7).
- Automatic retries (``retry``) resend the same token; they exist only for
  tools that declare ``retry_safe`` and never after an ``absent`` lookup
  (A5). A retry after the commit returns the stored first result (W2), so
  it stays in ``committed``.

A8 (one session's create/approve/resume/cancel are mutually exclusive) is
a lock over several calls; the machine says when ONE call holds it:
``running`` is true while a runtime is inside an operation on the call (the
propose until its request is shown, the handler's run until the answer or
the recovery that follows an uncertain outcome, a recovery's lookups) and
false once that operation returns or its process dies. The approval system
(``model/systems.py``) shares the lock between the calls of a session. Its
one consequence for a single call: a cancel can only land in
``executing``/``committed`` after the runtime running the call died. A
cancel recorded on a started call therefore means nobody is running it any
more: the handler steps (``commit``, ``business_rejected``, ``save_result``,
``outcome_uncertain``) require ``no_cancel``, and only a recovery continues
the call: a restart, or the runtime's recovery pass (``resume_abandoned``).
(In ``recovering`` a crash is silent, so a cancel there is
followed by a fresh recovery's lookups.) A crash changes no durable
variable; it ends the process, so ``running`` becomes false, or true again
where the restarted runtime recovers at once.

Bounds: ``auto_retries`` automatic retries per run; ``handler_entries`` then
never exceeds ``auto_retries + 2`` (first try, its retries, one re-run).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from ._core import Protocol
from ._expr import STATE, A, B, P, T, V, minimum, unchanged, when
from ._parts import (
    NO_EFFECT,
    Effect,
    Guard,
    Invariant,
    Param,
    State,
    StepProperty,
    Transition,
    Value,
    Variable,
)

__all__ = [
    "APPROVAL",
    "INVARIANTS",
    "STEP_PROPERTIES",
    "ApprovalState",
    "build_approval_machine",
]


# --------------------------------------------------------------------------
# States
# --------------------------------------------------------------------------
class ApprovalState(StrEnum):
    """Where one write call is (its control state in this machine)."""

    PROPOSED = "proposed"
    PENDING = "pending_approval"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    EXECUTING = "executing"
    COMMITTED = "committed"
    RESULT_CHECKPOINTED = "result_checkpointed"
    ANSWERED = "answered"
    FAILED = "failed"
    RECOVERING = "recovering"
    UNKNOWN = "unknown"
    RECONCILED = "reconciled"


(PROPOSED, PENDING, APPROVED, REJECTED, EXPIRED, CANCELLED, EXECUTING, COMMITTED,
 RESULT_CHECKPOINTED, ANSWERED, FAILED, RECOVERING, UNKNOWN, RECONCILED) = tuple(ApprovalState)

STATES: Final = (
    State(PROPOSED, "the agent proposed a write call; nothing is durable yet"),
    State(PENDING, "token, normalized args, schema fingerprint and deadline are checkpointed; "
          "waiting for a person (A1, A2)"),
    State(APPROVED, "approval checkpointed; the handler was certainly not entered (R3)"),
    State(REJECTED, "the person said no; the handler is never entered", terminal=True),
    State(EXPIRED, "the deadline passed first; the handler is never entered (A2)", terminal=True),
    State(CANCELLED, "cancelled before anything was committed (A7)", terminal=True),
    State(EXECUTING, "executing checkpointed; the handler may have started, nothing committed"),
    State(COMMITTED, "the business commit happened; its result is not checkpointed yet (R5)"),
    State(RESULT_CHECKPOINTED, "the first result is checkpointed; only the answer is left (R6)"),
    State(ANSWERED, "the final answer shows the first result", terminal=True),
    State(FAILED, "the business store refused the call; nothing was committed (W4, W6)",
          terminal=True),
    State(RECOVERING, "restarted or uncertain: checking the contract, then asking the "
          "business store about the original token (A3, A4)"),
    State(UNKNOWN, "the outcome is unknown: stop writing, wait for a person (A4, A5)",
          unknown=True),
    State(RECONCILED, "a person settled the call by hand from the business store's evidence",
          terminal=True),
)

TERMINAL: Final = frozenset(s.name for s in STATES if s.terminal)
BEFORE_HANDLER: Final = (PROPOSED, PENDING, APPROVED, REJECTED, EXPIRED)
MAY_HAVE_STARTED: Final = (EXECUTING, COMMITTED, RECOVERING, UNKNOWN)
OPEN: Final = tuple(s.name for s in STATES if not s.terminal)

# What the restarted runtime records when it finds a call checkpointed as executing:
# it cannot tell a crash before the commit (R4) from one after it (R5).
RESTARTED_EXECUTING: Final = "restart_while_executing"
# What the runtime records when a handler attempt ended without a usable answer.
UNCERTAIN: Final = "outcome_uncertain"

TOKENS: Final = ("none", "original", "new")
RESULTS: Final = ("none", "first", "rebuilt")


# --------------------------------------------------------------------------
# Guards and effects (small named pieces the table refers to)
# --------------------------------------------------------------------------
SHOWN = Guard("shown", V.shown)
NOT_SHOWN = Guard("not_shown", ~V.shown)
DEADLINE_AHEAD = Guard("deadline_ahead", ~V.deadline_passed)
DEADLINE_PASSED = Guard("deadline_passed", V.deadline_passed)
FIRST_RUN = Guard("first_run", ~V.rerun)
RERUN_USED = Guard("rerun_used", V.rerun)
NO_CANCEL = Guard("no_cancel", ~V.cancel_requested)
CANCEL_REQUESTED = Guard("cancel_requested", V.cancel_requested)
COMPATIBLE = Guard("compatible", V.contract_compatible)
INCOMPATIBLE = Guard("incompatible", ~V.contract_compatible)
NOTHING_COMMITTED = Guard("nothing_committed", V.commits == 0)
COMMIT_RECORDED = Guard("commit_recorded", V.commits >= 1)
NOBODY_RUNNING = Guard("nobody_running", ~V.running)


def _retry_left(auto_retries: int) -> tuple[Guard, Guard]:
    """(may retry, may not retry): exclusive, so an uncertain outcome has one next step."""
    may = V.retries_allowed & ~V.cancel_requested & (V.handler_entries <= auto_retries)
    return Guard("retry_left", may), Guard("no_retry_left", ~may)


def _run(running: bool, effect: Effect = NO_EFFECT) -> Effect:
    """``effect``, and whether a runtime is inside an operation on the call afterwards (A8)."""
    return Effect({**effect.updates, "running": running})


def _enter(**values: Value) -> Effect:
    """The handler is entered (again) under the same token."""
    return Effect({"handler_entries": V.handler_entries + 1, **values})


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------
def build_approval_machine(auto_retries: int = 1) -> Protocol:
    """Declare the approval machine with at most ``auto_retries`` automatic retries per run."""
    retry_left, no_retry_left = _retry_left(auto_retries)
    retry_safe = Param("retry_safe", (False, True), "whether the tool declares itself retry_safe")
    first_result = Effect({"result": "first"})  # the stored first result, as stored
    started = (EXECUTING, COMMITTED)
    transitions = (
        # ---- proposal and approval (A1, A2, R1, R2, V1) -----------------------
        Transition("propose", (PROPOSED,), PENDING,
                   "create the token once; checkpoint it with the normalized args, the schema "
                   "fingerprint and the deadline before anything is shown", ("A1", "W1", "W5"),
                   effect=_run(True, Effect({"token_id": "original",
                                             "retry_safe": P.retry_safe})),
                   params=(retry_safe,)),
        # A request is shown only while it can still be approved: a restart past the
        # deadline expires the call instead of showing a request nobody may grant (A2, R2).
        Transition("show", (PENDING,), None,
                   "show the approval request (a display event keyed by run and seq)",
                   ("A1", "V1", "A2"), guards=(NOT_SHOWN, DEADLINE_AHEAD),
                   effect=_run(False, Effect({"shown": True}))),
        Transition("crash_before_shown", (PENDING,), None,
                   "crash after the checkpoint, before display: the pending call survives",
                   ("R1",), guards=(NOT_SHOWN,), effect=_run(False), actor="environment",
                   observed_as=None),
        Transition("restart_while_pending", (PENDING,), None,
                   "restart while pending: the checkpointed deadline stands", ("R2", "A2"),
                   guards=(SHOWN,), effect=_run(False), actor="environment", observed_as=None),
        Transition("deadline_passes", (PENDING,), None, "the approval deadline passes",
                   ("A2", "R2"), guards=(DEADLINE_AHEAD,),
                   effect=Effect({"deadline_passed": True}),
                   actor="environment", observed_as=None),
        Transition("approve", (PENDING,), APPROVED,
                   "approved before the deadline; the approval is checkpointed", ("A2",),
                   guards=(SHOWN, DEADLINE_AHEAD), actor="user"),
        Transition("approve", (PENDING,), EXPIRED,
                   "approved too late: the expired decision blocks the handler", ("A2", "R2"),
                   guards=(SHOWN, DEADLINE_PASSED), actor="user"),
        Transition("expire", (PENDING,), EXPIRED, "nobody approved before the deadline",
                   ("A2",), guards=(DEADLINE_PASSED,), effect=_run(False)),
        Transition("reject", (PENDING,), REJECTED,
                   "the person refuses; like an expired call it never reaches the handler",
                   ("A2",), guards=(SHOWN,), actor="user"),
        # ---- cancel (A7) --------------------------------------------------------
        Transition("cancel", (PENDING, APPROVED), CANCELLED,
                   "nothing has started: cancel stops it", ("A7",), effect=_run(False),
                   actor="user"),
        Transition("cancel", MAY_HAVE_STARTED, None,
                   "the write may have started: record the request, verify, never roll back "
                   "(the session lock lets it in only when no runtime is running the call)",
                   ("A7", "A8"),
                   effect=_run(False, Effect({"cancel_requested": True})),
                   actor="user"),
        # ---- execution (A1, A5, A6, W2, W6, R3) ---------------------------------
        Transition("crash_before_handler", (APPROVED,), None,
                   "crash after the approved checkpoint: resume executes the original call",
                   ("R3", "A1"), actor="environment", observed_as=None),
        Transition("execute", (APPROVED,), EXECUTING,
                   "checkpoint executing, then enter the handler with the original token",
                   ("A1", "A5", "W1"),
                   effect=_run(True, _enter(retries_allowed=V.retry_safe))),
        Transition("commit", (EXECUTING,), COMMITTED,
                   "the business store commits the change and the result under the token",
                   ("W6", "W1"), guards=(NO_CANCEL,),
                   effect=Effect({"commits": V.commits + 1}),
                   actor="platform", observed_as=None),
        Transition("business_rejected", (EXECUTING,), FAILED,
                   "the business store refuses (stock, unknown sku); nothing is stored",
                   ("W4", "W6"), guards=(NO_CANCEL,), effect=_run(False), actor="platform"),
        Transition("save_result", (COMMITTED,), RESULT_CHECKPOINTED,
                   "the handler returned the first result; checkpoint it", ("W2", "R5"),
                   guards=(NO_CANCEL,), effect=first_result),
        Transition("retry", started, None,
                   "no usable answer; a retry_safe tool resends the same token (after a "
                   "commit the store returns the first result)", ("A5", "W2"),
                   guards=(retry_left,), effect=_enter()),
        Transition(UNCERTAIN, started, RECOVERING,
                   "no usable answer and no retry: ask the business store", ("A4", "A5"),
                   guards=(FIRST_RUN, NO_CANCEL, no_retry_left)),
        Transition(UNCERTAIN, started, UNKNOWN,
                   "the one re-run's outcome is uncertain again: unknown", ("A5",),
                   guards=(RERUN_USED, NO_CANCEL), effect=_run(False)),
        # A cancel on a started call lands only once no runtime runs it (A8), and it is not a
        # rollback (A7): the runtime's recovery pass takes the call up as a restart would and
        # asks the business store, so a commit that happened is found and answered (R5, A4)
        # and one that did not is cancelled before the re-run (A7).
        Transition("resume_abandoned", started, RECOVERING,
                   "the runtime's recovery pass takes up a started call no runtime is running "
                   "(a cancel landed after its runtime died): verify it with the business "
                   "store, never roll it back", ("A7", "A8", "A4", "R5"),
                   guards=(NOBODY_RUNNING,), effect=_run(True),
                   observed_as=RESTARTED_EXECUTING),
        Transition("crash_before_commit", (EXECUTING,), RECOVERING,
                   "crash before the business commit: nothing committed; the restarted "
                   "runtime recovers", ("R4", "A6"), effect=_run(True),
                   actor="environment", observed_as=RESTARTED_EXECUTING),
        Transition("crash_after_commit", (COMMITTED,), RECOVERING,
                   "crash after the commit, before the result checkpoint; the restarted "
                   "runtime recovers", ("R5",), effect=_run(True),
                   actor="environment", observed_as=RESTARTED_EXECUTING),
        Transition("crash_before_answer", (RESULT_CHECKPOINTED,), None,
                   "crash after the result checkpoint: only the answer is left", ("R6",),
                   effect=_run(False), actor="environment", observed_as=None),
        Transition("answer", (RESULT_CHECKPOINTED,), ANSWERED,
                   "show the checkpointed first result (display events are deduplicated)",
                   ("R6", "V1"), effect=_run(False)),
        # ---- recovery (A3, A4, A5, A7) ------------------------------------------
        Transition("crash_while_recovering", (RECOVERING,), None,
                   "crash during recovery: lookups are read-only, recovery starts over",
                   ("A3", "A4"), effect=_run(False), actor="environment", observed_as=None),
        Transition("contract_changed", (RECOVERING,), None,
                   "a deployment changed the tool's contract", ("A4", "L5"),
                   guards=(COMPATIBLE,),
                   effect=_run(False, Effect({"contract_compatible": False})),
                   actor="environment", observed_as=None),
        Transition("contract_incompatible", (RECOVERING,), UNKNOWN,
                   "the checkpoint's arguments do not fit the current contract: stop writing",
                   ("A4", "L5"), guards=(INCOMPATIBLE,), effect=_run(False)),
        Transition("lookup_found", (RECOVERING,), RESULT_CHECKPOINTED,
                   "found: restore the first result in the tool's own shape, no handler",
                   ("A3", "A4", "R5", "W2"), guards=(COMPATIBLE, COMMIT_RECORDED),
                   effect=_run(True, first_result)),
        Transition("lookup_absent", (RECOVERING,), EXECUTING,
                   "absent: re-run once with the original token, retries off", ("A4", "A5", "A6",
                                                                                "R4"),
                   guards=(COMPATIBLE, NOTHING_COMMITTED, FIRST_RUN, NO_CANCEL),
                   effect=_run(True, _enter(rerun=True, retries_allowed=False))),
        Transition("lookup_absent", (RECOVERING,), CANCELLED,
                   "absent and cancel requested: the re-run has not started, so it is stopped",
                   ("A7", "A3"), guards=(COMPATIBLE, NOTHING_COMMITTED, CANCEL_REQUESTED),
                   effect=_run(False)),
        Transition("lookup_absent", (RECOVERING,), UNKNOWN,
                   "absent after the one re-run: stop and wait for a person", ("A5",),
                   guards=(COMPATIBLE, NOTHING_COMMITTED, RERUN_USED, NO_CANCEL),
                   effect=_run(False)),
        Transition("lookup_conflict", (RECOVERING,), UNKNOWN,
                   "the token is recorded for another tool or other arguments", ("A3", "A4", "W3"),
                   guards=(COMPATIBLE, NOTHING_COMMITTED), effect=_run(False)),
        Transition("lookup_failed", (RECOVERING,), UNKNOWN,
                   "the lookup did not complete: unknown, never absent", ("A3", "A4"),
                   guards=(COMPATIBLE,), effect=_run(False)),
        # ---- a person resolves unknown (A4) -------------------------------------
        Transition("resume_lookup", (UNKNOWN,), RECOVERING,
                   "a person asks for another lookup once the store is readable", ("A4", "A3"),
                   guards=(COMPATIBLE,), effect=_run(True), actor="user"),
        Transition("reconcile", (UNKNOWN,), RECONCILED,
                   "a person settles the call by hand from the business store's evidence",
                   ("A4",), actor="user"),
        # ---- beside the call: object-level de-duplication and retention (W7, W8) -------
        Transition("draft_resubmitted", OPEN, None,
                   "an already submitted order draft is submitted again under a new token: "
                   "the original order comes back, nothing is written", ("W7",), actor="user",
                   observed_as=None),
        Transition("token_replayed", OPEN, None,
                   "a settled write's token is sent again with the same arguments, within its "
                   "record's lifetime: the first result comes back and the business data does "
                   "not change again", ("W2",), actor="user", observed_as=None),
        Transition("token_renewed", OPEN, None,
                   "a settled write's arguments are sent again under a new token: a new call "
                   "identity, validated and applied again (token idempotency is call identity, "
                   "not user intent)", ("W4",), actor="user", observed_as=None),
        Transition("retention_purge", OPEN, None,
                   "the idempotency records' lifetime runs out: every record is deleted except "
                   "the tokens of calls that may still resume", ("W8",), actor="environment",
                   observed_as=None),
    )
    return Protocol(
        name="approval",
        meaning="approved, idempotent write calls of an ERP agent and their crash recovery",
        states=STATES, initial=PROPOSED, variables=_variables(auto_retries),
        transitions=transitions, invariants=INVARIANTS, step_properties=STEP_PROPERTIES,
        refusable=REFUSABLE,
        actors={"user": "the person who approves, rejects, cancels and reconciles",
                "worker": "the approval runtime", "platform": "the business store",
                "environment": "crashes, the clock, deployments"})


# What a caller may be refused, changing nothing: each is refused in one transaction or before
# any (approve after expiry or rejection, execute without approval, ...).
REFUSABLE = frozenset({"approve", "reject", "execute", "cancel", "resume_lookup", "reconcile"})


def _variables(auto_retries: int) -> tuple[Variable, ...]:
    flags = (False, True)
    return (
        Variable("token_id", TOKENS, "none", "the client_token the call uses (A1)"),
        Variable("shown", flags, False, "the approval request was shown (V1)"),
        Variable("deadline_passed", flags, False, "the checkpointed deadline has passed (A2)"),
        Variable("retry_safe", flags, False, "the tool declares itself retry_safe (A5)"),
        # Decided per run (A5); the call's checkpoint row records it, its log does not.
        Variable("retries_allowed", flags, False, "automatic retries are on for this run (A5)",
                 logged=False),
        Variable("rerun", flags, False, "the one re-run after an absent lookup is used (A5)"),
        Variable("cancel_requested", flags, False, "a cancel was requested (A7)"),
        # A deployment the checkpoint's log never sees; the runtime compares fingerprints.
        Variable("contract_compatible", flags, True,
                 "the checkpoint's schema fingerprint matches the tool's contract (A4)",
                 logged=False),
        # Whether a held result is the first or a rebuilt one only the business store can
        # tell (by its stored first result), never the runtime's own log.
        Variable("result", RESULTS, "none", "the result the runtime holds for the call (A4)",
                 logged=False),
        # Not a ghost: the business store holds every application of the call, so an
        # adapter observes it there; the runtime's log cannot (the commit is hidden).
        Variable("commits", (0, 1, 2), 0, "business commits under this token (W2, A6)",
                 logged=False),
        # Content an adapter compares in the business store (W7, W8); no runtime log sees it.
        Variable("draft_order", ("original", "duplicate"), "original",
                 "what resubmitting an already submitted draft yields: its original order, or "
                 "a second one (W7)", logged=False),
        Variable("replay", ("first", "applied_again"), "first",
                 "what replaying a settled write's token yields: its first result, or a second "
                 "change (W2)", logged=False),
        Variable("renewal", ("new_call", "deduplicated"), "new_call",
                 "what sending a settled write's arguments under a new token yields: a new "
                 "call, validated and applied again, or the first call's result (W4)",
                 logged=False),
        Variable("token_record", ("kept", "lost"), "kept",
                 "the call's idempotency record is in the business store whenever the call may "
                 "still resume (W8)", logged=False),
        # The session lock's holder (A8): a process of the runtime is inside an operation on
        # this call (the propose before its request is shown, the handler's run up to the
        # answer, a recovery's lookup). The checkpoint's session_locks row shows it; the
        # call's event log does not.
        Variable("running", flags, False, "a runtime is inside an operation on the call and "
                 "holds its session's lock (A8)", logged=False),
        Variable("handler_entries", tuple(range(auto_retries + 3)), 0,
                 "times the handler was entered (A6)", ghost=True),
    )


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------
INVARIANTS: Final = (
    Invariant("at_most_one_commit", "at most one business commit per token",
              ("W2", "W6", "A6", "R4", "R5"), V.commits <= 1),
    Invariant("handler_twice_commits_once",
              "a commit needs a handler entry; entries may exceed commits, commits stay <= 1",
              ("A6",), V.commits <= minimum(1, V.handler_entries)),
    Invariant("no_handler_before_approval", "the handler is entered only after approval",
              ("A2", "R2", "R3"), ~STATE.isin(BEFORE_HANDLER) | (V.handler_entries == 0)),
    Invariant("expired_or_rejected_never_commits", "an expired or rejected call never commits",
              ("A2", "R2"), ~STATE.isin(EXPIRED, REJECTED) | (V.commits == 0)),
    Invariant("cancel_is_not_a_rollback", "cancelled only when nothing was committed",
              ("A7",), (STATE != CANCELLED) | (V.commits == 0)),
    Invariant("failed_committed_nothing", "a refused call committed nothing", ("W6",),
              (STATE != FAILED) | (V.commits == 0)),
    Invariant("executing_is_uncommitted", "executing means no commit yet (the commit moves on)",
              ("R4",), (STATE != EXECUTING) | (V.commits == 0)),
    Invariant("found_result_is_first",
              "a checkpointed or answered result is the first result, as stored",
              ("A4", "R5", "R6", "W2"),
              ~STATE.isin(RESULT_CHECKPOINTED, ANSWERED)
              | ((V.result == "first") & (V.commits == 1))),
    Invariant("no_rebuilt_result", "a result is never rebuilt from current data", ("A4",),
              V.result != "rebuilt"),
    Invariant("one_token", "the call uses the token created once at the proposal",
              ("A1",), V.token_id == when(STATE == PROPOSED, "none", "original")),
    Invariant("retries_off_after_absent", "the re-run after absent runs with retries off",
              ("A5",), ~(V.rerun & V.retries_allowed)),
    Invariant("draft_submitted_once", "a draft submitted again returns its original order",
              ("W7",), V.draft_order == "original"),
    Invariant("replay_returns_first", "a replayed token returns its first result and changes "
              "nothing", ("W2",), V.replay == "first"),
    Invariant("new_token_is_new_call", "the same arguments under a new token are a new call, "
              "applied again, never the first call's result", ("W4",),
              V.renewal == "new_call"),
    Invariant("retention_keeps_in_flight_tokens",
              "retention never deletes the record of a call that may still resume", ("W8",),
              V.token_record == "kept"),
    Invariant("retries_only_if_retry_safe", "automatic retries only for retry_safe tools",
              ("A5",), ~V.retries_allowed | V.retry_safe),
)

# A crash or a restart: an environment step named for one.
_CRASH = (T.actor == "environment") & T.trigger.isin(
    "crash_before_shown", "restart_while_pending", "crash_before_handler", "crash_before_commit",
    "crash_after_commit", "crash_before_answer", "crash_while_recovering")

# Every variable but ``running``: a crash ends the process that held the session.
DURABLE: Final = tuple(v.name for v in _variables(1) if v.name != "running")

STEP_PROPERTIES: Final = (
    StepProperty("deadline_never_extended", "once passed, the deadline stays passed",
                 ("A2", "R2"), A.deadline_passed | ~B.deadline_passed),
    StepProperty("approval_before_deadline", "approved only while the deadline is ahead",
                 ("A2",), ~((B.state == PENDING) & (A.state == APPROVED)) | ~B.deadline_passed),
    StepProperty("decision_after_display", "approve and reject only after the request was shown",
                 ("A1", "R1"), ~T.trigger.isin("approve", "reject") | B.shown),
    StepProperty("crash_changes_no_fact", "a crash or restart changes no durable variable (the "
                 "process that held the session is gone)",
                 ("R1", "R2", "R3", "R4", "R5", "R6", "A2"), ~_CRASH | unchanged(*DURABLE)),
    StepProperty("unknown_never_writes", "no step from unknown commits or enters the handler",
                 ("A4", "A5"), (B.state != UNKNOWN) | unchanged("commits", "handler_entries")),
    StepProperty("unknown_left_by_a_person", "only a person's step leaves unknown", ("A4",),
                 (B.state != UNKNOWN) | (A.state == UNKNOWN) | (T.actor == "user")),
    StepProperty("token_never_changes", "recovery never creates a new token", ("A1",),
                 (B.state == PROPOSED) | unchanged("token_id")),
    StepProperty("found_skips_handler", "a found lookup does not enter the handler again",
                 ("R5", "A4"), (T.trigger != "lookup_found")
                 | unchanged("handler_entries", "commits")),
    StepProperty("answer_repeats_nothing", "after the result checkpoint no business step repeats",
                 ("R6",), (B.state != RESULT_CHECKPOINTED) | unchanged("handler_entries", "commits")),
    StepProperty("cancel_changes_no_commit", "cancel is not a rollback", ("A7",),
                 (T.trigger != "cancel") | unchanged("commits")),
    StepProperty("terminal_absorbs", "no step leaves a terminal state", ("A2", "A7"),
                 ~B.state.isin(tuple(sorted(TERMINAL)))),
)

APPROVAL: Final = build_approval_machine()
