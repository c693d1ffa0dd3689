"""The rule catalogue of PROTOCOL.md as data: every rule ID with a one-line summary.

Declarations cite these IDs; citing an ID that is not here is a
``DeclarationError``, and the generated spec lists every rule here that no
transition, invariant or test implements as a gap.
"""

from __future__ import annotations

from types import MappingProxyType

RULES = MappingProxyType({
    # Q — query execution
    "Q1": "A query keeps one stable query_id for its whole life; a retry never gets a new id.",
    "Q2": "Re-running the same SQL on purpose is a new query record with a new id.",
    "Q3": "A query starts as a draft the platform has checked; only a passed draft may await confirmation.",
    "Q4": "Executing needs query_id, draft_version, condition_version and instruction_quote, checked separately.",
    "Q5": "instruction_quote must equal the user's whole message; a part or a notification never authorizes.",
    "Q6": "First confirmation checks owner, run rights, condition version, and a checked, pending, unsubmitted, uncancelled draft.",
    "Q7": "Authorization, message mark, budget attribution and execution_state=queued commit in one transaction.",
    "Q8": "Confirming an already confirmed query returns the current state; no second queueing.",
    "Q9": "Messages and confirmations lock the session; an undecided newer message makes confirmation message_pending.",
    "Q10": "Any unattributed pending or failed message blocks first confirmation; unblocking never executes by itself.",
    "Q11": "Each claim increments lease_epoch; a write with an older epoch is rejected.",
    "Q12": "The worker commits queued -> submitting and the submission count before calling the platform.",
    "Q13": "On recovery, submitting means possibly submitted: look up first, never resubmit directly.",
    "Q14": "A lost or broken response after submission is submission_unknown, never failed.",
    "Q15": "From unknown, lookup by the same id: running tracks, terminal records, not found allows resubmit, timeout stays unknown.",
    "Q16": "Resubmit only after explicit not found, no cancel request, same id; at most 3 submissions, else retry exhausted.",
    "Q17": "An explicit platform rejection ends the query failed; a communication error never does.",
    "Q18": "The synthetic platform dedupes by query_id plus payload fingerprint; at most once per query_id.",
    "Q19": "Cancel intent (cancel_state) and execution state are stored separately.",
    "Q20": "A queued query never submitted can be cancelled locally in one transaction.",
    "Q21": "From submitting on, cancel only records a request; cancelled needs platform evidence; success stands.",
    "Q22": "Stopping the agent's run or closing a stream is not a cancel.",
    "Q23": "A query keeps the condition version it was authorized at while the task moves on.",
    "Q24": "A terminal result moves the task's phase only if the task is still at the query's condition version.",
    "Q25": "A result notification carries no user intent and is rejected as authorization.",
    "Q26": "For the confirming message, the status tool returns status only; the notification interprets the result.",
    # T — task conditions and drafts
    "T1": "Condition updates name expected_version; the store merges and saves version+1; stale is rejected.",
    "T2": "A condition update invalidates the task's pending drafts.",
    "T3": "A SQL-only revision names replaces_query_id; a failed new draft does not restore the old one.",
    # M — time
    "M1": "Each message stores its request_clock (UTC instant, business time zone); recovery reuses it.",
    "M2": "A result notification inherits the clock of its budget's message; dates come from the query.",
    # L — tool-call ledger
    "L1": "A tool call id maps to operation_id, origin run, fingerprint and receipt, saved with the checkpoint.",
    "L2": "Resuming uses a new run_id only to prove run rights; call id and operation_id are kept.",
    "L3": "The same call id with other parameters is idempotency_conflict.",
    "L4": "Recovery pairs every unpaired tool call of the latest assistant message from its receipt.",
    "L5": "After a contract upgrade, recovery checks the original fingerprint and receipt before validating.",
    # W — idempotent writes
    "W1": "Every write has a stable client_token; mutation_requests keeps tool, normalized args and result.",
    "W2": "Same token, same normalized arguments: the first result, no second change.",
    "W3": "Same token, different normalized arguments: idempotency_conflict.",
    "W4": "A new token is a new call identity and goes through business validation.",
    "W5": "Normalization encodes business equivalence (trimmed names, merged and sorted quantities).",
    "W6": "Duplicate check, business change and result record commit in one BEGIN IMMEDIATE transaction.",
    "W7": "Object-level de-duplication: an already submitted draft returns the original order.",
    "W8": "Idempotency records have a managed lifetime (retention).",
    # A — approval and recovery
    "A1": "The token is created once, checkpointed before approval is asked; recovery reuses it.",
    "A2": "A pending approval has a deadline a restart does not extend; expired never reaches the handler.",
    "A3": "Reconciler lookup is read-only: found, absent or conflict; a failed lookup is unknown, not absent.",
    "A4": "Recovery: incompatible contract or conflict or failed lookup -> unknown; found -> first result; absent -> re-run.",
    "A5": "After absent the call runs once with retries off; uncertain again -> unknown.",
    "A6": "The handler may run twice; the business commits once.",
    "A7": "Cancel stops what has not started; an unknown write still needs verification; not a rollback.",
    "A8": "Create, approve, resume and cancel of one session are mutually exclusive.",
    # R — crash windows
    "R1": "Crash after the approval checkpoint, before display: pending call survives, business unchanged.",
    "R2": "Restart while pending, then the deadline passes: not extended; the handler is blocked.",
    "R3": "Crash after approved, before the handler: recovery consumes the original call.",
    "R4": "Crash before the business commit: nothing committed; resuming yields exactly one result.",
    "R5": "Crash after commit, before the result checkpoint: recovery finds the result, no second handler run.",
    "R6": "Crash after the result checkpoint, before the answer: only the answer continues.",
    # V — display replay
    "V1": "Display events keyed (run_id, seq) replay without duplicates and never decide business facts.",
})
