"""The model's errors (a module of its own: the expression language raises them too)."""

from __future__ import annotations


class ModelError(Exception):
    """Root of the model's errors."""


class DeclarationError(ModelError, ValueError):
    """A protocol declaration is broken; the message names the part and the fix."""
