"""The approval protocol (W, A and R rules): the business store's idempotent tools, the approval
runtime and its checkpoint, the read-only reconciler and the display log.
"""
