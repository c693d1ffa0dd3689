"""The lockstep kit: Hypothesis drives an implementation and the model side by side.

One runner, one tour, one shrinker and one report serve a single machine and a declared
system alike: a machine's campaign is a system of independent instances (:func:`world`).

- :mod:`._action` — a run's steps; :mod:`._world` — the model side (what is enabled);
- :mod:`._contract`, :mod:`._observe` — the adapter held to its contract;
- :mod:`._runner` — one run; :mod:`._campaign` — tour, random runs, minimising;
- :mod:`._tour`, :mod:`._tour_system` — the directed tour;
- :mod:`._coverage` — what a campaign covered; :mod:`._files` — counterexamples on disk.
"""

from __future__ import annotations

from ._action import EAGER, MIN_STEPS, REPLAY_BUDGET, SYSTEM, Action, SystemAction, transition_label
from ._campaign import (
    AdapterFactory,
    Record,
    failure_text,
    make_lockstep,
    minimise_steps,
    replay,
    run_lockstep,
    run_tour,
)
from ._contract import (
    Contract,
    adapter_error_in,
    adapter_fault,
    blame_adapter,
    check_system_observation,
    contract_for,
    perform_refused,
)
from ._coverage import (
    NO_TRANSITION,
    declared_cases,
    declared_edges,
    declared_refusals,
    declared_values,
    edge_key,
    edge_of,
    edge_text,
    ends_early,
    expected_projection,
    never_alone,
    refusal_goals,
    refused_alone,
    unfired,
    unfired_cases,
    unfired_edges,
    unfired_steps,
    unfired_values,
    unprobed_refusals,
)
from ._files import (
    STEPS_SCHEMA,
    SYSTEM_STEPS_SCHEMA,
    CounterexampleWriteError,
    counterexample_dir,
    load_steps,
    safe_name,
    steps_file,
    write_counterexample,
    write_steps,
)
from ._runner import Runner, system_probes
from ._tour import directed_tour, tour, tour_of, tour_refusals
from ._tour_system import system_tour
from ._world import Plans, history, is_machine, plans_for, world

__all__ = [
    "EAGER",
    "MIN_STEPS",
    "NO_TRANSITION",
    "REPLAY_BUDGET",
    "STEPS_SCHEMA",
    "SYSTEM",
    "SYSTEM_STEPS_SCHEMA",
    "Action",
    "AdapterFactory",
    "Contract",
    "CounterexampleWriteError",
    "Plans",
    "Record",
    "Runner",
    "SystemAction",
    "adapter_error_in",
    "adapter_fault",
    "blame_adapter",
    "check_system_observation",
    "contract_for",
    "counterexample_dir",
    "declared_cases",
    "declared_edges",
    "declared_refusals",
    "declared_values",
    "directed_tour",
    "edge_key",
    "edge_of",
    "edge_text",
    "ends_early",
    "expected_projection",
    "failure_text",
    "history",
    "is_machine",
    "load_steps",
    "make_lockstep",
    "minimise_steps",
    "never_alone",
    "perform_refused",
    "plans_for",
    "refusal_goals",
    "refused_alone",
    "replay",
    "run_lockstep",
    "run_tour",
    "safe_name",
    "steps_file",
    "system_probes",
    "system_tour",
    "tour",
    "tour_of",
    "tour_refusals",
    "transition_label",
    "unfired",
    "unfired_cases",
    "unfired_edges",
    "unfired_steps",
    "unfired_values",
    "unprobed_refusals",
    "world",
    "write_counterexample",
    "write_steps",
]
