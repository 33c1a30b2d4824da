"""Who is using a data dir: every process that opens it holds a shared lock on ``<data dir>/.in-use``;
backup and restore take it exclusively, so they never copy indexes a live process is writing (the
embedded store's own lock covers only the graph). A process that writes the indexes (an ingest, a
reindex, a relink, the demo's build) also holds ``<data dir>/.writer`` exclusively: at most one writer
at a time, while any number of readers (`medkg serve` replicas over Neo4j) search. A killed process's
``flock`` is released by the kernel.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_NAME", "WRITER_LOCK_NAME", "DataDirBusy", "DataDirLock", "WriterLock"]

LOCK_NAME = ".in-use"
WRITER_LOCK_NAME = ".writer"


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


class WriterLock:
    """The data dir's one writer: :meth:`acquire` takes ``<data dir>/.writer`` exclusively (never waits)
    and writes who holds it into the file, so that a second writer's :class:`DataDirBusy` names it."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / WRITER_LOCK_NAME
        self._fd: int | None = None

    def acquire(self, what: str) -> WriterLock:
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 512, 0).decode("utf-8", errors="replace").strip() or "another process"
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise DataDirBusy(
                f"{what} is refused: {holder} is writing to {self.path.parent} (one writer at a time; "
                "wait for it to finish, or stop it: a re-run resumes where it stopped)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} (pid {os.getpid()})".encode(), 0)
        self._fd = fd
        return self

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.release()
