"""Cancel (Q19-Q22): before submission a cancel settles the query; from submitting on it
only requests, and the worker settles the query on the platform's evidence."""

from __future__ import annotations

import sqlite3

from ...model.query import QueryState
from ..shared._db import write
from ..shared._errors import NotAllowed
from ..shared._ids import require_id
from ._events import apply_step
from ._values import LIVE, Query, StoreBase, _why_not, query_row


class CancelPart(StoreBase):
    """The user's cancel of a query."""

    def cancel(self, query_id: str) -> Query:
        """Cancel locally before submission (Q20); from submitting on only request it (Q21)."""
        require_id("query_id", query_id)
        now = self._now()
        with write(self._conn) as conn:
            query = query_row(conn, query_id)
            state = QueryState(query["execution_state"])
            if self._settled_by_cancel(state):
                apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                           to_state=QueryState.CANCELLED, at=now, updates={"settled_at": now})
            elif state in LIVE:
                self._request_cancel(conn, query, state, now)
            else:
                raise NotAllowed(f"cannot cancel query {query_id!r}: it is {state.value}"
                                 f"{_why_not(state, '; it is settled, there is nothing to cancel')}")
        return self.query(query_id)

    @staticmethod
    def _settled_by_cancel(state: QueryState) -> bool:
        """Nothing was sent for a query in ``state``: a cancel settles it at once (Q20)."""
        return state in (QueryState.AWAITING, QueryState.QUEUED)

    @staticmethod
    def _request_cancel(conn: sqlite3.Connection, query: sqlite3.Row, state: QueryState,
                        now: str) -> None:
        """From submitting on, a cancel is only requested: the worker settles the query on
        the platform's evidence (Q21). A second request while one stands is refused."""
        query_id = query["query_id"]
        if query["cancel_state"] == "requested":
            raise NotAllowed(f"cannot cancel query {query_id!r}: a cancel is already "
                             f"requested and it is {state.value}; wait for the worker to "
                             "settle it on the platform's evidence (Q21)")
        apply_step(conn, query_id, trigger="cancel", params={}, from_state=state,
                   to_state=state, at=now, updates={"cancel_state": "requested"})
