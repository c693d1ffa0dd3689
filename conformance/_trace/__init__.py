"""The trace checker: replay an implementation's event log through the model.

A trace is JSON Lines, one committed state change per line, in the public
format of ``trace.schema.json`` (``settled.trace/1``). Each instance's events
are replayed in ``seq`` order through its declared machine, in one streaming
pass: every instance keeps only its current set of configurations. The log
cannot see everything the model can: the platform's own progress, crashes, and
answers that never arrived leave no event (their transitions declare
``observed_as=None``). So the checker tracks the *set* of configurations
consistent with what it has read so far, closing over those hidden steps
before each event; an event conforms when some configuration in the set takes
it to exactly the observed state and variables. Unknown stays unknown here
too: the checker never guesses which hidden step happened, it keeps every one
the evidence allows.

Bounded cost. Worker names are interchangeable, and at most one worker holds
an instance's current lease. So the checker replays a two-worker model in
which slot 0 is *the last worker that claimed* and slot 1 is *anyone else*: a
name is mapped to its role at each event, and a claim by anyone else swaps the
slots. A stale lease and no lease are indistinguishable to every guard but a
crash (a hidden step that only clears a lease), so the abstraction loses
nothing. Model bounds (``epochs_left``, ``versions_left``) exist only to keep
the explorer finite; the checker drops them, so epochs and versions are never
cut short and the model does not grow with the log. The cost is linear in the
number of events whatever the number of worker names, epochs or versions.

Speed. Lines are decoded with ``msgspec`` into a typed struct, which is both
the JSON parse and the envelope's schema check; ``params`` and ``vars`` stay
raw bytes and serve as memo keys, so an event whose (configurations, step)
pair was seen before costs a dictionary lookup. GC is paused while reading.
The hidden-step search tries only hidden transitions.

Verdicts are per instance: a violation, a gap in ``seq`` (``incomplete_log``),
or ``undecided`` (the hidden-step search hit its limit) stops checking that
instance only. Input that cannot be read at all (not JSON, not the schema, a
limit passed) raises :class:`TraceError` naming the line.

The checker is kept in rooms: ``_events`` (limits, errors, decoding a line), ``_machines``
(the machines replayed and their domains), ``_report`` (violations and the report),
``_replay`` (one event through one instance, and the diagnostics) and ``_check`` (the
streaming check and its entry points). Everything callers use is re-exported here.
"""

from __future__ import annotations

from ._check import check_file, check_lines, check_trace
from ._check import group as group
from ._events import (
    CLOSURE_LIMIT,
    MAX_FILE_BYTES,
    MAX_INSTANCES,
    MAX_LINE_BYTES,
    MAX_NESTING,
    SCHEMA_ID,
    CheckerFault,
    Event,
    TraceError,
    load_schema,
    parse_line,
    read_events,
)
from ._events import SHOWN_CANDIDATES as SHOWN_CANDIDATES
from ._machines import MACHINES, Domain, Machine, finite, integers, register_machine, unbounded
from ._replay import REPLAYERS as REPLAYERS
from ._replay import _Replayer as _Replayer
from ._report import CheckReport, TraceReport, Violation

__all__ = ["CLOSURE_LIMIT", "MACHINES", "MAX_FILE_BYTES", "MAX_INSTANCES", "MAX_LINE_BYTES",
           "MAX_NESTING", "SCHEMA_ID", "CheckReport", "CheckerFault", "Domain", "Event",
           "Machine", "TraceError", "TraceReport", "Violation", "check_file", "check_lines",
           "check_trace", "finite", "integers", "load_schema", "parse_line",
           "read_events", "register_machine", "unbounded"]
