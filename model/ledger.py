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

from ._core import (
    Effect,
    Guard,
    Invariant,
    Param,
    Protocol,
    Snapshot,
    State,
    StepProperty,
    Transition,
    Variable,
    Vars,
)

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


def _is(name: str, variable: str, *values: str, text: str) -> Guard:
    return Guard(name, text, lambda v, p: v[variable] in values, reads=(variable,))


WRITE = _is("write", "kind", "write", text="the tool writes")
READ = _is("read", "kind", "read", text="the tool is a read-only lookup")
NO_RECEIPT = _is("no_receipt", "receipt", "none", text="no receipt is recorded")
SUCCESS_RECEIPT = _is("success_receipt", "receipt", "success", text="a success receipt is recorded")
REJECTION_RECEIPT = _is("rejection_receipt", "receipt", "rejected",
                        text="an explicit rejection is recorded")
CURRENT = _is("contract_current", "contract", "current",
              text="the tool's contract is the one the call was registered under")
UPGRADED = _is("contract_upgraded", "contract", "upgraded",
               text="the tool's contract was upgraded since registration")
GRANTED = _is("read_granted", "permission", "granted", text="the session may read")
REVOKED = _is("read_revoked", "permission", "revoked", text="the read permission was revoked")
MAY_RUN = Guard("may_run", "the tool writes, or the session may read",
                lambda v, p: v["kind"] == "write" or v["permission"] == "granted",
                reads=("kind", "permission"))
REFUSED = Guard("refused", "the tool writes (the business rules refuse), or the read "
                "permission was revoked", lambda v, p: v["kind"] == "write"
                or v["permission"] == "revoked", reads=("kind", "permission"))
MAY_CONTINUE = Guard("may_continue", "a write under its original contract, or a read the "
                     "session may still make", lambda v, p: (v["kind"], v["contract"],
                                                             v["permission"]) in (
                         ("write", "current", "granted"), ("write", "current", "revoked"),
                         ("read", "current", "granted"), ("read", "upgraded", "granted")),
                     reads=("kind", "contract", "permission"))
SAME_PARAMS = Guard("same_params", "the redelivered call has the registered parameters",
                    lambda v, p: p["params"] == "same", reads=("params",))


def _ran(v: Vars) -> str:
    """``ran_under`` after one more execution under the call's current operation_id."""
    now = v["operation_id"]
    before = v["ran_under"]
    if before in ("none", now):
        return str(now)
    return "both"


def _set(text: str, **values: object) -> Effect:
    return Effect(text, lambda v, p: dict(values))


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
                   effect=Effect("operation_id := original; kind := the tool's kind; "
                                 "contract := current (registered under the contract deployed now)",
                                 lambda v, p: {"operation_id": "original", "kind": p["kind"],
                                               "contract": "current"})),
        Transition("reregister", (REGISTERED, RECEIPTED, RECOVERING, PAIRED), None,
                   "the same call id delivered again: the same parameters return the entry; other "
                   "parameters are idempotency_conflict and change nothing", ("L3",),
                   guards=(SAME_PARAMS,), params=(params,)),
        Transition("run", (REGISTERED,), RECEIPTED,
                   "run the in-app tool under the operation_id: the business change (or the "
                   "lookup) and its success receipt commit in one transaction", ("L1",),
                   guards=(MAY_RUN,), actor="platform", observed_as=None,
                   effect=Effect("receipt := success; executions += 1; ran_under += operation_id",
                                 lambda v, p: {"receipt": "success",
                                               "executions": v["executions"] + 1,
                                               "ran_under": _ran(v)})),
        Transition("reject", (REGISTERED,), RECEIPTED,
                   "the business rules (or a revoked read permission) refuse: nothing changes, "
                   "a rejection receipt is recorded", ("L1", "L4"), guards=(REFUSED,),
                   effect=_set("receipt := rejected", receipt="rejected"), actor="platform"),
        Transition("pair", (RECEIPTED,), PAIRED,
                   "checkpoint the success result of a success receipt", ("L4",),
                   guards=(SUCCESS_RECEIPT,),
                   effect=_set("result := success", result="success")),
        Transition("pair", (RECEIPTED,), PAIRED,
                   "checkpoint the error result of an explicit rejection", ("L4",),
                   guards=(REJECTION_RECEIPT,), effect=_set("result := error", result="error")),
        # ---- crashes and the world (L2, L5) -------------------------------------------
        Transition("crash", (REQUESTED,), None,
                   "restart under a new run_id before the message is registered: the run "
                   "changes, and the call has no ledger entry to log it in", ("L2",),
                   effect=_set("run := resumed", run="resumed"), observed_as=None,
                   actor="environment"),
        Transition("crash", (PAIRED,), None,
                   "restart under a new run_id: the run changes, nothing else (L2)",
                   ("L2",), effect=_set("run := resumed", run="resumed"), observed_as="restart",
                   actor="environment"),
        Transition("crash", UNPAIRED_REGISTERED, RECOVERING,
                   "restart under a new run_id: the unpaired registered call is recovered; a "
                   "commit that happened stays, one that did not left nothing", ("L2", "L4"),
                   effect=_set("run := resumed", run="resumed"), observed_as="restart", actor="environment"),
        Transition("contract_upgraded", NOT_TERMINAL, None,
                   "a deployment upgrades the tool's contract", ("L5",), guards=(CURRENT,),
                   effect=_set("contract := upgraded", contract="upgraded"), observed_as=None,
                   actor="environment"),
        Transition("permission_revoked", NOT_TERMINAL, None,
                   "the session's read permission is revoked", ("L5",), guards=(GRANTED,),
                   effect=_set("permission := revoked", permission="revoked"), observed_as=None,
                   actor="environment"),
        # ---- recovery: receipt first, then contract and permission (L4, L5) -------------
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "a success receipt: pair a success result, whatever the contract is now",
                   ("L4", "L5"), guards=(SUCCESS_RECEIPT,),
                   effect=_set("result := success", result="success")),
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "an explicit rejection: pair an error result", ("L4", "L5"),
                   guards=(REJECTION_RECEIPT,), effect=_set("result := error", result="error")),
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "no receipt and the write's contract was upgraded: the call may have run, so "
                   "its result is unknown, never 'invalid parameters, not executed'", ("L5",),
                   guards=(NO_RECEIPT, WRITE, UPGRADED),
                   effect=_set("result := unknown", result="unknown")),
        Transition("recover_pair", (RECOVERING,), PAIRED,
                   "no receipt, a read-only tool, and the read permission is revoked: an error "
                   "result (the lookup changed nothing)", ("L5",),
                   guards=(NO_RECEIPT, READ, REVOKED),
                   effect=_set("result := error", result="error")),
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


def _pairs_with_receipt(v: Vars) -> bool:
    receipt, result = v["receipt"], v["result"]
    return ((receipt != "success" or result in ("none", "success"))
            and (receipt != "rejected" or result in ("none", "error"))
            and (result != "success" or receipt == "success"))


INVARIANTS: Final = (
    Invariant("one_operation_id_per_call", "no call is executed under two operation_ids",
              ("L1", "L2"), lambda s, v: v["ran_under"] != "both"),
    Invariant("executed_at_most_once", "a call's effect is applied at most once",
              ("L1", "L4"), lambda s, v: v["executions"] <= 1),
    Invariant("change_commits_with_receipt",
              "an effect was applied exactly when a success receipt exists", ("L1",),
              lambda s, v: v["executions"] == (1 if v["receipt"] == "success" else 0)),
    Invariant("result_matches_receipt", "no paired result contradicts its receipt",
              ("L4", "L5"), lambda s, v: _pairs_with_receipt(v)),
    Invariant("never_not_executed_if_may_have_run",
              "a registered call (it may have run) is never reported 'not executed'", ("L5",),
              lambda s, v: v["operation_id"] == "none" or v["result"] != "not_executed"),
    Invariant("paired_means_result", "a call has a result exactly when it is paired", ("L4",),
              lambda s, v: (s in (PAIRED, CONTINUED)) == (v["result"] != "none")),
    Invariant("receipt_needs_entry", "a receipt belongs to a registered call", ("L1",),
              lambda s, v: v["receipt"] == "none" or v["operation_id"] != "none"),
    Invariant("original_operation_id", "a registered call keeps the operation_id minted at "
              "registration", ("L2",),
              lambda s, v: v["operation_id"] == ("none" if s == REQUESTED else "original")),
)


def _same(b: Snapshot, a: Snapshot, *names: str) -> bool:
    return all(b.v[n] == a.v[n] for n in names)


STEP_PROPERTIES: Final = (
    StepProperty("run_change_keeps_operation_id", "a run_id change never changes an operation_id",
                 ("L2",), lambda b, t, p, a: _same(b, a, "run") or _same(b, a, "operation_id")),
    StepProperty("operation_id_minted_once", "an operation_id, once minted, never changes",
                 ("L2",), lambda b, t, p, a: b.v["operation_id"] == "none"
                 or _same(b, a, "operation_id")),
    StepProperty("crash_changes_only_the_run", "a restart changes the run and nothing else",
                 ("L2",), lambda b, t, p, a: t.trigger != "crash"
                 or all(b.v[k] == a.v[k] for k in b.v if k != "run")),
    StepProperty("conflict_changes_nothing", "a redelivered call id changes nothing", ("L3",),
                 lambda b, t, p, a: t.trigger != "reregister" or (a.v == b.v and a.state == b.state)),
    StepProperty("receipt_is_kept", "a receipt, once recorded, stays", ("L1", "L4"),
                 lambda b, t, p, a: b.v["receipt"] == "none" or _same(b, a, "receipt")),
    StepProperty("paired_result_stands", "a paired result is never replaced", ("L4",),
                 lambda b, t, p, a: b.v["result"] == "none" or _same(b, a, "result")),
    StepProperty("recovery_runs_nothing", "pairing from a receipt runs nothing again",
                 ("L4",), lambda b, t, p, a: t.trigger not in ("recover_pair", "resume", "pair")
                 or _same(b, a, "executions", "ran_under")),
)

LEDGER: Final = build_ledger_machine()
