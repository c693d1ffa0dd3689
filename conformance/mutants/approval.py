# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""Approval mutants: the runtime, the business store or the lookup, each wrong in one rule.

Every mutant is a small subclass (or, for the reconciler, a variant of its one
function) written the way an engineer might plausibly get it wrong, and an
adapter that drives it. None of them is reachable from ``impl/``.

The mutants live by the part they break: ``approval_runtime.py`` (the runtime) and
``approval_store.py`` (the business store, and the lookup). This module is the catalogue:
each mutant's name, its rule and the adapter that drives it.
"""

from __future__ import annotations

from typing import Any

from settled.conformance._bundled._approval_adapter import ApprovalAdapter

from . import Mutant
from .approval_runtime import (
    RECOVERY_WINDOW,
    A1RecoveryWithANewToken,
    A2DeadlineRearmedOnRestart,
    A2RecoveryPassSkipsOldCalls,
    A3FailedLookupIsAbsent,
    A4ResultRebuiltFromCurrentStock,
    A5RetryAfterAbsent,
    A6NeverEntersHandlerTwice,
    A7CancelSettlesStartedCall,
    L5RecoveryIgnoresContractChange,
    R1RestartExpiresUnshown,
    R2ExpiredApprovalApproves,
    R3ApprovedCallProposedAgain,
    R5RecoveryRerunsWithoutLookup,
    R6RestartRefreshesResult,
    V1DisplayDecidesRecovery,
    W5ArgumentsNotNormalized,
    W8PurgeForgetsInFlight,
)
from .approval_store import (
    R4ChangeCommittedEarly,
    W1RecordWithoutToolName,
    W2ReplayAppliesAgain,
    W4NewTokenDeduplicatedByArguments,
    W6RecordInItsOwnTransaction,
    W7DraftOrderedAgain,
    _R4Runtime,
    _W1Runtime,
    _W2Runtime,
    _W6Runtime,
    lookup_by_token_only,
    runtime_opening,
)

__all__ = [
    "MUTANTS",
    "RECOVERY_WINDOW",
    "A1RecoveryWithANewToken",
    "A2DeadlineRearmedOnRestart",
    "A2RecoveryPassSkipsOldCalls",
    "A3FailedLookupIsAbsent",
    "A4ResultRebuiltFromCurrentStock",
    "A5RetryAfterAbsent",
    "A6NeverEntersHandlerTwice",
    "A7CancelSettlesStartedCall",
    "L5RecoveryIgnoresContractChange",
    "R1RestartExpiresUnshown",
    "R2ExpiredApprovalApproves",
    "R3ApprovedCallProposedAgain",
    "R4ChangeCommittedEarly",
    "R5RecoveryRerunsWithoutLookup",
    "R6RestartRefreshesResult",
    "V1DisplayDecidesRecovery",
    "W1RecordWithoutToolName",
    "W2ReplayAppliesAgain",
    "W4NewTokenDeduplicatedByArguments",
    "W5ArgumentsNotNormalized",
    "W6RecordInItsOwnTransaction",
    "W7DraftOrderedAgain",
    "W8PurgeForgetsInFlight",
    "lookup_by_token_only",
    "runtime_opening",
]


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
