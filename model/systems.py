"""The declared systems: queries of one task, approved calls of one session.

Theory of operation
-------------------
The machines in ``query`` and ``approval`` each describe one instance. The
hazards the seeds warn about sit *between* instances, so each system below
says, as data, what its instances really share (see ``_system``):

Query system (one task, N queries, W worker processes; rules T1, T2, Q9,
Q10, Q11, Q13, Q23, Q24):

* The task's condition version (``task_version``) and its clarification
  state (``clarifying``) are one value for the whole task. A late result is
  judged against the task's *current* version, which another query's update
  may have moved (Q23, Q24).
* ``condition_updated`` is synchronised: one update moves the version once
  and invalidates every pending draft of the task in the same step, while
  queries already authorized keep their authorized version (T1, T2, Q23).
* ``crash`` is synchronised: a worker process that dies drops every lease it
  holds, on every query at once (Q11, Q13).
* The session's newest message (``message``) is received and attributed by
  the system itself; the confirm call's ``message`` parameter is bound to it,
  so an unattributed message blocks the first confirmation of any draft of
  the session (Q9, Q10). A received message is a *later* one, on a later
  request clock, and it may arrive at any point, so between a confirmation
  and its result notification too: the notification must still carry the
  clock of the message the query's budget came from, not the newest one's
  (M2). Once a later message is attributed, ``message`` stays ``later``, so
  the kit's tour fires every step again with a later message present.
* The session holds a second task (``other_task``), with no query of this
  system: its conditions may be updated (once, to bound the space), and that
  moves neither this task's version nor its drafts. A version counted over
  the session, or an update that invalidates the session's drafts, shows
  (T1, T2).
* Queries are interchangeable, and so are worker processes (the ``worker``
  parameter indexes ``held``): the explorer reduces by both.

Bounds are smaller than the single machine's (2 lease epochs, 2 condition
versions), because the space grows as a product; the single machine keeps the
larger bounds and is explored too.

Approval system (M calls of one session; rules W6, A8):

* The calls draw on one ``stock``: an order's ``commit`` needs a unit and
  takes it, atomically with the business commit (the business store checks
  stock in the commit's transaction). The system invariant ``no_oversell``
  says that no more units are committed than there were.
* The calls share the session's lock (A8): a runtime inside an operation on
  a call (its ``running`` flag: the propose before the request is shown, the
  handler's run up to the answer, a recovery's lookups) holds ``session``.
  Meanwhile every other call's create, approve, reject, execute, resume,
  cancel and recovery is refused. The holder's operation returning frees it,
  and so does its process dying (a restart that recovers at once, after a
  crash inside the handler, takes it again). The invariant
  ``one_runtime_per_session`` says at most one call holds it and
  ``session`` agrees; with the mutex declared it holds by construction, so
  it cross-checks the mechanism.

Ledger system (the N tool calls of one assistant message; rules L1–L5):

* The calls share the session's run (a restart under a new ``run_id`` hits
  every call at once: ``crash`` is synchronised) and the session's read
  permission. Whether a tool's contract changed is each call's own fact: it
  compares the deployment with that call's registration.
* ``unpaired`` counts the calls of the message with no paired result; the
  synchronised ``continue`` (the original input goes on) needs it at zero, so
  no unpaired call survives a completed recovery (L4).
* ``register`` is synchronised: the one transaction that checkpoints the
  assistant message registers every call of it (L1), so no call is ever
  registered without the others. Each call is a write or a read of its own:
  the step carries one ``kind`` per call (``per_instance``).
"""

from __future__ import annotations

from ._expr import I, S, count, every, some, total, when
from ._parts import Effect, Guard, Variable
from ._system import System
from ._system_parts import Binding, Mutex, Refinement, SharedTransition, SystemInvariant
from .approval import APPROVAL
from .ledger import LEDGER
from .query import build_query_machine

# The session's newest user message: the confirming one, attributed (the start); a newer one
# whose task is not decided yet; a newer one, attributed. A newer message has a later request
# clock than the confirming one, so a notification that took the newest message's clock
# instead of its budget message's (M2) differs from the one it must carry.
MESSAGE_STATES = ("attributed", "pending", "later")

# The approval steps that run inside the runtime under the session's lock (A8): a caller's
# create, approve, reject, execute, cancel, resume and reconcile, and the runtime's recovery
# (show, expire, answer, the recovery pass and the lookups after a restart). Crashes, the
# clock, deployments and the business store's own writers do not take it.
SESSION_OPERATIONS = frozenset({
    "propose", "show", "approve", "expire", "reject", "cancel", "crash_before_handler",
    "execute", "answer", "resume_abandoned", "crash_before_commit", "crash_after_commit",
    "contract_incompatible", "lookup_found", "lookup_absent", "lookup_conflict", "lookup_failed",
    "resume_lookup", "reconcile"})


def build_query_system(queries: int = 2, workers: int = 2, max_epoch: int = 2,
                       max_task_version: int = 2) -> System:
    """One task with ``queries`` queries and ``workers`` worker processes."""
    machine = build_query_machine(workers=workers, max_epoch=max_epoch,
                                  max_task_version=max_task_version)
    pending = Guard("message_pending", S.message == "pending")
    attributed = Guard("message_attributed", S.message != "pending")
    return System(
        name="query_system",
        meaning=(f"one task of one session with a second task: {queries} queries, {workers} "
                 f"worker process{'es' if workers != 1 else ''}"),
        machine=machine,
        instances=queries,
        shared=("task_version", "clarifying"),
        variables=(Variable("message", MESSAGE_STATES, "attributed",
                            "the session's newest user message: the confirming one (attributed), "
                            "a later one still pending, or a later one attributed; a later one "
                            "has a later request clock (Q9, Q10, M2)"),
                   Variable("other_task", ("unchanged", "updated"), "unchanged",
                            "the session's second task, with no query here: its conditions as "
                            "created, or updated once; nothing of this task moves with it "
                            "(T1, T2)")),
        transitions=(
            SharedTransition("message_received", "a new user message arrives, on a later "
                             "request clock; its task is not yet decided", ("Q9", "Q10", "M2"),
                             guards=(attributed,),
                             effect=Effect({"message": "pending"}),
                             actor="user"),
            SharedTransition("message_attributed", "the message is attributed to a task",
                             ("Q10",), guards=(pending,),
                             effect=Effect({"message": "later"}),
                             actor="worker"),
            SharedTransition("other_task_updated", "the user updates the conditions of the "
                             "session's other task: this task's version and drafts stay",
                             ("T1", "T2"),
                             guards=(Guard("once", S.other_task == "unchanged"),),
                             effect=Effect({"other_task": "updated"}),
                             actor="user"),
        ),
        sync=("condition_updated", "crash"),
        # the session's message state: only a pending one blocks a confirmation
        bind=(Binding("message", when(S.message == "pending", "pending", "attributed")),),
        worker=("worker", "held"),
    )


def build_approval_system(calls: int = 2, stock: int = 1) -> System:
    """``calls`` order calls of one session drawing on ``stock`` units."""
    units = tuple(range(stock + 1))

    return System(
        name="approval_system",
        meaning=(f"one session: {calls} order calls drawing on {stock} "
                 f"unit{'s' if stock != 1 else ''} of stock"),
        machine=APPROVAL,
        instances=calls,
        variables=(Variable("stock", units, stock, "units left to sell (W6)"),
                   Variable("session", ("free", "held"), "free",
                            "the session's lock: held while a runtime is inside an operation "
                            "on one of its calls (A8)")),
        refinements=(Refinement(
            "commit", ("W6",),
            guards=(Guard("in_stock", S.stock > 0),),
            effect=Effect({"stock": S.stock - 1})),),
        invariants=(SystemInvariant(
            "no_oversell", "the orders' business commits never exceed the stock there was",
            ("W6",), total(I.commits) <= stock),
            SystemInvariant(
                "one_runtime_per_session", "at most one call's runtime holds the session, "
                "as session says", ("A8",),
                count(I.running) == when(S.session == "held", 1, 0))),
        mutex=Mutex("session", "running", SESSION_OPERATIONS, ("A8",),
                    "one session's operations exclude each other: a call's step that enters "
                    "the runtime waits until no other call's runtime holds the session"),
    )


def build_ledger_system(calls: int = 3) -> System:
    """The ``calls`` tool calls of one assistant message, sharing the turn's checkpoint."""
    left = tuple(range(calls + 1))
    one_less = Effect({"unpaired": S.unpaired - 1})
    return System(
        name="ledger_system",
        meaning=f"one assistant message asking for {calls} tool calls, recovered as one turn",
        machine=LEDGER,
        instances=calls,
        shared=("run", "permission"),
        variables=(Variable("unpaired", left, calls,
                            "calls of the latest assistant message with no paired result (L4)"),),
        sync=("register", "crash", "continue"),
        per_instance=("register",),  # each call of the message is a write or a read of its own
        refinements=(
            Refinement("pair", ("L4",), effect=one_less),
            Refinement("recover_pair", ("L4",), effect=one_less),
            # Every call of the message is paired.
            Refinement("continue", ("L4",), guards=(Guard("all_paired", S.unpaired == 0),)),
        ),
        invariants=(SystemInvariant(
            "no_unpaired_call_survives_recovery",
            "the original input continues only when every call of the message is paired",
            ("L4",), ~some(I.state == "continued") | every(I.state == "continued")),),
    )


# The sizes ``settled verify`` explores: two queries and one worker process (whose death
# drops both leases), with later messages and the session's second task: about 2.1 million
# states (1.06 million reduced by symmetry before the second task, 0.71 before later
# messages); ``settled bench`` explores two processes as well.
QUERY_SYSTEM = build_query_system(queries=2, workers=1)
APPROVAL_SYSTEM = build_approval_system()
LEDGER_SYSTEM = build_ledger_system()

# Every declared system, by the name the command line uses.
SYSTEMS: dict[str, System] = {"query": QUERY_SYSTEM, "approval": APPROVAL_SYSTEM,
                               "ledger": LEDGER_SYSTEM}
