"""The trace checker (``_replay`` holds it while it is split into modules by concern)."""

from ._replay import *  # noqa: F403
from ._replay import REPLAYERS as REPLAYERS
from ._replay import SHOWN_CANDIDATES as SHOWN_CANDIDATES
from ._replay import __all__ as __all__
from ._replay import _Replayer as _Replayer
from ._replay import group as group
