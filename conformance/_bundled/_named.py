"""Names an instance of a bundled adapter derives from its number.

Each instance of a campaign works on rows of its own (its session, its product, its
draft), named after the instance's number ``n``. ``session = Named("session-{n}")`` on
the instance's class reads as the table of those names, one line each.
"""

from __future__ import annotations

from typing import Any


class Named:
    """A read-only attribute: ``pattern`` with the instance's ``n`` put in (a pattern without
    ``{n}`` is one name for every instance: a session they share)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> str:
        if instance is None:  # read on the class: the descriptor itself, as a property is
            return self  # type: ignore[return-value]
        return self.pattern.format(n=instance.n)

    def __set__(self, instance: Any, value: Any) -> None:
        raise AttributeError(f"{self.name!r} is named after the instance's number "
                             f"({self.pattern!r}); it cannot be set")
