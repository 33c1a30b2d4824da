"""Who is using a data dir: every process that opens it holds a shared lock on ``<data dir>/.in-use``;
backup and restore take it exclusively, so they never copy indexes a live process is writing (the
embedded store's own lock covers only the graph). A killed process's ``flock`` is released by the kernel.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_NAME", "DataDirBusy", "DataDirLock"]

LOCK_NAME = ".in-use"


class DataDirBusy(RuntimeError):
    """The data dir is locked the other way (a backup running, or a process using it)."""


class DataDirLock:
    """A shared (``exclusive=False``) or exclusive lock on ``data_dir``; :meth:`acquire` never waits."""

    def __init__(self, data_dir: Path, exclusive: bool = False) -> None:
        self.path = Path(data_dir) / LOCK_NAME
        self.exclusive = exclusive
        self._fd: int | None = None

    def acquire(self, what: str) -> DataDirLock:
        """Take the lock (again a no-op when held); :class:`DataDirBusy`, naming ``what`` was refused,
        when another process holds it the other way."""
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            held = "a process uses it (`medkg serve`, an ingest)" if self.exclusive else "a backup or restore runs"
            raise DataDirBusy(f"{what} is refused while {held}: {self.path.parent}") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __del__(self) -> None:  # a lock dropped unreleased (its owner never closed) is released with it
        self.release()

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
