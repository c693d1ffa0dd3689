# mypy sees settled.impl as Any (it cannot follow the editable install's import hook),
# and every mutant here subclasses an implementation class on purpose.
# mypy: disallow-subclassing-any=False
"""The query machine's bug catalogue: the bundled implementation, each time broken once.

Every mutant is a small subclass of the real :class:`~settled.impl.query._worker.Worker`
or :class:`~settled.impl.query._store.QueryStore` that overrides the one method
where the bug would live, written the way an engineer who missed that rule
would plausibly write it (the docstring says how). The reference adapter
drives it unchanged: a mutant only sets ``worker_class`` or ``store_class``.
Nothing in ``impl/`` knows about mutants.

The mutants live by the part they break: ``query_worker.py`` (the worker),
``query_confirm.py`` (the store's confirmation) and ``query_store.py`` (the store's
drafts, reruns, status and cancels). This module is the catalogue: each mutant's name,
its rule and the adapter that drives it.

The kit must kill every one of them; ``settled mutants`` and
``tests/test_mutants.py`` check that it does.
"""

from __future__ import annotations

from typing import cast

from settled.conformance._bundled._query_adapter import QueryAdapter
from settled.impl.query._store import QueryStore
from settled.impl.query._worker import Worker

from . import Mutant
from .query_confirm import (
    AuthorizationFollowsTask,
    BudgetAttributedLater,
    DraftVersionNotChecked,
    FailedCheckAwaits,
    NotificationAuthorizes,
    PartialQuoteAccepted,
    PendingCheckedAfterQueueing,
    PendingMessageIgnored,
    ReconfirmRequeues,
    RedeliveryTakesNewClock,
    SupersededDraftConfirmable,
)
from .query_store import (
    CancelWithoutEvidence,
    ConditionUpdateKeepsDrafts,
    QueuedCancelOnlyRequested,
    RerunDeduplicatedBySql,
    RevisionKeepsOldDraft,
    StatusShowsResult,
    StoppedRunCancels,
    VersionCountsEveryTask,
)
from .query_worker import (
    BusyIsRejection,
    CancelOverridesSuccess,
    FailedCancelDropsRequest,
    FailedCancelIsCancelled,
    FourthSubmission,
    LateResultMovesPhase,
    LookupTimeoutIsNotFound,
    LostResponseIsFailed,
    NotificationClockIsNow,
    PollsAfterNotFound,
    RecoveryResubmits,
    RejectionIsUnknown,
    RetryUnderNewId,
    SqlTaggedBeforeSubmit,
    StaleEpochWriteAccepted,
    SubmittingAfterCall,
    WorkerClearsCancelIntent,
)

__all__ = [
    "MUTANTS",
    "AuthorizationFollowsTask",
    "BudgetAttributedLater",
    "BusyIsRejection",
    "CancelOverridesSuccess",
    "CancelWithoutEvidence",
    "ConditionUpdateKeepsDrafts",
    "DraftVersionNotChecked",
    "FailedCancelDropsRequest",
    "FailedCancelIsCancelled",
    "FailedCheckAwaits",
    "FourthSubmission",
    "LateResultMovesPhase",
    "LookupTimeoutIsNotFound",
    "LostResponseIsFailed",
    "NotificationAuthorizes",
    "NotificationClockIsNow",
    "PartialQuoteAccepted",
    "PendingCheckedAfterQueueing",
    "PendingMessageIgnored",
    "PollsAfterNotFound",
    "QueuedCancelOnlyRequested",
    "ReconfirmRequeues",
    "RecoveryResubmits",
    "RedeliveryTakesNewClock",
    "RejectionIsUnknown",
    "RerunDeduplicatedBySql",
    "RetryUnderNewId",
    "RevisionKeepsOldDraft",
    "SqlTaggedBeforeSubmit",
    "StaleEpochWriteAccepted",
    "StatusShowsResult",
    "StoppedRunCancels",
    "SubmittingAfterCall",
    "SupersededDraftConfirmable",
    "VersionCountsEveryTask",
    "WorkerClearsCancelIntent",
]


# --------------------------------------------------------------------------- the catalogue
def _adapter(part: type[Worker] | type[QueryStore]) -> type[QueryAdapter]:
    """The reference adapter driving ``part`` in place of the real worker or store."""
    slot = "worker_class" if issubclass(part, Worker) else "store_class"
    return cast(type[QueryAdapter], type(f"{part.__name__}Adapter", (QueryAdapter,), {slot: part}))


def _mutant(name: str, part: type[Worker] | type[QueryStore]) -> Mutant:
    rule = name.split("-", 1)[0]
    doc = (part.__doc__ or "").strip()
    return Mutant(name=name, rule=rule, machine="query", description=doc.split("\n", 1)[0],
                  adapter_class=_adapter(part))


MUTANTS: list[Mutant] = [
    _mutant("Q14-lost-response-recorded-as-failed", LostResponseIsFailed),
    _mutant("Q1-retry-under-new-query-id", RetryUnderNewId),
    _mutant("Q15-lookup-timeout-is-not-found", LookupTimeoutIsNotFound),
    _mutant("Q16-fourth-submission-allowed", FourthSubmission),
    _mutant("Q13-recovery-resubmits-without-lookup", RecoveryResubmits),
    _mutant("Q12-submitting-committed-after-call", SubmittingAfterCall),
    _mutant("Q21-cancel-without-platform-evidence", CancelWithoutEvidence),
    _mutant("Q21-cancel-overrides-platform-success", CancelOverridesSuccess),
    _mutant("Q21-failed-cancel-call-recorded-as-cancelled", FailedCancelIsCancelled),
    _mutant("Q21-failed-cancel-call-drops-the-request", FailedCancelDropsRequest),
    _mutant("Q11-stale-epoch-write-accepted", StaleEpochWriteAccepted),
    _mutant("Q8-reconfirmation-queues-again", ReconfirmRequeues),
    _mutant("Q5-partial-quote-accepted", PartialQuoteAccepted),
    _mutant("Q24-late-result-moves-newer-phase", LateResultMovesPhase),
    _mutant("Q25-notification-authorizes", NotificationAuthorizes),
    _mutant("T2-condition-update-keeps-drafts", ConditionUpdateKeepsDrafts),
    _mutant("Q2-rerun-deduplicated-by-sql", RerunDeduplicatedBySql),
    _mutant("Q26-status-shows-result-to-confirming-message", StatusShowsResult),
    _mutant("M1-redelivery-takes-recovery-clock", RedeliveryTakesNewClock),
    _mutant("M2-notification-stamped-when-queued", NotificationClockIsNow),
    _mutant("Q18-submitted-sql-differs-from-confirmed", SqlTaggedBeforeSubmit),
    _mutant("Q17-rejection-recorded-as-unknown", RejectionIsUnknown),
    _mutant("Q17-busy-platform-recorded-as-rejection", BusyIsRejection),
    _mutant("Q19-worker-clears-cancel-intent", WorkerClearsCancelIntent),
    _mutant("Q20-queued-cancel-only-requested", QueuedCancelOnlyRequested),
    _mutant("Q3-failed-check-awaits-confirmation", FailedCheckAwaits),
    _mutant("Q4-draft-version-not-checked", DraftVersionNotChecked),
    _mutant("Q10-pending-message-ignored", PendingMessageIgnored),
    _mutant("Q23-authorization-follows-task", AuthorizationFollowsTask),
    _mutant("T3-revision-keeps-old-draft", RevisionKeepsOldDraft),
    _mutant("Q7-confirming-message-not-recorded", BudgetAttributedLater),
    _mutant("Q9-pending-message-checked-after-queueing", PendingCheckedAfterQueueing),
    _mutant("Q22-stopped-run-requests-cancel", StoppedRunCancels),
    _mutant("T1-version-counted-over-the-session", VersionCountsEveryTask),
    _mutant("Q6-superseded-draft-confirmable", SupersededDraftConfirmable),
    _mutant("Q16-polls-after-explicit-not-found", PollsAfterNotFound),
]
