"""The in-memory implementation with one planted bug, for the walkthrough.

A worker that gets no answer from the platform records the query as failed,
as if no answer were a no (PROTOCOL.md Q14 says: unknown until a lookup
says). The lockstep kit finds it in a handful of steps.
"""

from __future__ import annotations

from .inmemory_query import Query, Worker


class LostAnswerIsFailure(Worker):
    def no_answer(self, q: Query, kind: str = "timeout") -> str:
        self.service.settle(q, "submit_rejected", self._params(), "failed")
        return q.state
