"""The adapters of the bundled implementation: the kit's generic rooms (``_explore``,
``_liveness``, ``_lockstep``, ``_trace``) pointed at our own SQLite and PostgreSQL runtimes,
with their concurrent campaigns, race replays and the suites ``settled verify`` runs.

Nothing in the generic rooms imports this package (``tests/test_layout.py``): another
implementation takes the same kit through its own adapter.
"""
