"""Index generations: the data dir's writer (an ingest, a reindex) publishes a new generation of its
indexes after each commit that makes new content searchable, by replacing ``<indexes>/GENERATION``
atomically (write, fsync, rename); the processes that only read them (API replicas) see the new number
at their next look, at most once a second, and open the new content without a restart. The indexes'
own files are each crash-safe on their own (:mod:`kg.vector_index`, :mod:`kg.lexical_index`); the
generation only says when to look again."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

__all__ = ["Generations"]

FILE = "GENERATION"


class Generations:
    """The generation counter of the indexes in ``directory``; ``changed()`` is what a reader asks."""

    def __init__(self, directory: Path, every_s: float = 1.0) -> None:
        self.path = Path(directory) / FILE
        self.every_s = every_s
        self._lock = threading.Lock()
        self._seen = self.current()
        self._looked = time.monotonic()

    def current(self) -> int:
        try:
            return int(json.loads(self.path.read_text())["generation"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def publish(self, what: str) -> int:
        """A new generation (what changed: "passages", "entities"); this process has seen it."""
        with self._lock:
            number = max(self.current(), self._seen) + 1
            tmp = self.path.with_name(f".{FILE}.{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"generation": number, "what": what, "at": time.time(), "pid": os.getpid()}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self._seen = number
            return number

    def changed(self) -> bool:
        """True once for each generation newer than the last one seen here (looked at no more than every
        ``every_s`` seconds)."""
        now = time.monotonic()
        with self._lock:
            if now - self._looked < self.every_s:
                return False
            self._looked = now
            current = self.current()
            if current == self._seen:
                return False
            self._seen = current
            return True
