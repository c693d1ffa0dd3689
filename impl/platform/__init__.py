"""The synthetic data platform the query protocol calls: its own ledger of queries, a real orders
database to run them on, and the faults it injects.
"""
