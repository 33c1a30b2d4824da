"""Readiness: the stores answer and the models and indexes a question needs are loaded.

Loading (embedding model, linker lexicon built from the graph, passage index, sessions) takes
seconds to a minute on a large graph, so it runs in one background thread; ``report()`` starts it
when nothing has, and says what is ready and what is not.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kg.graph.base import GraphStoreError
from service.container import Container

__all__ = ["Readiness"]


class Readiness:
    def __init__(self, container: Container) -> None:
        self.container = container
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: str | None = None
        self.seconds: float | None = None

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            c = self.container
            c.text_embedder.dimension  # noqa: B018 - loads the model
            len(c.text_index)
            c.entity_index.index  # noqa: B018
            c.qa  # noqa: B018 - linker (lexicon from the graph), retriever, sessions, LLM client
            c.phenotype_index  # noqa: B018 - differential questions (built once, then cached in the data dir)
            c.name_index  # noqa: B018 - autocomplete of entity names
            self.seconds = round(time.perf_counter() - started, 2)
        except Exception as exc:  # noqa: BLE001 - reported by /readyz, retried by the next call
            self.error = f"{type(exc).__name__}: {exc}"

    def start(self) -> None:
        with self._lock:
            if self._thread is None or (not self._thread.is_alive() and self.error):
                self.error = None
                self._thread = threading.Thread(target=self._load, name="medkg-warmup", daemon=True)
                self._thread.start()

    def report(self) -> dict[str, Any]:
        c = self.container
        checks: dict[str, Any] = {}
        try:
            stats = c.graph.stats()
            checks["graph"] = {"ok": True, "backend": stats.backend, "entities": stats.entities}
        except GraphStoreError as exc:
            checks["graph"] = {"ok": False, "detail": str(exc)}
        loaded = "qa" in c.__dict__
        checks["models"] = {"ok": loaded, "seconds": self.seconds}
        if loaded:
            checks["passages"] = {"ok": True, "count": len(c.text_index)}
            checks["entity_index"] = {"ok": True, "count": len(c.entity_index.index)}
            checks["answers"] = {"ok": True, "mode": "llm" if c.llm_answerer is not None else "extractive"}
        else:
            self.start()
            if self.error:
                checks["models"]["detail"] = self.error
        ready = all(v["ok"] for v in checks.values())
        return {"status": "ready" if ready else "loading" if not self.error else "failed", "checks": checks}
