"""The vector memo: vectors of graph and corpus texts kept across processes and data dirs, so that a text
one model has embedded is not embedded by it again (a second ``medkg demo``, a rebuilt data dir, the
test suite's many loads of the same sources). One SQLite file per embedding (model weights, path,
runtime) under ``$XDG_CACHE_HOME/medkg/vectors/``, keyed by the text's SHA-256, bounded in size (the
oldest vectors go first). Questions are never put in it. It is a cache: any failure to read or write
it is logged once and the texts are embedded as if it were not there."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kg.sql import in_chunks

log = logging.getLogger(__name__)

LOCKED_ATTEMPTS = 6  # a read or write told "locked" at once is tried again, 1.55 s of pauses in all
_ROW_OVERHEAD = 540  # bytes a row costs beside its vector (key, rowid, page slack): 2,072 a row at 384 floats


def default_memo_root() -> Path:
    """``$XDG_CACHE_HOME/medkg/vectors`` (default ``~/.cache/medkg/vectors``)."""
    from kg.embedder_backends import default_cache_root

    return default_cache_root().parent / "vectors"


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorMemo:
    """Vectors of one embedding (``name``: the file's stem) of ``dimension`` floats, at most ``max_mb``
    megabytes of them. :meth:`get` and :meth:`put` are thread-safe; several processes share the file."""

    def __init__(self, name: str, dimension: int, max_mb: int, root: Path | None = None) -> None:
        self.path = (root or default_memo_root()) / f"{name}.sqlite"
        self.dimension = dimension
        self.max_rows = max(1, max_mb * 1_000_000 // (dimension * 4 + _ROW_OVERHEAD))
        self.hits = self.misses = 0
        self._db: sqlite3.Connection | None = None
        self._broken = False
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = self._open()
            except sqlite3.OperationalError:  # locked, read-only, disk full: not the file's fault
                raise
            except sqlite3.DatabaseError as exc:  # not a database (damaged): a cache, so start it anew
                log.warning("vector memo %s is damaged (%s); starting it anew", self.path, exc)
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB NOT NULL UNIQUE, vector BLOB NOT NULL)")
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _failed(self, action: str, exc: Exception) -> None:
        if not self._broken:
            log.warning("vector memo %s: cannot %s (%s); embedding without it", self.path, action, exc)
        self._broken = True
        if self._db is not None:
            self._db.close()
            self._db = None

    def get(self, texts: list[str]) -> list[np.ndarray | None]:
        """The kept vector of each text, or None."""
        if self._broken or not texts:
            return [None] * len(texts)
        keys = [text_key(t) for t in texts]
        found: dict[bytes, bytes] = {}

        def read() -> None:
            db = self._connect()
            for part, marks in in_chunks(keys):
                found.update(db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part))

        with self._lock:
            try:
                self._with_retries(read)
            except (sqlite3.Error, OSError) as exc:
                self._failed("read it", exc)
                return [None] * len(texts)
        out: list[np.ndarray | None] = []
        for key in keys:
            blob = found.get(key)
            out.append(
                np.frombuffer(blob, dtype=np.float32) if blob is not None and len(blob) == self.dimension * 4 else None
            )
        hits = sum(v is not None for v in out)
        self.hits += hits
        self.misses += len(out) - hits
        return out

    def put(self, texts: list[str], vectors: np.ndarray) -> None:
        """Keep the vectors of these texts; the oldest kept go when the memo is over its size."""
        if self._broken or not texts:
            return
        rows = [
            (text_key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]

        def write() -> None:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
                newest = db.execute("SELECT max(rowid) FROM vectors").fetchone()[0] or 0
                db.execute("DELETE FROM vectors WHERE rowid <= ?", (newest - self.max_rows,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        with self._lock:
            try:
                self._with_retries(write)
            except (sqlite3.Error, OSError) as exc:
                self._failed("write it", exc)

    def _with_retries(self, step: Callable[[], None]) -> None:
        """``step``, again after a pause while another process holds the file in a way SQLite's busy
        timeout does not wait for (three processes opening a new memo at once: one of them was told
        "database is locked" at once, in CI); any other error, or the last attempt's, is raised."""
        for attempt in range(LOCKED_ATTEMPTS):
            try:
                step()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or attempt == LOCKED_ATTEMPTS - 1:
                    raise
                if self._db is not None:  # opened anew: the journal mode and table are set up again
                    self._db.close()
                    self._db = None
                time.sleep(0.05 * 2**attempt)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
