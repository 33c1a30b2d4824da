"""Index generations: the data dir's writer (an ingest, a reindex) publishes a new generation of its
indexes after each commit that makes new content searchable, by replacing ``<indexes>/GENERATION``
atomically (write, fsync, rename; one counter per kind of index, so a passage checkpoint does not make
readers reopen the entity index); the processes that only read them (API replicas) see the new number
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
    """The generation of one ``kind`` of index ("passages", "entities") in ``directory``: the file
    counts each kind apart, so a reader of one reopens only when its own kind changed; ``changed()`` is
    what a reader asks."""

    def __init__(self, directory: Path, kind: str, every_s: float = 1.0) -> None:
        self.path = Path(directory) / FILE
        self.kind = kind
        self.every_s = every_s
        self._lock = threading.Lock()
        self._seen = self.current()
        self._looked = time.monotonic()

    def _read(self) -> dict[str, int]:
        try:
            counts = json.loads(self.path.read_text())["generations"]
            return {str(k): int(v) for k, v in counts.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def current(self) -> int:
        return self._read().get(self.kind, 0)

    def publish(self) -> int:
        """A new generation of this kind (the data dir's one writer calls it); this process has seen it."""
        with self._lock:
            counts = self._read()
            counts[self.kind] = max(counts.get(self.kind, 0), self._seen) + 1
            tmp = self.path.with_name(f".{FILE}.{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"generations": counts, "at": time.time(), "pid": os.getpid()}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self._seen = counts[self.kind]
            return self._seen

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
