"""The query-execution protocol (PROTOCOL.md rules Q1–Q26, T1–T3) as one table.

Theory of operation
-------------------
One configuration describes one query and everything that decides what may
happen to it next: its local ``execution_state`` (the control state), its
cancel intent, its submission count, the lease epochs of the workers, the
condition versions of its task, and the *platform's* state for this
query_id.

The platform is folded into this machine rather than declared as a second
machine. Its state is a variable (``platform``) and its own progress
(finishing, failing) is a pair of ``actor="platform"`` transitions that leave
the local state alone. We chose this because every interesting guard here
reads both sides at once ("not found" may only be observed while the platform
really has no submission; success on the platform must win over a cancel
request), and a single table keeps those guards next to each other where a
reviewer reads them. A platform *call* and the worker's record of its answer
are one step: the answer is the evidence, and the trigger is named after the
evidence (``lookup_not_found``, ``submit_response_lost``), so the diagram
reads as what the worker learnt.

Workers are a tuple of lease epochs (``held``): the epoch each worker claimed
with, 0 when it holds none. A claim increments the row's ``lease_epoch``
(Q11); every later worker write is guarded by ``fresh_lease`` (the worker
holds the row's current epoch), so a paused worker whose lease was taken
over has no enabled write at all: its write changes nothing. A crash clears
the crashed worker's lease on this query. A whole worker process dying is
the same as a crash on each query it held, one after another; the
interleavings of a composition cover that (and more, which is safe: the
model may allow more than reality, never less).

``submit_epoch`` remembers under which lease ``submitting`` was committed.
Only that lease may make the platform call (Q12); any later lease finds
``submitting`` and must treat it as *possibly submitted* and look up (Q13).

Bounds: ``max_epoch`` claims and ``max_task_version`` condition versions.
A claim or crash that would need an epoch past the bound is not enabled, so
the model never strands a query with no epoch left to recover it.
"""

from __future__ import annotations

from enum import StrEnum

from ._core import Protocol
from ._expr import STATE, A, B, P, T, V, minimum, unchanged, when
from ._parts import NO_EFFECT, Effect, Guard, Invariant, Param, State, StepProperty, Transition, Variable


# --------------------------------------------------------------------------
# States
# --------------------------------------------------------------------------
class QueryState(StrEnum):
    """The query's execution_state (its control state in this machine)."""

    DRAFTED = "drafted"
    AWAITING = "awaiting_confirmation"
    CHECK_FAILED = "check_failed"
    INVALIDATED = "invalidated"
    SUPERSEDED = "superseded"
    QUEUED = "queued"
    SUBMITTING = "submitting"
    UNKNOWN = "submission_unknown"
    NOT_FOUND = "not_found"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXHAUSTED = "submission_retry_exhausted"


(DRAFTED, AWAITING, CHECK_FAILED, INVALIDATED, SUPERSEDED, QUEUED, SUBMITTING, UNKNOWN, NOT_FOUND,
 RUNNING, SUCCEEDED, FAILED, CANCELLED, EXHAUSTED) = tuple(QueryState)

STATES = (
    State(DRAFTED, "SQL saved as a draft; the platform is checking it without running it (Q3)"),
    State(AWAITING, "checked draft waiting for the user's explicit confirmation (Q3, Q6)"),
    State(CHECK_FAILED, "the platform's check rejected the draft; it can never be confirmed (Q3, T3)",
          terminal=True),
    State(INVALIDATED, "the task's conditions changed before confirmation (T2)", terminal=True),
    State(SUPERSEDED, "a SQL-only revision replaced this draft (T3)", terminal=True),
    State(QUEUED, "authorized and committed; a worker may claim it (Q7)"),
    State(SUBMITTING, "committed as about to be submitted: possibly submitted (Q12, Q13)"),
    State(UNKNOWN, "the submission's answer was lost: unknown until a lookup says (Q14)",
          unknown=True),
    State(NOT_FOUND, "the platform explicitly has no submission under this query_id (Q15)"),
    State(RUNNING, "the platform has it and is running it (Q15)"),
    State(SUCCEEDED, "the platform's evidence: it succeeded", terminal=True),
    State(FAILED, "explicit rejection or the platform's evidence of failure (Q17)", terminal=True),
    State(CANCELLED, "cancelled before submission, or on the platform's evidence (Q20, Q21)",
          terminal=True),
    State(EXHAUSTED, "not found after 3 submissions; no further retry (Q16)", terminal=True),
)

LIVE = (QUEUED, SUBMITTING, UNKNOWN, NOT_FOUND, RUNNING)  # authorized, not settled
MAX_SUBMISSIONS = 3

# Platform states for this query_id.
P_NONE, P_RUNNING, P_SUCCEEDED, P_FAILED, P_CANCELLED, P_REJECTED = (
    "not_received", "running", "succeeded", "failed", "cancelled", "rejected")
TERMINAL = frozenset(s.name for s in STATES if s.terminal)
PLATFORM_STATES = (P_NONE, P_RUNNING, P_SUCCEEDED, P_FAILED, P_CANCELLED, P_REJECTED)

# Triggers that carry platform evidence about this query_id.
EVIDENCE = frozenset({"lookup_running", "lookup_succeeded", "lookup_failed",
                      "lookup_cancelled", "lookup_not_found", "cancel_confirmed"})
PLATFORM_CALLS = frozenset({"submit_answered", "submit_response_lost", "submit_undelivered",
                            "submit_rejected", "crash_after_platform_stored"})

# The one event name for "the submit call got no answer": the worker cannot tell
# a lost answer from an undelivered request, so its log cannot either. The same for the
# cancel call: cancelled on the platform and the answer lost, or never seen.
UNANSWERED = "submit_unanswered"
CANCEL_UNANSWERED = "cancel_unanswered"

# What a caller may be refused, changing nothing: the user's actions that decide in one
# transaction, and a worker's submit steps (a stale lease, a spent submission budget).
REFUSABLE = frozenset({"confirm", "cancel", "revised", "begin_submit", "resubmit"})

# Finite abstractions of content an adapter compares, not only states (each is a
# verdict of the comparison, so a value outside the protocol is representable).
PAYLOAD_NONE, PAYLOAD_CONFIRMED, PAYLOAD_ALTERED = "none", "confirmed", "altered"
RESULT_NONE, RESULT_PLATFORM, RESULT_OTHER = "none", "platform", "other"
NOTICE_NONE, NOTICE_SOURCE, NOTICE_OTHER = "none", "source", "other"
REPLY_NONE, REPLY_WITHHELD, REPLY_SHOWN = "none", "withheld", "shown"
CLOCK_SOURCE, CLOCK_OTHER = "source", "other"
RERUN_NEW, RERUN_SAME = "new_id", "same_id"

# Parameters the environment chooses. A quote is the whole message byte for byte, the
# whole message with other surrounding whitespace (accepted: Q5 ignores leading and
# trailing whitespace), the whole message in another letter case (refused: only
# whitespace is ignored), a part of it, or a result notification's text.
QUOTES = ("whole", "padded", "recased", "part", "notification")
WHOLE_QUOTES = ("whole", "padded")
VERSION_CHOICES = ("current", "stale")
# Every failure of a platform call that proves nothing (Q14, Q15). A submit fails before the
# platform stored anything (a busy database or an error answer can only be that) or after
# (a malformed answer can only be that); timeouts and resets can be either.
LOST_FAULTS = ("timeout", "reset", "malformed")
UNDELIVERED_FAULTS = ("timeout", "reset", "error", "busy")
SUBMIT_FAULTS = ("timeout", "reset", "malformed", "error", "busy")  # one logged name, one domain
LOOKUP_FAULTS = ("timeout", "reset", "malformed", "error", "busy")
# A cancel call fails like a submit: before the platform saw it, or after it acted on it
# (a running submission is then cancelled, a finished one keeps its outcome) (Q21, Q14).
CANCEL_FAULTS = SUBMIT_FAULTS
MESSAGE_CHOICES = ("attributed", "pending")


# --------------------------------------------------------------------------
# Guards and effects (small named pieces the table refers to)
# --------------------------------------------------------------------------
worker_epoch = V.held[P.worker]  # the lease epoch this worker claimed with (0: none)

FRESH_LEASE = Guard("fresh_lease", (worker_epoch > 0) & (worker_epoch == V.lease_epoch))
OWN_CALL = Guard("own_call", V.submit_epoch == V.lease_epoch)
RECOVERING = Guard("recovering", V.submit_epoch != V.lease_epoch)
NO_CANCEL = Guard("no_cancel", V.cancel_state == "none")
CANCEL_REQUESTED = Guard("cancel_requested", V.cancel_state == "requested")
UNDER_LIMIT = Guard("under_limit", V.submissions < MAX_SUBMISSIONS)
AT_LIMIT = Guard("at_limit", V.submissions >= MAX_SUBMISSIONS)
QUOTE_WHOLE = Guard("quote_whole", P.quote.isin(WHOLE_QUOTES))
DRAFT_CURRENT = Guard("draft_current", P.draft_version == "current")
CONDITION_CURRENT = Guard("condition_current", P.condition_version == "current")
MESSAGE_SETTLED = Guard("message_settled", P.message == "attributed")
NOT_HOLDING = Guard("not_holding", (worker_epoch != V.lease_epoch) | (V.lease_epoch == 0))
HOLDING = Guard("holding", worker_epoch > 0)


def _platform_is(*states: str) -> Guard:
    """The platform is in one of ``states``; each is a case of its own for coverage."""
    name = "platform_" + "_or_".join(states)
    cond = V.platform == states[0]
    for st in states[1:]:
        cond = cond | (V.platform == st)
    return Guard(name, cond)


def _settle(**extra: str) -> Effect:
    """Recording a terminal outcome moves the task's phase only at its own version (Q24).

    The worker that records it then queues the result notification, with the request
    clock of the message the query's budget came from (M2)."""
    return Effect({"phase_moved": (V.task_version == V.authorized_version) & ~V.clarifying,
                   "notice": NOTICE_SOURCE, **extra})


def _fault_in(kinds: tuple[str, ...], acted: str = "storing") -> Guard:
    """The call's fault is one that can strike at this point of the call (``acted``: what
    the platform does to the request, for the guard's name)."""
    after = kinds == LOST_FAULTS
    return Guard(f"fault_{'after' if after else 'before'}_{acted}", P.fault.isin(kinds))


# A submission that reaches the platform is stored once, with the confirmed SQL (Q1, Q18).
_UNSTORED = V.platform == P_NONE
STORE_ON_PLATFORM = {"platform": when(_UNSTORED, P_RUNNING, V.platform),
                     "payload": when(_UNSTORED, PAYLOAD_CONFIRMED, V.payload)}


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------
def build_query_machine(workers: int = 2, max_epoch: int = 3,
                        max_task_version: int = 3) -> Protocol:
    """Declare the query machine for ``workers`` workers and the given bounds."""
    worker = Param("worker", tuple(range(workers)), "which worker acts")
    epochs = tuple(range(max_epoch + 1))
    epochs_left = Guard("epochs_left", V.lease_epoch < max_epoch, bound=True)
    versions_left = Guard("versions_left", V.task_version < max_task_version, bound=True)
    confirm_params = (
        Param("quote", QUOTES, "what instruction_quote is: the whole message (as sent, padded "
              "with whitespace, in another letter case), a part, a notification"),
        Param("draft_version", VERSION_CHOICES, "the draft_version the caller sends"),
        Param("condition_version", VERSION_CHOICES, "the condition_version the caller sends"),
        Param("message", MESSAGE_CHOICES, "whether a newer message's attribution is undecided"),
    )
    bump_task = Effect({"task_version": V.task_version + 1})
    claim = Effect({"lease_epoch": V.lease_epoch + 1,
                    "held": V.held.set(P.worker, V.lease_epoch + 1)})
    submit = Effect({"submissions": V.submissions + 1, "submit_epoch": V.lease_epoch,
                     "ids_submitted": 1})
    stored = Effect({"platform": P_RUNNING, "payload": PAYLOAD_CONFIRMED})
    by_worker = (worker,)
    submit_fault = Param("fault", SUBMIT_FAULTS, "how the submit call failed")
    cancel_fault = Param("fault", CANCEL_FAULTS, "how the cancel call failed")

    def lookup(trigger: str, dest: str | None, guard: Guard | None, meaning: str, rules: tuple[str, ...],
               effect: Effect | None = None, also: tuple[str, ...] = (),
               recovering: bool = True, params: tuple[Param, ...] = by_worker) -> list[Transition]:
        """A lookup answer, from unknown (and ``also``) and from a recovered submitting."""
        eff = effect or NO_EFFECT
        evidence = (guard,) if guard else ()
        found = [
            Transition(trigger, (UNKNOWN, *also), dest, meaning, rules,
                       guards=(FRESH_LEASE, *evidence), effect=eff, actor="worker",
                       params=params),
            Transition(trigger, (SUBMITTING,), dest, meaning + " (recovering submitting)",
                       (*rules, "Q13"), guards=(FRESH_LEASE, RECOVERING, *evidence), effect=eff,
                       actor="worker", params=params),
        ]
        # A cancelled answer needs a cancel call, which submitting never makes.
        return found if recovering else found[:1]

    transitions = [
        # ---- drafts (Q3, T2, T3) ------------------------------------------
        Transition("check_passed", (DRAFTED,), AWAITING,
                   "the platform checked the SQL without running it", ("Q3",), actor="platform"),
        Transition("check_failed", (DRAFTED,), CHECK_FAILED,
                   "the platform's check rejected the SQL", ("Q3", "T3"), actor="platform"),
        Transition("condition_updated", (DRAFTED, AWAITING), INVALIDATED,
                   "a condition update invalidates pending drafts", ("T1", "T2"),
                   guards=(versions_left,), effect=bump_task, actor="user"),
        Transition("revised", (AWAITING,), SUPERSEDED,
                   "a SQL-only revision names this draft in replaces_query_id", ("T3",),
                   actor="user"),
        Transition("cancel", (AWAITING, QUEUED), CANCELLED,
                   "nothing was submitted: cancel locally in one transaction", ("Q19", "Q20"),
                   actor="user"),
        # ---- confirmation (Q4–Q10, Q25) -------------------------------------
        Transition("confirm", (AWAITING,), QUEUED,
                   "first confirmation: authorize, mark the message, queue, in one transaction",
                   ("Q4", "Q5", "Q6", "Q7", "Q9", "Q10", "Q25"),
                   guards=(DRAFT_CURRENT, CONDITION_CURRENT, QUOTE_WHOLE, MESSAGE_SETTLED),
                   effect=Effect({"authorized_version": V.task_version}),
                   actor="user", params=confirm_params),
        Transition("confirm", LIVE, None,
                   "re-confirmation (a network retry) returns the current state", ("Q8",),
                   guards=(DRAFT_CURRENT, CONDITION_CURRENT, QUOTE_WHOLE),
                   actor="user", params=confirm_params),
        # ---- the task moves on while the query runs (Q23) ---------------------
        Transition("condition_updated", LIVE, None,
                   "the task moves on; the query keeps its authorized version", ("Q23", "T1"),
                   guards=(versions_left,), effect=bump_task, actor="user"),
        Transition("clarification_asked", LIVE, None,
                   "the agent asks the user to clarify the task", ("Q24",),
                   guards=(Guard("not_clarifying", ~V.clarifying),),
                   effect=Effect({"clarifying": True}),
                   actor="user", observed_as=None),
        Transition("clarification_answered", LIVE, None,
                   "the user's clarification arrives", ("Q24",),
                   guards=(Guard("clarifying", V.clarifying),),
                   effect=Effect({"clarifying": False}),
                   actor="user", observed_as=None),
        # ---- cancel after submission began (Q19, Q21, Q22) -------------------
        Transition("cancel", (SUBMITTING, UNKNOWN, NOT_FOUND, RUNNING), None,
                   "possibly submitted: only record the request", ("Q19", "Q21"),
                   guards=(NO_CANCEL,),
                   effect=Effect({"cancel_state": "requested"}),
                   actor="user"),
        # ---- workers: claim, submit (Q11, Q12) ------------------------------
        Transition("claim", LIVE, None, "claim the query (or take over an expired lease)",
                   ("Q11",), guards=(NOT_HOLDING, epochs_left), effect=claim,
                   actor="worker", params=by_worker),
        Transition("begin_submit", (QUEUED,), SUBMITTING,
                   "commit submitting and the count before calling the platform", ("Q12",),
                   guards=(FRESH_LEASE,), effect=submit, actor="worker", params=by_worker),
        Transition("submit_answered", (SUBMITTING,), RUNNING,
                   "the platform accepted (or deduplicated) the submission", ("Q12", "Q18"),
                   guards=(FRESH_LEASE, OWN_CALL, _platform_is(P_NONE)),
                   effect=stored, actor="worker", params=by_worker),
        Transition("submit_response_lost", (SUBMITTING,), UNKNOWN,
                   "the platform stored it but the answer was lost", ("Q14", "Q18"),
                   guards=(FRESH_LEASE, OWN_CALL, _platform_is(P_NONE), _fault_in(LOST_FAULTS)),
                   effect=stored, actor="worker", params=(worker, submit_fault),
                   observed_as=UNANSWERED),
        Transition("submit_undelivered", (SUBMITTING,), UNKNOWN,
                   "the request was never processed; the worker cannot tell it from a lost answer",
                   ("Q14",), guards=(FRESH_LEASE, OWN_CALL, _fault_in(UNDELIVERED_FAULTS)),
                   actor="worker", params=(worker, submit_fault), observed_as=UNANSWERED),
        Transition("submit_rejected", (SUBMITTING,), FAILED,
                   "explicit rejection (unsupported syntax, no permission)", ("Q17",),
                   guards=(FRESH_LEASE, OWN_CALL, _platform_is(P_NONE)),
                   effect=_settle(platform=P_REJECTED), actor="worker", params=by_worker),
        Transition("crash_after_platform_stored", (SUBMITTING,), None,
                   "the platform stored it and the worker died before recording the answer",
                   ("Q12", "Q13"), guards=(FRESH_LEASE, OWN_CALL, epochs_left),
                   effect=Effect({**STORE_ON_PLATFORM, "held": V.held.set(P.worker, 0)}),
                   actor="worker", params=by_worker, observed_as=None),
        # ---- lookups: evidence resolves unknown (Q13, Q15) --------------------
        *lookup("lookup_running", RUNNING, _platform_is(P_RUNNING),
                "the platform has it running: keep tracking", ("Q15",)),
        *lookup("lookup_succeeded", SUCCEEDED, _platform_is(P_SUCCEEDED),
                "the platform succeeded; success stands over a cancel request; the platform's "
                "result is stored and withheld from the confirming message's status reply",
                ("Q15", "Q21", "Q24", "Q26"),
                _settle(result=RESULT_PLATFORM, status_reply=REPLY_WITHHELD), also=(RUNNING,)),
        *lookup("lookup_failed", FAILED, _platform_is(P_FAILED),
                "the platform's evidence: it failed", ("Q15", "Q17", "Q24"), _settle(),
                also=(RUNNING,)),
        *lookup("lookup_cancelled", CANCELLED, _platform_is(P_CANCELLED),
                "the platform's evidence: it was cancelled", ("Q15", "Q21", "Q24"), _settle(),
                also=(RUNNING,), recovering=False),
        *lookup("lookup_not_found", NOT_FOUND, _platform_is(P_NONE),
                "the platform explicitly has no such submission", ("Q15", "Q16"),
                Effect({"not_found_seen": minimum(V.not_found_seen + 1, MAX_SUBMISSIONS)})),
        *lookup("lookup_timeout", None, None,
                "the lookup got no answer (timed out, reset, malformed or error answer, busy "
                "platform): nothing learnt, still unknown", ("Q15",),
                also=(RUNNING,), params=(worker, Param("fault", LOOKUP_FAULTS,
                                                       "how the lookup failed"))),
        # ---- after an explicit not found (Q16, Q21) --------------------------
        Transition("resubmit", (NOT_FOUND,), SUBMITTING,
                   "resubmit under the same query_id", ("Q1", "Q16"),
                   guards=(FRESH_LEASE, NO_CANCEL, UNDER_LIMIT), effect=submit,
                   actor="worker", params=by_worker),
        Transition("resubmit", (NOT_FOUND,), EXHAUSTED,
                   "three submissions were not found: stop", ("Q16",),
                   guards=(FRESH_LEASE, NO_CANCEL, AT_LIMIT), effect=_settle(),
                   actor="worker", params=by_worker),
        Transition("confirm_cancel", (NOT_FOUND,), CANCELLED,
                   "cancel requested and the platform has nothing: cancelled on its evidence",
                   ("Q21",), guards=(FRESH_LEASE, CANCEL_REQUESTED), effect=_settle(),
                   actor="worker", params=by_worker),
        Transition("cancel_confirmed", (UNKNOWN, RUNNING), CANCELLED,
                   "the worker asked the platform to cancel and it did", ("Q21",),
                   guards=(FRESH_LEASE, CANCEL_REQUESTED, _platform_is(P_RUNNING, P_CANCELLED)),
                   effect=_settle(platform=P_CANCELLED), actor="worker", params=by_worker),
        # A failed cancel call proves nothing (Q21, Q14): the query stays where it was and
        # the request stays; the worker logs the fault it met, as for a lookup.
        Transition("cancel_response_lost", (UNKNOWN, RUNNING), None,
                   "the platform received the cancel (cancelling what still ran) but the answer "
                   "was lost (timed out, reset, malformed): nothing learnt", ("Q21", "Q14"),
                   guards=(FRESH_LEASE, CANCEL_REQUESTED, _fault_in(LOST_FAULTS, "acting")),
                   effect=Effect({"platform": when(V.platform == P_RUNNING, P_CANCELLED,
                                                   V.platform)}),
                   actor="worker", params=(worker, cancel_fault), observed_as=CANCEL_UNANSWERED),
        Transition("cancel_undelivered", (UNKNOWN, RUNNING), None,
                   "the cancel call failed before the platform saw it (timed out, reset, error "
                   "answer, busy platform): nothing changed, nothing learnt", ("Q21", "Q14"),
                   guards=(FRESH_LEASE, CANCEL_REQUESTED, _fault_in(UNDELIVERED_FAULTS, "acting")),
                   actor="worker", params=(worker, cancel_fault), observed_as=CANCEL_UNANSWERED),
        # ---- the platform's own progress -------------------------------------
        # Not from not_found: there the platform has nothing to run (not_found_is_true).
        Transition("platform_succeeds", (SUBMITTING, UNKNOWN, RUNNING), None,
                   "the platform finishes the query", ("Q18",),
                   guards=(_platform_is(P_RUNNING),),
                   effect=Effect({"platform": P_SUCCEEDED}),
                   actor="platform", observed_as=None),
        Transition("platform_fails", (SUBMITTING, UNKNOWN, RUNNING), None,
                   "the query fails on the platform", ("Q18", "Q17"),
                   guards=(_platform_is(P_RUNNING),),
                   effect=Effect({"platform": P_FAILED}),
                   actor="platform", observed_as=None),
        # ---- outside this query's record (Q2, M1) -------------------------------
        Transition("rerun", (AWAITING, *LIVE), None,
                   "the user runs the same SQL again on purpose: a new query record with a new "
                   "id; this query is untouched", ("Q2",), actor="user", observed_as=None),
        Transition("run_stopped", LIVE, None,
                   "the agent's run is stopped (its stream closed) and a new run starts: not a "
                   "cancel, the authorized query runs on", ("Q22",), actor="user",
                   observed_as=None),
        Transition("message_redelivered", (DRAFTED, AWAITING, *LIVE), None,
                   "the confirming message is delivered again on recovery, on a later day: "
                   "it keeps its original request clock", ("M1",), actor="environment",
                   observed_as=None),
        # ---- crashes ---------------------------------------------------------
        Transition("crash", LIVE, None,
                   "the worker process dies; its leases are gone, the rows stay", ("Q11", "Q13"),
                   guards=(HOLDING, epochs_left),
                   effect=Effect({"held": V.held.set(P.worker, 0)}),
                   actor="environment", params=(worker,), observed_as=None),
    ]
    variables = (
        Variable("submissions", tuple(range(MAX_SUBMISSIONS + 1)), 0,
                 "submission attempts, the first included (Q16)"),
        Variable("cancel_state", ("none", "requested"), "none", "cancel intent, apart from state (Q19)"),
        Variable("lease_epoch", epochs, 0, "epoch of the latest claim (Q11)"),
        Variable("held", tuple(_tuples(epochs, workers)), (0,) * workers,
                 "the epoch each worker claimed with; 0 = none (in the workers' memory)",
                 logged=False),
        Variable("submit_epoch", epochs, 0, "the lease under which submitting was committed (Q12)"),
        Variable("platform", PLATFORM_STATES, P_NONE,
                 "the platform's state for this query_id (in the platform's ledger) (Q18)",
                 logged=False),
        Variable("task_version", tuple(range(1, max_task_version + 1)), 1,
                 "the task's current condition version (T1)"),
        Variable("authorized_version", tuple(range(max_task_version + 1)), 0,
                 "the condition version the query was authorized at; 0 = not yet (Q23)"),
        Variable("clarifying", (False, True), False,
                 "the task waits for the user's clarification (Q24)", logged=False),
        Variable("phase_moved", (False, True), False,
                 "the recorded outcome moved the task's phase (Q24)"),
        # Content compared by an adapter (logged=False: the agent's event log cannot see the
        # platform's ledger, the notifications or the messages table).
        Variable("payload", (PAYLOAD_NONE, PAYLOAD_CONFIRMED, PAYLOAD_ALTERED), PAYLOAD_NONE,
                 "the SQL the platform stored for this query_id vs the SQL the user confirmed "
                 "(Q1, Q18)", logged=False),
        Variable("result", (RESULT_NONE, RESULT_PLATFORM, RESULT_OTHER), RESULT_NONE,
                 "the stored result vs the platform's result for this query_id (Q15, Q25)",
                 logged=False),
        Variable("notice", (NOTICE_NONE, NOTICE_SOURCE, NOTICE_OTHER), NOTICE_NONE,
                 "the result notification's request clock vs the budget message's (M2)",
                 logged=False),
        Variable("status_reply", (REPLY_NONE, REPLY_WITHHELD, REPLY_SHOWN), REPLY_NONE,
                 "what the status tool answers the confirming message about the result (Q26)",
                 logged=False),
        Variable("message_clock", (CLOCK_SOURCE, CLOCK_OTHER), CLOCK_SOURCE,
                 "the confirming message's stored request clock vs the one it arrived with (M1)",
                 logged=False),
        Variable("reruns", (RERUN_NEW, RERUN_SAME), RERUN_NEW,
                 "every deliberate rerun of this query's SQL got a new query id (Q2)",
                 logged=False),
        Variable("not_found_seen", tuple(range(MAX_SUBMISSIONS + 1)), 0,
                 "lookups that answered an explicit not found (Q15, Q16)", ghost=True),
        Variable("ids_submitted", (0, 1, 2), 0,
                 "distinct query ids this query was submitted under (Q1)", ghost=True),
    )
    return Protocol(
        name="query",
        meaning="query execution (the data agent's SQL on an external platform): one query from "
                "draft to settled",
        states=STATES, initial=DRAFTED, variables=variables, transitions=tuple(transitions),
        invariants=INVARIANTS, step_properties=STEP_PROPERTIES, refusable=REFUSABLE,
        actors={"user": "the user and agent tools", "worker": "a worker holding a lease",
                "platform": "the synthetic platform", "environment": "crashes"})


def _tuples(epochs: tuple[int, ...], workers: int) -> list[tuple[int, ...]]:
    import itertools
    return list(itertools.product(epochs, repeat=workers))


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------
INVARIANTS = (
    Invariant("at_most_three_submissions", "at most three submissions", ("Q16",),
              V.submissions <= MAX_SUBMISSIONS),
    Invariant("resubmission_follows_not_found",
              "every submission after the first follows an explicit not found",
              ("Q15", "Q16"), V.submissions <= 1 + V.not_found_seen),
    Invariant("one_query_id", "the query is submitted under one query_id only", ("Q1",),
              V.ids_submitted <= 1),
    Invariant("failed_needs_evidence", "failed only after an explicit rejection or a platform failure",
              ("Q14", "Q17"), (STATE != FAILED) | V.platform.isin(P_FAILED, P_REJECTED)),
    Invariant("cancelled_needs_evidence",
              "cancelled only before the first submission or on the platform's evidence",
              ("Q20", "Q21"),
              (STATE != CANCELLED) | (V.submissions == 0) | V.platform.isin(P_CANCELLED, P_NONE)),
    Invariant("success_stands", "a platform success never ends locally as cancelled or failed",
              ("Q21",), (V.platform != P_SUCCEEDED) | ~STATE.isin(CANCELLED, FAILED)),
    Invariant("not_found_is_true", "not_found only while the platform really has no submission",
              ("Q15",), (STATE != NOT_FOUND) | (V.platform == P_NONE)),
    Invariant("platform_runs_confirmed_sql",
              "the platform stores this query_id only with the SQL the user confirmed",
              ("Q1", "Q18"), V.payload != PAYLOAD_ALTERED),
    Invariant("result_is_platforms", "a stored result is the platform's result, and only a "
              "success stores one", ("Q15", "Q25"),
              V.result == when(STATE == SUCCEEDED, RESULT_PLATFORM, RESULT_NONE)),
    Invariant("notice_keeps_budget_clock",
              "a result notification carries the request clock of the budget message", ("M2",),
              V.notice != NOTICE_OTHER),
    Invariant("status_withholds_result",
              "the status tool never gives the confirming message the result", ("Q26",),
              V.status_reply != REPLY_SHOWN),
    Invariant("message_keeps_clock", "a redelivered message keeps its original request clock",
              ("M1",), V.message_clock == CLOCK_SOURCE),
    Invariant("rerun_is_new_query", "re-running the same SQL on purpose never reuses a query id",
              ("Q2",), V.reruns == RERUN_NEW),
    Invariant("unsubmitted_until_submitting",
              "the platform has nothing before the first submitting commit", ("Q12",),
              (V.submissions > 0) | (V.platform == P_NONE)),
)

# A worker's write: a worker step other than taking a lease or dying.
_WORKER_WRITE = (T.actor == "worker") & ~T.trigger.isin("claim", "crash")
_CONFIRMING = (A.state == QUEUED) & (B.state != QUEUED)

STEP_PROPERTIES = (
    # Q24, said of the step that records the outcome, not of every later state. Once
    # recorded, an outcome that moved the phase stays recorded while the task moves on: in
    # a system, another query's condition update may bump the shared task version right
    # after. So the rule is checked where it can be broken, at the recording step.
    StepProperty("late_result_keeps_out",
                 "the step that records an outcome moves the task's phase only while the task is "
                 "still at the query's authorized version and not clarifying", ("Q24",),
                 (A.phase_moved == B.phase_moved)
                 | (~B.phase_moved & (B.authorized_version == B.task_version) & ~B.clarifying)),
    StepProperty("stale_lease_changes_nothing",
                 "every worker write is made under the row's current lease_epoch", ("Q11",),
                 ~_WORKER_WRITE | ((B.held[P.worker] == B.lease_epoch) & (B.lease_epoch > 0))),
    StepProperty("terminal_absorbs", "no step leaves a terminal state", ("Q16", "Q21"),
                 ~B.state.isin(tuple(sorted(TERMINAL)))),
    StepProperty("unknown_left_on_evidence",
                 "submission_unknown is left only on a lookup's evidence", ("Q14", "Q15"),
                 (B.state != UNKNOWN) | (A.state == UNKNOWN) | T.trigger.isin(tuple(sorted(EVIDENCE)))),
    StepProperty("call_after_submitting_commit",
                 "only the lease that committed submitting calls the platform", ("Q12", "Q13"),
                 ~T.trigger.isin(tuple(sorted(PLATFORM_CALLS)))
                 | ((B.state == SUBMITTING) & (B.submit_epoch == B.lease_epoch))),
    StepProperty("confirmation_needs_whole_current_quote",
                 "queueing needs the whole message, current versions and no pending message",
                 ("Q5", "Q9", "Q25"),
                 ~_CONFIRMING | (P.quote.isin(WHOLE_QUOTES) & (P.draft_version == "current")
                                 & (P.condition_version == "current")
                                 & (P.message == "attributed"))),
    StepProperty("reconfirmation_changes_nothing", "confirming a confirmed query changes nothing",
                 ("Q8",), (T.trigger != "confirm") | (B.state == AWAITING) | unchanged()),
    StepProperty("cancel_after_submit_only_requests",
                 "from submitting on, a cancel request never settles the query by itself",
                 ("Q21", "Q22"),
                 (T.trigger != "cancel") | B.state.isin(AWAITING, QUEUED) | (A.state == B.state)),
    StepProperty("authorization_is_fixed", "the authorized condition version never changes",
                 ("Q23",), (B.authorized_version == 0)
                 | (B.authorized_version == A.authorized_version)),
)

QUERY = build_query_machine()
