"""Where a bundled adapter keeps one run's files, and lets go of them at the run's end."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from settled.impl.shared._pg import release_store, scratch_store


@dataclass
class RunFolder:
    """One run's folder (``path``), and what :meth:`release` lets go of: the folder when it
    is a temporary one (not one the caller named), and every scratch store of the run."""

    path: Path
    tmp: tempfile.TemporaryDirectory[str] | None = None
    stores: list[tuple[str, str]] = field(default_factory=list)  # (url, kind)
    released: bool = False

    def store(self, url: str, kind: str) -> str:
        """A fresh store of ``kind`` in the database server at ``url`` (a PostgreSQL URL),
        dropped on release."""
        scratch = scratch_store(url, kind)
        self.stores.append((scratch, kind))
        return scratch

    def release(self) -> None:
        """Drop the run's stores and remove its temporary folder. Once it has all been done,
        a second call does nothing; after a failure, it tries what is left again."""
        if self.released:
            return
        while self.stores:  # each forgotten once dropped: a failed drop is tried again
            release_store(*self.stores[-1])
            self.stores.pop()
        if self.tmp is not None:
            self.tmp.cleanup()
        self.released = True


def run_folder(prefix: str, directory: Path | None) -> RunFolder:
    """``directory``, or a new temporary folder: real files and transactions, on a RAM disk
    where there is one, so that a campaign of thousands of fsyncs measures the protocol, not
    the disk."""
    if directory is not None:
        return RunFolder(Path(directory))
    tmp = tempfile.TemporaryDirectory(prefix=prefix, dir=ram_disk())
    return RunFolder(Path(tmp.name), tmp)


def ram_disk() -> str | None:
    """The folder of the machine's RAM disk, where it has one."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None
