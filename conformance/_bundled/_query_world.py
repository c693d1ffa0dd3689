"""The world the query adapter (``_query_adapter``) sets up and arranges: the message a
confirmation quotes, the clocks, every fault the model names mapped to its injection on each
transport, the worker call each model step makes, and the per-process templates of a fresh
run's files (a store with its instances' tasks, sessions and messages, and a filled platform)."""

from __future__ import annotations

import functools
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from settled.impl.platform._http import TransportFault
from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.platform._platform_answers import Fault
from settled.impl.query._store import QueryStore
from settled.impl.query._worker import Worker
from settled.model import Protocol, build_query_machine

MESSAGE_TEXT = "only the app channel, then execute"
PART_OF_MESSAGE = "execute"
BAD_SQL = "SELECT channel FROM no_such_table"
REVISED_SQL = "SELECT 1 AS revised"
CLOCK = (datetime(2026, 2, 3, 9, 30, tzinfo=UTC), "Asia/Shanghai")
# A redelivery on recovery arrives on a later day (M1: it must not become the message's clock).
RECOVERY_CLOCK = (datetime(2026, 3, 1, 8, 0, tzinfo=UTC), "Europe/Berlin")
# The whole message with other surrounding whitespace (accepted), in another case (refused).
QUOTE_TEXT = {"whole": MESSAGE_TEXT, "padded": f"  {MESSAGE_TEXT}\n",
              "recased": MESSAGE_TEXT.upper(), "part": PART_OF_MESSAGE}

# What the platform itself does, armed in its ledger before the worker's call, whichever
# transport carries the call: an explicit rejection is the platform's answer, not a fault.
PLATFORM_FAULTS: dict[str, Fault] = {"submit_rejected": Fault.REJECT}
TRANSPORTS = ("inprocess", "http")
# Every failure class the protocol survives, by model trigger and the model's ``fault``
# parameter: armed before the worker's call, on the in-process platform (a one-shot fault
# in its ledger) or at the HTTP transport (a one-shot fault of the server, for one call).
# The model's LOST_FAULTS strike after the platform stored the submission, its
# UNDELIVERED_FAULTS before it saw the request; a lookup changes nothing either way; a
# cancel's faults strike after the platform acted on it (CANCEL_FAULTS ∩ LOST_FAULTS) or
# before it saw it, like a submit's.
FAULTS: dict[str, dict[tuple[str, str], Fault | tuple[str, TransportFault]]] = {
    "inprocess": {
        ("submit_response_lost", "timeout"): Fault.LOST_RESPONSE,
        ("submit_response_lost", "reset"): Fault.RESET_AFTER,
        ("submit_response_lost", "malformed"): Fault.MALFORMED,
        ("submit_undelivered", "timeout"): Fault.UNDELIVERED,
        ("submit_undelivered", "reset"): Fault.RESET_BEFORE,
        ("submit_undelivered", "error"): Fault.ERROR,
        ("submit_undelivered", "busy"): Fault.BUSY,
        ("lookup_timeout", "timeout"): Fault.LOOKUP_TIMEOUT,
        ("lookup_timeout", "reset"): Fault.RESET_AFTER,
        ("lookup_timeout", "malformed"): Fault.MALFORMED,
        ("lookup_timeout", "error"): Fault.ERROR,
        ("lookup_timeout", "busy"): Fault.BUSY,
        ("cancel_response_lost", "timeout"): Fault.LOST_RESPONSE,
        ("cancel_response_lost", "reset"): Fault.RESET_AFTER,
        ("cancel_response_lost", "malformed"): Fault.MALFORMED,
        ("cancel_undelivered", "timeout"): Fault.CANCEL_TIMEOUT,
        ("cancel_undelivered", "reset"): Fault.RESET_BEFORE,
        ("cancel_undelivered", "error"): Fault.ERROR,
        ("cancel_undelivered", "busy"): Fault.BUSY,
    },
    "http": {
        # stored, then: the answer held past the client's timeout, a reset, a bad body
        ("submit_response_lost", "timeout"): ("submit", TransportFault.SLOW_ANSWER),
        ("submit_response_lost", "reset"): ("submit", TransportFault.RESET_AFTER),
        ("submit_response_lost", "malformed"): ("submit", TransportFault.MALFORMED),
        # never seen by the platform: a request that never arrives, a reset, 500, 503
        ("submit_undelivered", "timeout"): ("submit", TransportFault.NEVER_ARRIVES),
        ("submit_undelivered", "reset"): ("submit", TransportFault.RESET_BEFORE),
        ("submit_undelivered", "error"): ("submit", TransportFault.ERROR),
        ("submit_undelivered", "busy"): ("submit", TransportFault.BUSY),
        ("lookup_timeout", "timeout"): ("lookup", TransportFault.SLOW_ANSWER),
        ("lookup_timeout", "reset"): ("lookup", TransportFault.RESET_AFTER),
        ("lookup_timeout", "malformed"): ("lookup", TransportFault.MALFORMED),
        ("lookup_timeout", "error"): ("lookup", TransportFault.ERROR),
        ("lookup_timeout", "busy"): ("lookup", TransportFault.BUSY),
        # the cancel applied (or a finished query left as it was), then no usable answer
        ("cancel_response_lost", "timeout"): ("cancel", TransportFault.SLOW_ANSWER),
        ("cancel_response_lost", "reset"): ("cancel", TransportFault.RESET_AFTER),
        ("cancel_response_lost", "malformed"): ("cancel", TransportFault.MALFORMED),
        # the cancel never seen by the platform
        ("cancel_undelivered", "timeout"): ("cancel", TransportFault.NEVER_ARRIVES),
        ("cancel_undelivered", "reset"): ("cancel", TransportFault.RESET_BEFORE),
        ("cancel_undelivered", "error"): ("cancel", TransportFault.ERROR),
        ("cancel_undelivered", "busy"): ("cancel", TransportFault.BUSY),
    },
}
class NoInjection(LookupError):
    """A model step names a fault this transport has no injection for: the adapter's gap."""


# Method names, looked up on the worker object so a subclass's override is the one called.
WORKER_CALLS: dict[str, str] = {
    "claim": "claim",
    "begin_submit": "begin_submit",
    "submit_answered": "call_submit",
    "submit_response_lost": "call_submit",
    "submit_undelivered": "call_submit",
    "submit_rejected": "call_submit",
    "lookup_running": "lookup",
    "lookup_succeeded": "lookup",
    "lookup_failed": "lookup",
    "lookup_cancelled": "lookup",
    "lookup_not_found": "lookup",
    "lookup_timeout": "lookup",
    "resubmit": "resubmit",
    "confirm_cancel": "settle_cancel",
    "cancel_confirmed": "settle_cancel",
    "cancel_response_lost": "settle_cancel",
    "cancel_undelivered": "settle_cancel",
}


@functools.cache
def _machine(workers: int) -> Protocol:
    """The declaration, built and validated once per process, not once per run."""
    return build_query_machine(workers=workers)


_TEMPLATES: dict[tuple[type[QueryStore], int], tuple[Path, list[_Instance]]] = {}
_TEMPLATE_DIRS: list[tempfile.TemporaryDirectory[str]] = []
_PLATFORMS: dict[str | None, Path] = {}


def platform_template(base: str | None) -> Path:
    """A platform folder with its orders database filled and its ledger's schema applied,
    made once per process: copied, it spares a fresh run the fill (most of its setup)."""
    found = _PLATFORMS.get(base)
    if found is None:
        tmp = tempfile.TemporaryDirectory(prefix="settled-platform-", dir=base)
        _TEMPLATE_DIRS.append(tmp)  # removed when the process ends
        found = _PLATFORMS[base] = Path(tmp.name) / "platform"
        SyntheticPlatform(found).close()  # the last close checkpoints the WAL into the files
    return found


def _template(store_class: type[QueryStore], instances: int,
              base: str | None) -> tuple[Path, list[_Instance]]:
    """The files and instance handles of a freshly set-up run, made once per process."""
    key = (store_class, instances)
    found = _TEMPLATES.get(key)
    if found is None:
        tmp = tempfile.TemporaryDirectory(prefix="settled-template-", dir=base)
        _TEMPLATE_DIRS.append(tmp)  # removed when the process ends
        directory = Path(tmp.name)
        platform = SyntheticPlatform(directory / "platform")
        store = store_class(directory / "agent.db", platform)
        items = [_Instance(store, n) for n in range(instances)]
        for item in items:  # the notification a confirmation may quote, made in advance
            item.notification = _side_notification(store, platform, directory / "agent.db",
                                                   Worker, item)
        store.close()  # the last connection to close checkpoints the WAL into the file
        platform.close()
        found = _TEMPLATES[key] = (directory, items)
    return found


def _side_notification(store: QueryStore, platform: SyntheticPlatform, store_path: Path | str,
                       worker_class: type[Worker], item: _Instance) -> str:
    """A real result notification in ``item``'s session, made by running a side query.

    Its events are in the log like any other query's; the model's instance is
    untouched because the side query has a task of its own.
    """
    side = store.create_task(item.user, item.session, {"side": True})
    message = store.receive_message(item.session, item.user, "run the side query", CLOCK)
    store.attribute_message(message.message_id, side.task_id)
    query = store.request_query(side.task_id, APP_MONTHLY_SQL)
    store.confirm(query.query_id, query.draft_version, query.condition_version,
                  message.text, message.message_id, item.run)
    with worker_class(store_path, platform, "side", lease_seconds=0) as w:
        w.claim(query.query_id)
        w.begin_submit(query.query_id)
        w.call_submit(query.query_id)
        platform.complete(query.query_id)
        w.lookup(query.query_id)
    return str(store.notifications(side.task_id)[0].message_id)


class _Instance:
    def __init__(self, store: QueryStore, n: int) -> None:
        self.session, self.user = f"session-{n}", f"user-{n}"
        self.task = store.create_task(self.user, self.session, {"month": "2026-01", "unit": "yuan"})
        self.run = store.start_run(self.session)
        message = store.receive_message(self.session, self.user, MESSAGE_TEXT, CLOCK)
        store.attribute_message(message.message_id, self.task.task_id)
        self.message = message.message_id
        self.clock = (message.request_clock_utc, message.time_zone)
        # A later message of the same task: the status tool shows it the result (Q26).
        reader = store.receive_message(self.session, self.user, "what did it return?", CLOCK)
        store.attribute_message(reader.message_id, self.task.task_id)
        self.reader = reader.message_id
        self.query_id: str | None = None
        self.sql: str | None = None  # the SQL of the draft the user sees and confirms
        self.reruns: list[str] = []  # query ids of deliberate reruns of the same SQL (Q2)
        self.rejected = False  # the platform keeps no record of a rejected submission
        self.notification: str | None = None
        self.drafting: tuple[str, int] | None = None  # (query id, condition version) arranged
