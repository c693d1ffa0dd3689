"""Progress properties and the fairness they assume, for every machine and system.

Theory of operation
-------------------
Each declaration below says what must eventually happen (``premise ~>
goal``) and which steps the world is assumed to take eventually. The
fairness is the weakest we found that makes the protocol live, so a
reviewer can read each assumption as a promise the deployment must keep:

* the runtime (``worker`` actor) does not stop while it has something to
  do (weak fairness, as a group: some step of it is taken);
* the platform or business store finishes what it was given (weak);
* a lookup (query) tried again and again is eventually answered, although
  a fault may answer any one try (strong fairness: a lookup that times out
  forever is an outage, not a protocol run);
* the clock moves: a deadline eventually passes (weak, approval);
* crashes, faults, deployments, a person's choices and an SDK's
  redeliveries are never required to happen (``never``);
* restarts eventually stop (``finite``, ledger): a turn restarted forever
  cannot be paired by any protocol. (The query and approval machines bound
  their crashes already: a crash needs a lease epoch left, a re-run is
  used once.)

The functions take the machine (or system) so that a variant built for a
test (a mutant) is held to the same declaration, validated against it.
"""

from __future__ import annotations

from ._core import Protocol
from ._liveness import (
    EVERY,
    FINITE,
    NEVER,
    SOME,
    STRONG,
    WEAK,
    Cmp,
    Fairness,
    Liveness,
    Pred,
    Progress,
    Steps,
    declare,
)
from ._system import System
from .approval import APPROVAL
from .ledger import LEDGER
from .query import LIVE, QUERY, TERMINAL
from .systems import SYSTEMS

QUERY_TERMINAL = tuple(sorted(TERMINAL))
ANSWERED_LOOKUPS = ("lookup_running", "lookup_succeeded", "lookup_failed", "lookup_cancelled",
                    "lookup_not_found")


WORKERS = Steps(actors=("worker",))


def _query_fairness(workers: Steps = WORKERS) -> tuple[Fairness, ...]:
    return (
        Fairness("worker", WEAK, workers,
                 "a worker process with something to do (claim, submit, look up, resubmit, "
                 "cancel on the platform) does it", ("Q11", "Q12", "Q13")),
        Fairness("platform", WEAK, Steps(actors=("platform",)),
                 "the platform checks a draft and finishes a query it runs", ("Q3", "Q18")),
        Fairness("answered_lookup", STRONG, Steps(triggers=ANSWERED_LOOKUPS),
                 "a lookup tried again and again is eventually answered (running, terminal or "
                 "not found), though any one try may time out", ("Q15",)),
        Fairness("crashes", NEVER, Steps(actors=("environment",)),
                 "a worker process may die at any moment, or never", ("Q11", "Q13")),
        Fairness("user", NEVER, Steps(actors=("user",)),
                 "the user and the agent's tools may confirm, cancel, clarify or rerun, or not",
                 ("Q19", "Q22")),
    )


def query_liveness(machine: Protocol = QUERY) -> Liveness:
    return declare(machine, _query_fairness(), (
        Progress("confirmed_settles", Pred(LIVE), Pred(QUERY_TERMINAL),
                 "a confirmed query ends in a terminal state once the platform answers",
                 ("Q7", "Q12", "Q15", "Q16")),
        Progress("unknown_resolved", Pred(("submission_unknown",)),
                 Pred(("submission_unknown",), outside=True),
                 "an unknown submission is resolved once a lookup gets an answer",
                 ("Q14", "Q15")),
        Progress("not_found_resubmitted", Pred(("not_found",)),
                 Pred(("submitting", *QUERY_TERMINAL)),
                 "after an explicit not found the query is submitted again with the same id, "
                 "or ends (retries exhausted, or cancelled on the platform's evidence)",
                 ("Q16", "Q21")),
    ))


APPROVAL_TERMINAL = tuple(sorted(s.name for s in APPROVAL.states if s.terminal))


def approval_liveness(machine: Protocol = APPROVAL) -> Liveness:
    return declare(machine, (
        Fairness("runtime", WEAK, Steps(actors=("worker",)),
                 "the approval runtime with something to do (show, expire, execute, recover, "
                 "answer) does it", ("A2", "A4", "R6")),
        Fairness("business_store", WEAK, Steps(actors=("platform",)),
                 "the business store commits or refuses a call it runs", ("W6",)),
        Fairness("clock", WEAK, Steps(triggers=("deadline_passes",)),
                 "time passes: a deadline ahead eventually passes", ("A2",)),
        Fairness("crashes", NEVER, Steps(triggers=(
            "crash_before_shown", "restart_while_pending", "crash_before_handler",
            "crash_before_commit", "crash_after_commit", "crash_before_answer",
            "crash_while_recovering", "contract_changed", "retention_purge")),
                 "crashes, restarts and deployments may happen or not", ("R1", "R4", "A4")),
        Fairness("people", NEVER, Steps(actors=("user",)),
                 "a person may approve, reject, cancel or reconcile, or not", ("A2", "A7")),
    ), (
        Progress("approval_decided_or_expired", Pred(("pending_approval",)),
                 Pred(("pending_approval",), outside=True),
                 "a pending approval is decided, cancelled, or expires at its deadline",
                 ("A2", "R2")),
        Progress("uncertain_write_resolved", Pred(("recovering",)),
                 Pred(("recovering",), outside=True),
                 "an uncertain write is resolved by the reconciler: found, absent (re-run or "
                 "cancelled), or unknown for a person", ("A3", "A4")),
        Progress("result_answered", Pred(("result_checkpointed",)), Pred(("answered",)),
                 "a checkpointed result is answered", ("R6",)),
        Progress("started_write_settles", Pred(("executing", "committed")),
                 Pred(("executing", "committed"), outside=True),
                 "a started write is answered, refused or recovered, even when a cancel "
                 "arrived after it started: the cancel cannot undo a commit, and the "
                 "runtime's recovery pass reports the call's outcome as the business store "
                 "recorded it", ("A7", "A8", "R5", "A4")),
    ))


def ledger_liveness(machine: Protocol = LEDGER) -> Liveness:
    return declare(machine, (
        Fairness("runtime", WEAK, Steps(triggers=("register", "pair", "recover_pair", "resume",
                                                  "continue")),
                 "the agent runtime registers, pairs, recovers and continues the turn",
                 ("L1", "L4")),
        Fairness("business_store", WEAK, Steps(actors=("platform",)),
                 "an in-app tool runs or is refused", ("L1",)),
        Fairness("restarts", FINITE, Steps(triggers=("crash",)),
                 "restarts eventually stop: a turn restarted forever is never paired, and no "
                 "protocol can help that", ("L2", "L4")),
        Fairness("world", NEVER, Steps(triggers=("crash", "contract_upgraded",
                                                 "permission_revoked", "reregister")),
                 "restarts, deployments, revoked permissions and redelivered call ids may "
                 "happen or not", ("L2", "L3", "L5")),
    ), (
        Progress("restart_pairs_every_call", Pred(("recovering",)),
                 Pred(("paired", "continued")),
                 "after a restart every unpaired tool call is paired", ("L4", "L5")),
        Progress("registered_call_paired", Pred(("registered", "receipted")),
                 Pred(("paired", "continued")),
                 "a registered call is paired with its result", ("L1", "L4")),
        Progress("paired_continues", Pred(("paired",)), Pred(("continued",)),
                 "the original input continues with the call's result", ("L4",)),
    ))


MACHINE_LIVENESS = {"query": query_liveness, "approval": approval_liveness,
                    "ledger": ledger_liveness}


def query_system_liveness(system: System) -> Liveness:
    # In the system the session's own attribution step is a worker's too; it is fair on its
    # own below, so the query's worker steps are named: attributing messages forever must not
    # count as a worker that acts on the queries.
    worker_steps = tuple(dict.fromkeys(t.trigger for t in system.machine.transitions
                                       if t.actor == "worker"))
    return declare(system, (
        *_query_fairness(Steps(actors=("worker",), triggers=worker_steps)),
        Fairness("attribution", WEAK, Steps(triggers=("message_attributed",)),
                 "a pending message is eventually attributed to a task", ("Q10",)),
    ), (
        Progress("every_confirmed_query_settles", Pred(LIVE, instances=SOME),
                 Pred(LIVE, outside=True, instances=EVERY),
                 "once a query of the task is confirmed, every confirmed query of the task "
                 "ends in a terminal state", ("Q7", "Q11", "Q15", "Q23")),
        Progress("message_attributed", Pred(instances=EVERY, system=(Cmp("message", "==",
                                                                        "pending"),)),
                 Pred(instances=EVERY, system=(Cmp("message", "!=", "pending"),)),
                 "a pending message is attributed, so confirmation is not blocked forever",
                 ("Q9", "Q10")),
    ))


def approval_system_liveness(system: System) -> Liveness:
    live = approval_liveness(system.machine)
    return declare(system, (
        *live.fairness,
        # Without it, a person resuming another call's lookups for ever keeps the session's
        # lock busy often enough to starve a waiting expiry (a lasso, see the tests).
        Fairness("people_stop_resuming", FINITE, Steps(triggers=("resume_lookup",)),
                 "a person asks for another lookup only finitely often before reconciling "
                 "(each resumed recovery takes the session's lock)", ("A4", "A8")),
    ), (
        Progress("every_pending_approval_settles", Pred(("pending_approval",), instances=SOME),
                 Pred(("pending_approval",), outside=True, instances=EVERY),
                 "while calls share the session's lock, every pending approval is decided, "
                 "cancelled or expires", ("A2", "A8")),
        Progress("every_recovery_resolved", Pred(("recovering",), instances=SOME),
                 Pred(("recovering",), outside=True, instances=EVERY),
                 "while calls share the session's lock, every uncertain write is resolved by "
                 "the reconciler", ("A3", "A4", "A8")),
    ))


def ledger_system_liveness(system: System) -> Liveness:
    live = ledger_liveness(system.machine)
    return declare(system, live.fairness, (
        Progress("turn_recovered_whole", Pred(("recovering",), instances=SOME),
                 Pred(("recovering", "registered", "receipted"), outside=True,
                      instances=EVERY),
                 "after a restart every unpaired call of the message is paired", ("L4",)),
        Progress("turn_continues", Pred(("paired",), instances=SOME),
                 Pred(("continued",), instances=EVERY),
                 "once a call is paired, the original input continues with every call's "
                 "result", ("L4",)),
    ))


SYSTEM_LIVENESS = {"query": query_system_liveness, "approval": approval_system_liveness,
                   "ledger": ledger_system_liveness}


# States that wait for a person, per machine: no step fairness requires leaves them (a
# person's choice is never required), so a run that stops there has settled. The
# implementation's quiescence phase (conformance/_lockstep/_quiesce.py) accepts them as
# resting, beside the terminal states.
RESTING: dict[str, tuple[str, ...]] = {
    "query": ("awaiting_confirmation",),  # the user confirms the draft, or not (Q6)
    "approval": ("unknown",),  # a person reconciles or asks for another lookup (A4)
    "ledger": (),
}


# Declared once per machine or system object (a declaration validates itself against the
# whole table; the lockstep's quiescence phase asks for it once per run). The object is kept
# beside its liveness, so that an id is never reused while its entry stands.
_DECLARED: dict[int, tuple[Protocol | System, Liveness]] = {}


def liveness_of(target: Protocol | System) -> Liveness:
    """The declared liveness of a machine or system (or a variant of one), by its name."""
    held = _DECLARED.get(id(target))
    if held is not None and held[0] is target:
        return held[1]
    if isinstance(target, System):
        live = SYSTEM_LIVENESS[target.name.removesuffix("_system")](target)
    else:
        live = MACHINE_LIVENESS[target.name](target)
    _DECLARED[id(target)] = (target, live)
    return live


# Built (and so validated) on import, like the tables.
QUERY_LIVENESS = query_liveness()
APPROVAL_LIVENESS = approval_liveness()
LEDGER_LIVENESS = ledger_liveness()
SYSTEM_LIVENESSES = {name: SYSTEM_LIVENESS[name](s) for name, s in SYSTEMS.items()}
