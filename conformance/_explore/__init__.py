"""The explorer (``_space`` holds it while it is split into modules by concern)."""

from ._space import *  # noqa: F403
from ._space import Successors as Successors
from ._space import __all__ as __all__
from ._space import _Local as _Local
from ._space import _run as _run
