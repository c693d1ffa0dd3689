"""The tool-call ledger (L rules): assistant messages, their tool calls and results, recovered as
one turn.
"""
