"""A step of a bundled system itself: one no single instance takes (``instance`` None)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from settled.conformance import Refused
from settled.impl.shared._errors import CallerError


def perform_system_step(perform: Callable[[str, Mapping[str, Any]], None], trigger: str,
                        params: Mapping[str, Any]) -> None:
    """``perform(trigger, params)``; the implementation refusing it (a caller's error) is
    :class:`Refused`, named by the error's type, and changes nothing."""
    try:
        perform(trigger, params)
    except CallerError as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from exc
