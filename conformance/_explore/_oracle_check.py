"""The cross-check: the same search, every local step fired through the ``transitions`` oracle.

For each configuration, every trigger leaving its state is fired with every parameter choice on
one :class:`~settled.model._oracle.Oracle` reset to that configuration; what the oracle accepts
must be exactly what the table's successor function yields, with the same resulting
configuration, or :class:`OracleDisagreement` is raised. The table's own search
(``_explore``) is compiled for speed; this path shares none of that, so agreement between the
two is evidence for both."""

from __future__ import annotations

from collections.abc import Sequence

from settled.conformance._explore import ExploreResult, Progress, Successors, _run
from settled.model import Config, Oracle, Params, Protocol, Step, Transition, Value


class OracleDisagreement(AssertionError):
    """The ``transitions`` oracle and the table's successor function disagree on an edge."""



def explore_via_transitions(protocol: Protocol, instances: int = 1, max_states: int | None = None,
                            *, progress: Progress | None = None) -> ExploreResult:
    """:func:`explore`, but every local step is fired through the ``transitions`` oracle.

    For each configuration, every trigger leaving its state is fired with every
    parameter choice on a fresh :class:`~settled.model._oracle.Oracle`; what the
    oracle accepts must be exactly what the table's successor function yields,
    with the same resulting configuration, or :class:`OracleDisagreement` is raised.
    """
    return _run(protocol, _oracle_successors(protocol), instances, max_states, progress,
                "transitions")



def _param_union(group: Sequence[Transition]) -> list[Params]:
    seen: set[tuple[tuple[str, Value], ...]] = set()
    out: list[Params] = []
    for t in group:
        for prm in t.param_choices():
            key = tuple(sorted(prm.items()))
            if key not in seen:
                seen.add(key)
                out.append(prm)
    return out


def _oracle_successors(protocol: Protocol) -> Successors:
    plan: dict[str, list[tuple[str, list[Params]]]] = {}
    for s in protocol.state_names:
        groups: dict[str, list[Transition]] = {}
        for t in protocol.transitions_from(s):
            groups.setdefault(t.trigger, []).append(t)
        plan[s] = [(trigger, _param_union(group)) for trigger, group in groups.items()]

    # One transitions.Machine, reset to each configuration before each trigger:
    # building a machine costs far more than firing it.
    oracle = Oracle(protocol)

    def successors(config: Config) -> list[Step]:
        table = {(s.transition.trigger, tuple(sorted(s.params.items()))): s
                 for s in protocol.enabled(config)}
        out: list[Step] = []
        for trigger, choices in plan[config.state]:
            for params in choices:
                expected = table.pop((trigger, tuple(sorted(params.items()))), None)
                oracle.reset(config)
                after = oracle.try_fire(trigger, **params)
                if after is None:
                    if expected is not None:
                        raise OracleDisagreement(
                            f"{protocol.name}: the table allows {trigger} {dict(params)} in "
                            f"{config} but the oracle refused it")
                    continue
                if expected is None or expected.after != after:
                    raise OracleDisagreement(
                        f"{protocol.name}: {trigger} {dict(params)} from {config}: the oracle "
                        f"reached {after}, the table {expected.after if expected else 'refuses it'}")
                out.append(Step(expected.transition, params, after))
        if table:
            raise OracleDisagreement(f"{protocol.name}: the table allows {sorted(table)} in "
                                     f"{config}, which the oracle was never offered")
        return out
    return successors

