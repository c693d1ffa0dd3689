"""The tool-call ledger (PROTOCOL.md rules L1–L5) as one table.

Theory of operation
-------------------
One configuration describes ONE tool call of an assistant message, from the
moment the checkpointed message asks for it until the original input
continues with its result. The calls of one message share the turn's
checkpoint and recover together; ``model/systems.py`` composes them into the
``ledger`` system. The chat checkpoint says *where* to resume; only the
ledger says *which actions happened*.

- ``register`` saves the ledger entry (SDK call id → ``operation_id``,
  origin run, parameter fingerprint) together with the checkpoint that holds
  the assistant message, in one transaction (L1). The ``operation_id`` is
  minted there, once.
- ``run`` is an in-app tool: for a write, the business change and its
  success receipt commit in ONE transaction (L1), so there is no state
  "changed but not receipted". A read-only lookup records its receipt with
  the lookup it answers. ``reject`` is an explicit refusal (the business
  rules, or a revoked read permission): it changes nothing and leaves a
  rejection receipt. ``pair`` checkpoints the tool result.
- ``crash`` is a restart under a new ``run_id``: it changes no fact except
  the run (L2). Every registered, unpaired call of the latest assistant
  message is then ``recovering`` — including when the checkpoint already
  ends with another call's result (L4).
- Recovery looks at the receipt FIRST (L4, L5): success → success result,
  rejection → error result. Without a receipt a write continues under its
  original ``operation_id`` (``resume``), unless the tool's contract was
  upgraded since registration: then the call that may have run is paired as
  ``unknown``, never as "invalid parameters, not executed" (L5). A read-only
  call without a receipt re-checks the current read permission: granted →
  it continues under its original ``operation_id``; revoked → an error
  result (a read changed nothing, so nothing is left unknown).
- ``reregister`` is the SDK delivering the same call id again: the same
  parameters return the existing entry, other parameters are an
  ``idempotency_conflict`` that changes nothing (L3) — the guard refuses it.
- ``continue`` lets the original input go on with the call's result; in the
  system it fires on every call of the message at once and only when none is
  unpaired (L4).

``result`` has two values the declared protocol never produces and the
invariants forbid: ``not_executed`` for a registered call (L5), and (in
``ran_under``) ``new``/``both`` for an operation_id minted twice (L2). They are
in the domains so an implementation that produces them is caught in the
model's own terms. ``executions`` counts applications of the call's effect
(business changes of a write, recorded runs of a lookup), up to 2 so a
double execution is representable.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from ._core import Protocol
from ._expr import STATE, B, P, T, V, unchanged, when
from ._parts import Effect, Guard, Invariant, Param, State, StepProperty, Transition, Variable

__all__ = ["INVARIANTS", "LEDGER", "STEP_PROPERTIES", "LedgerState", "build_ledger_machine"]


class LedgerState(StrEnum):
    """Where one tool call of an assistant message is."""

    REQUESTED = "requested"
    REGISTERED = "registered"
    RECEIPTED = "receipted"
    RECOVERING = "recovering"
    PAIRED = "paired"
    CONTINUED = "continued"


REQUESTED, REGISTERED, RECEIPTED, RECOVERING, PAIRED, CONTINUED = tuple(LedgerState)

STATES: Final = (
    State(REQUESTED, "the assistant message asks for the call; no ledger entry yet"),
    State(REGISTERED, "the ledger entry (operation_id, origin run, fingerprint) is saved with "
          "the checkpoint; no receipt (L1)"),
    State(RECEIPTED, "a receipt is durable (success, committed with the business change, or an "
          "explicit rejection); no result is paired yet (L1)"),
    State(RECOVERING, "a restart found the call unpaired in the latest assistant message (L4)"),
    State(PAIRED, "a tool result for the call is in the checkpoint (L4)"),
    State(CONTINUED, "the original input continued with the call's result (L4)", terminal=True),
)

KINDS: Final = ("write", "read")
OPERATION_IDS: Final = ("none", "original", "new")
RUNS: Final = ("origin", "resumed")
RECEIPTS: Final = ("none", "success", "rejected")
RESULTS: Final = ("none", "success", "error", "unknown", "not_executed")
RAN_UNDER: Final = ("none", "original", "new", "both")
CONTRACTS: Final = ("current", "upgraded")
PERMISSIONS: Final = ("granted", "revoked")
NOT_TERMINAL: Final = (REQUESTED, REGISTERED, RECEIPTED, RECOVERING, PAIRED)
UNPAIRED_REGISTERED: Final = (REGISTERED, RECEIPTED, RECOVERING)


WRITE = Guard("write", V.kind == "write")
READ = Guard("read", V.kind == "read")
NO_RECEIPT = Guard("no_receipt", V.receipt == "none")
SUCCESS_RECEIPT = Guard("success_receipt", V.receipt == "success")
REJECTION_RECEIPT = Guard("rejection_receipt", V.receipt == "rejected")
CURRENT = Guard("contract_current", V.contract == "current")
UPGRADED = Guard("contract_upgraded", V.contract == "upgraded")
GRANTED = Guard("read_granted", V.permission == "granted")
REVOKED = Guard("read_revoked", V.permission == "revoked")
# The tool writes, or the session may read.
MAY_RUN = Guard("may_run", (V.kind == "write") | (V.permission == "granted"))
# The tool writes (the business rules refuse), or the read permission was revoked.
REFUSED = Guard("refused", (V.kind == "write") | (V.permission == "revoked"))
# A write under its original contract, or a read the session may still make.
MAY_CONTINUE = Guard("may_continue", ((V.kind == "write") & (V.contract == "current"))
                     | ((V.kind == "read") & (V.permission == "granted")))
SAME_PARAMS = Guard("same_params", P.params == "same")

# ``ran_under`` after one more execution under the call's current operation_id.
RAN = when((V.ran_under == "none") | (V.ran_under == V.operation_id), V.operation_id, "both")


def build_ledger_machine() -> Protocol:
    """Declare the ledger machine: one tool call of an assistant message."""
    kind = Param("kind", KINDS, "whether the tool is an in-app write or a read-only lookup")
    params = Param("params", ("same", "other"),
                   "whether the redelivered call id carries the registered parameters")
    transitions = (
        Transition("register", (REQUESTED,), REGISTERED,
                   "save the ledger entry (call id -> operation_id, origin run, fingerprint) and "
                   "the checkpoint holding the assistant message in one transaction",
                   ("L1", "L2"), params=(kind,),
                   # Registered under the contract deployed now.
                   effect=Effect({"operation_id": "original", "kind": P.kind,
                                  "contract": "current"})),
        Transition("reregister", (REGISTERED, RECEIPTED, RECOVERING, PAIRED), None,
                   "the same call id delivered again: the same parameters return the entry; other "
                   "parameters are idempotency_conflict and change nothing", ("L3",),
                   guards=(SAME_PARAMS,), params=(params,)),
        Transition("run", (REGISTERED,), RECEIPTED,
                   "run the in-app tool under the operation_id: the business change (or the "
                   "lookup) and its success receipt commit in one transaction", ("L1",),
                   guards=(MAY_RUN,), actor="platform", observed_as=None,
                   effect=Effect({"receipt": "success", "executions": V.executions + 1,
                                  "ran_under": RAN})),
        Transition("reject", (REGISTERED,), RECEIPTED,
                   "the business rules (or a revoked read permission) refuse: nothing changes, "
                   "a rejection receipt is recorded", ("L1", "L4"), guards=(REFUSED,),
                   effect=Effect({"receipt": "rejected"}), actor="platform"),
        Transition("pair", (RECEIPTED,), PAIRED,
                   "checkpoint the success result of a success receipt", ("L4",),
                   guards=(SUCCESS_RECEIPT,),
                   effect=Effect({"result": "success"})),
        Transition("pair", (RECEIPTED,), PAIRED,
                   "checkpoint the error result of an explicit rejection", ("L4",),
                   guards=(REJECTION_RECEIPT,), effect=Effect({"result": "error"})),
        # ---- crashes and the world (L2, L5) -------------------------------------------
        Transition("crash", (REQUESTED,), None,
                   "restart under a new run_id before the message is registered: the run "
                   "changes, and the call has no ledger entry to log it in", ("L2",),
                   effect=Effect({"run": "resumed"}), observed_as=None,
                   actor="environment"),
        Transition("crash", (PAIRED,), None,
                   "restart under a new run_id: the run changes, nothing else (L2)",
                   ("L2",), effect=Effect({"run": "resumed"}), observed_as="restart",
                   actor="environment"),
        Transition("crash", UNPAIRED_REGISTERED, RECOVERING,
                   "restart under a new run_id: the unpaired registered call is recovered; a "
                   "commit that happened stays, one that did not left nothing", ("L2", "L4"),
                   effect=Effect({"run": "resumed"}), observed_as="restart", actor="environment"),
        Transition("contract_upgraded", NOT_TERMINAL, None,
                   "a deployment upgrades the tool's contract", ("L5",), guards=(CURRENT,),
                   effect=Effect({"contract": "upgraded"}), observed_as=None,
                   actor="environment"),
        Transition("permission_revoked", NOT_TERMINAL, None,
                   "the session's read permission is revoked", ("L5",), guards=(GRANTED,),
                   effect=Effect({"permission": "revoked"}), observed_as=None,
                   actor="environment"),
        # ---- recovery: receipt first, then contract and permission (L4, L5) -------------
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "a success receipt: pair a success result, whatever the contract is now",
                   ("L4", "L5"), guards=(SUCCESS_RECEIPT,),
                   effect=Effect({"result": "success"})),
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "an explicit rejection: pair an error result", ("L4", "L5"),
                   guards=(REJECTION_RECEIPT,), effect=Effect({"result": "error"})),
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "no receipt and the write's contract was upgraded: the call may have run, so "
                   "its result is unknown, never 'invalid parameters, not executed'", ("L5",),
                   guards=(NO_RECEIPT, WRITE, UPGRADED),
                   effect=Effect({"result": "unknown"})),
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "no receipt, a read-only tool, and the read permission is revoked: an error "
                   "result (the lookup changed nothing)", ("L5",),
                   guards=(NO_RECEIPT, READ, REVOKED),
                   effect=Effect({"result": "error"})),
        Transition("resume", (RECOVERING,), REGISTERED,
                   "no receipt: the call continues under its original operation_id (a read "
                   "re-checked the current read permission); never a new request", ("L2", "L4",
                                                                                     "L5"),
                   guards=(NO_RECEIPT, MAY_CONTINUE)),
        Transition("continue", (PAIRED,), CONTINUED,
                   "the original input continues with the call's result", ("L4",)),
    )
    return Protocol(
        name="ledger",
        meaning="the tool calls of one assistant message, their ledger entries and receipts, "
                "and the recovery of the whole turn",
        states=STATES, initial=REQUESTED, variables=_variables(), transitions=transitions,
        invariants=INVARIANTS, step_properties=STEP_PROPERTIES, refusable=REFUSABLE,
        actors={"worker": "the agent runtime", "platform": "the business store",
                "environment": "restarts, deployments, permission changes"})


# What a caller may be refused, changing nothing: each is refused before any write. A
# redelivered call id with other parameters (L3), pairing a call with no receipt or twice,
# continuing a turn with an unpaired call. (``run``/``reject`` and ``resume``/``recover_pair``
# are one runtime call each, whose outcome the world decides, so they are not probed.)
REFUSABLE = frozenset({"reregister", "pair", "continue"})


def _variables() -> tuple[Variable, ...]:
    return (
        Variable("kind", KINDS, "write", "the tool's kind, fixed at registration"),
        Variable("operation_id", OPERATION_IDS, "none",
                 "the operation_id the ledger maps the call id to (L1, L2)"),
        Variable("run", RUNS, "origin", "the session's run: the one that registered the turn, "
                 "or a later one that resumed it (L2)"),
        Variable("receipt", RECEIPTS, "none", "the call's receipt (L1)"),
        Variable("result", RESULTS, "none", "the tool result paired in the checkpoint (L4)"),
        # The business store (and the lookup receipts) hold these, not the runtime's log.
        Variable("executions", (0, 1, 2), 0, "applications of the call's effect (L1)",
                 logged=False),
        Variable("ran_under", RAN_UNDER, "none",
                 "the operation_ids the call was executed under (L2)", logged=False),
        Variable("contract", CONTRACTS, "current", "whether the tool's deployed contract "
                 "changed since the call's registration (L5)", logged=False),
        Variable("permission", PERMISSIONS, "granted", "the session's read permission (L5)",
                 logged=False),
    )


INVARIANTS: Final = (
    Invariant("one_operation_id_per_call", "no call is executed under two operation_ids",
              ("L1", "L2"), V.ran_under != "both"),
    Invariant("executed_at_most_once", "a call's effect is applied at most once",
              ("L1", "L4"), V.executions <= 1),
    Invariant("change_commits_with_receipt",
              "an effect was applied exactly when a success receipt exists", ("L1",),
              V.executions == when(V.receipt == "success", 1, 0)),
    Invariant("result_matches_receipt", "no paired result contradicts its receipt",
              ("L4", "L5"),
              ((V.receipt != "success") | V.result.isin("none", "success"))
              & ((V.receipt != "rejected") | V.result.isin("none", "error"))
              & ((V.result != "success") | (V.receipt == "success"))),
    Invariant("never_not_executed_if_may_have_run",
              "a registered call (it may have run) is never reported 'not executed'", ("L5",),
              (V.operation_id == "none") | (V.result != "not_executed")),
    Invariant("paired_means_result", "a call has a result exactly when it is paired", ("L4",),
              STATE.isin(PAIRED, CONTINUED) == (V.result != "none")),
    Invariant("receipt_needs_entry", "a receipt belongs to a registered call", ("L1",),
              (V.receipt == "none") | (V.operation_id != "none")),
    Invariant("original_operation_id", "a registered call keeps the operation_id minted at "
              "registration", ("L2",),
              V.operation_id == when(STATE == REQUESTED, "none", "original")),
)

# Every variable but the run: what a restart leaves alone.
_BUT_RUN: Final = tuple(v.name for v in _variables() if v.name != "run")

STEP_PROPERTIES: Final = (
    StepProperty("run_change_keeps_operation_id", "a run_id change never changes an operation_id",
                 ("L2",), unchanged("run") | unchanged("operation_id")),
    StepProperty("operation_id_minted_once", "an operation_id, once minted, never changes",
                 ("L2",), (B.operation_id == "none") | unchanged("operation_id")),
    StepProperty("crash_changes_only_the_run", "a restart changes the run and nothing else",
                 ("L2",), (T.trigger != "crash") | unchanged(*_BUT_RUN)),
    StepProperty("conflict_changes_nothing", "a redelivered call id changes nothing", ("L3",),
                 (T.trigger != "reregister") | unchanged()),
    StepProperty("receipt_is_kept", "a receipt, once recorded, stays", ("L1", "L4"),
                 (B.receipt == "none") | unchanged("receipt")),
    StepProperty("paired_result_stands", "a paired result is never replaced", ("L4",),
                 (B.result == "none") | unchanged("result")),
    StepProperty("recovery_runs_nothing", "pairing from a receipt runs nothing again",
                 ("L4",), ~T.trigger.isin("recover_pair", "resume", "pair")
                 | unchanged("executions", "ran_under")),
)

LEDGER: Final = build_ledger_machine()
