"""settled: specify, implement and check protocols that stay responsible for a
side effect after "I did not get an answer"."""

__version__ = "0.1.0"
