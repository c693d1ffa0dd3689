"""The query protocol (Q, T and M rules): the store of tasks, messages and drafts, the worker that
executes confirmed queries, the schema and the event log.
"""
