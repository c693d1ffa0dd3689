"""Plumbing every protocol's store shares: SQLite and PostgreSQL connections and transactions, the
typed errors, id checks, crash points and the declared-edge gate.
"""
