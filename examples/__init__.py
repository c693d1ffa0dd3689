"""Worked examples: an independent implementation checked with the public kit."""
