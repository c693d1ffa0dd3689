"""The conformance kit: hold an implementation to a declared protocol.

Public API (``settled.conformance``)
------------------------------------
Everything named in ``__all__`` is public and stable within a minor version:
a name is removed or changes meaning only in a new minor version (0.x), and
the change is said in the changelog. Every other module here (the ones whose
names start with ``_``) is internal and may change at any time.

- :class:`Adapter`, :class:`Refused`, :class:`AdapterError`: the one
  interface an implementation needs (see ``conformance/README.md``).
- :func:`lockstep` runs a campaign and returns a :class:`Report`;
  :func:`lockstep_case` makes it a test class (one line per implementation).
- :func:`load_counterexample`, :func:`replay_counterexample`: run a saved
  counterexample again.
- :func:`check_trace`: replay an implementation's event log
  (``settled.trace/1``) through the model; :func:`explore`: visit every
  reachable state of a machine.

Names are loaded on first use, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._adapter import Adapter, AdapterError, Refused
    from ._api import (
        Counterexample,
        CounterexampleError,
        ReplayResult,
        Report,
        load_counterexample,
        lockstep,
        lockstep_case,
        replay_counterexample,
    )
    from ._explore import ExploreResult, explore
    from ._lockstep import Action
    from ._trace import CheckReport, TraceError

__all__ = [
    "Action",
    "Adapter",
    "AdapterError",
    "CheckReport",
    "Counterexample",
    "CounterexampleError",
    "ExploreResult",
    "Refused",
    "ReplayResult",
    "Report",
    "TraceError",
    "check_trace",
    "explore",
    "load_counterexample",
    "lockstep",
    "lockstep_case",
    "replay_counterexample",
]

_WHERE = {
    "Adapter": "_adapter", "AdapterError": "_adapter", "Refused": "_adapter",
    "Counterexample": "_api", "CounterexampleError": "_api", "Report": "_api",
    "ReplayResult": "_api", "load_counterexample": "_api", "lockstep": "_api",
    "lockstep_case": "_api", "replay_counterexample": "_api",
    "ExploreResult": "_explore", "explore": "_explore",
    "Action": "_lockstep",
    "CheckReport": "_trace", "TraceError": "_trace",
}


def check_trace(source: str | Path | Iterable[str]) -> CheckReport:
    """Check an event log in ``settled.trace/1``: a file path, or an iterable of JSON lines.

    Returns the trace checker's report (``.ok``, ``.violations``, ``.events``);
    raises :class:`TraceError` on unreadable input. An empty log is reported
    as checked with 0 events: look at ``.events`` before calling it a pass.
    """
    from . import _trace

    if isinstance(source, str | Path):
        return _trace.check_file(Path(source))
    return _trace.check_lines(source)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
