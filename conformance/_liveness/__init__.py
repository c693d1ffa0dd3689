"""Liveness under fairness (``_search`` holds it while it is split into modules by concern)."""

from ._search import *  # noqa: F403
from ._search import REQUIRED as REQUIRED
