"""Where a bundled adapter keeps one run's files."""

from __future__ import annotations

import tempfile
from pathlib import Path


def run_folder(prefix: str, directory: Path | None) -> tuple[tempfile.TemporaryDirectory[str] | None,
                                                             Path]:
    """``directory``, or a new temporary folder (the handle to clean up, and its path): real
    files and transactions, on a RAM disk where there is one, so that a campaign of thousands
    of fsyncs measures the protocol, not the disk."""
    if directory is not None:
        return None, Path(directory)
    tmp = tempfile.TemporaryDirectory(prefix=prefix, dir=ram_disk())
    return tmp, Path(tmp.name)


def ram_disk() -> str | None:
    """The folder of the machine's RAM disk, where it has one."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None
