"""One validator family for every id and token a caller hands the implementation.

Query, task, message and run ids, session and call ids, order and draft ids,
client tokens: each is a non-blank string of at most :data:`MAX_ID_CHARS`
characters, kept exactly as given (no stripping, no case folding: an id is
compared byte for byte). A bad one is an :class:`InvalidInput` that names the
parameter, shows the value (shortened) and says how to fix it; nothing is
written.
"""

from __future__ import annotations

from typing import Final

from ._errors import InvalidInput

MAX_ID_CHARS: Final = 128


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters with an ellipsis."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def require_id(name: str, value: object, fix: str = "pass the id the store returned") -> str:
    """``value`` if it is a non-blank string of at most :data:`MAX_ID_CHARS` characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string, got {shown(value)}; {fix}")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInput(f"{name} {shown(value)} has {len(value)} characters, at most "
                           f"{MAX_ID_CHARS} are allowed; {fix}")
    return value
