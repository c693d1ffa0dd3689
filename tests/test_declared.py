"""The implementation moves only along edges the model declares (impl/shared/_declared.py).

Every store records a state change and its event in one transaction through
one function, and that function refuses a (trigger, from, to) the machine's
table does not have: the transaction, state change included, rolls back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from settled.impl.platform._platform import APP_MONTHLY_SQL, SyntheticPlatform
from settled.impl.query._events import apply_step, events
from settled.impl.query._store import QueryStore
from settled.impl.shared._db import write
from settled.impl.shared._declared import UndeclaredTransition, declared_edges, require_declared
from settled.model import MACHINES
from settled.model.query import QueryState as S

CLOCK = (datetime(2026, 2, 3, 2, 0, tzinfo=UTC), "Asia/Shanghai")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[QueryStore]:
    with SyntheticPlatform(tmp_path / "platform") as platform, \
            QueryStore(tmp_path / "store.db", platform) as opened:
        yield opened


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_every_logged_edge_of_the_table_passes_the_gate(machine: str) -> None:
    p = MACHINES[machine]
    logged = [(t.observable, s, t.target(s)) for t in p.transitions if t.observable is not None
              for s in t.source]
    assert logged
    for trigger, source, dest in logged:
        require_declared(machine, trigger, source, dest)  # raises if the gate disagrees


@pytest.mark.rule("Q16")
def test_an_undeclared_move_is_refused_and_nothing_is_written(store: QueryStore) -> None:
    task = store.create_task("u1", "s1", {"month": "2026-01"})
    query = store.request_query(task.task_id, APP_MONTHLY_SQL)
    assert store.query(query.query_id).state == S.AWAITING
    before = events(store._conn, query.query_id)
    # A bug that settles a draft as succeeded without running it: no such edge exists.
    with pytest.raises(UndeclaredTransition, match=r"succeeded.*not a transition the model declares"), \
            write(store._conn) as conn:
        apply_step(conn, query.query_id, trigger="lookup_succeeded", params={},
                   from_state=S.AWAITING, to_state=S.SUCCEEDED, at="2026-02-03T02:00:00Z")
    assert store.query(query.query_id).state == S.AWAITING  # rolled back
    assert events(store._conn, query.query_id) == before


def test_a_declared_trigger_on_an_edge_it_does_not_have_is_refused() -> None:
    # confirm exists, but never from a terminal state
    assert ("confirm", "awaiting_confirmation", "queued") in declared_edges("query")
    with pytest.raises(UndeclaredTransition, match="confirm from 'succeeded'"):
        require_declared("query", "confirm", "succeeded", "queued")


def test_hidden_steps_may_come_before_a_logged_one() -> None:
    # The approval checkpoint cannot see the business store's commit (a hidden step), so it
    # records executing -> result_checkpointed; the table has executing -(hidden)-> committed
    # -(save_result)-> result_checkpointed.
    require_declared("approval", "save_result", "executing", "result_checkpointed")
    with pytest.raises(UndeclaredTransition):
        require_declared("approval", "save_result", "proposed", "result_checkpointed")
