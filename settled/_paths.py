"""Output paths are checked before the work starts: a one-line error, never a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path


class OutputPathError(OSError):
    """An output path cannot be written; the message names it and the reason."""


def writable_dir(directory: Path) -> None:
    """Create ``directory`` if needed (its parent must exist: a mistyped path is an error,
    never a tree of new folders) and prove a file can be written in it."""
    parent = directory.parent
    if not directory.exists() and parent.exists() and not parent.is_dir():
        raise OutputPathError(f"cannot write into {directory}: {parent} is not a folder; "
                              "choose a writable folder")
    if not directory.exists() and not parent.exists():
        raise OutputPathError(f"cannot create {directory}: the folder {parent} does not exist; "
                              "create it first or choose another path")
    try:
        directory.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".settled-write-check-"):
            pass
    except OSError as e:
        raise OutputPathError(f"cannot write into {directory}: {e.strerror or e}; "
                              "choose a writable folder") from e


def writable_file(path: Path) -> None:
    """Prove ``path`` can be written without creating or truncating it."""
    if path.is_dir():
        raise OutputPathError(f"{path} is a folder; name a file to write")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise OutputPathError(f"cannot write into {parent}: it is not a folder; choose another "
                              "path")
    if not parent.exists():  # a mistyped folder is an error, not something to create
        raise OutputPathError(f"cannot write {path}: the folder {parent} does not exist; "
                              "create it first or choose another path")
    writable_dir(parent)
    if path.exists():
        try:
            with path.open("ab"):
                pass
        except OSError as e:
            raise OutputPathError(f"cannot write {path}: {e.strerror or e}; choose a writable "
                                  "file") from e
