"""Readiness: the stores answer and the models and indexes a question needs are loaded, in one
background thread (seconds to a minute on a large graph). A damaged index file is reported by name with
how to rebuild it; damaged caches (BM25 files, the phenotype pickle) are rebuilt by the load itself.
Behind the served demo a build still embeds (:mod:`service.build`): the server is ready once its models
load and answers from what is indexed so far; the report says "building", with the build's progress.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kg.graph.base import GraphStoreError
from kg.vector_index import VectorIndexError
from service.build import BackgroundBuild
from service.container import Container

__all__ = ["Readiness"]

log = logging.getLogger("medkg.api")


class Readiness:
    def __init__(self, container: Container, build: BackgroundBuild | None = None) -> None:
        self.container = container
        self.build = build
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: str | None = None
        self.seconds: float | None = None

    def _steps(self) -> list[tuple[str, Callable[[], object]]]:
        c = self.container
        images = c.settings.data_dir / "indexes"
        steps: list[tuple[str, Callable[[], object]]] = [
            ("the embedding model", lambda: c.text_embedder.dimension),
            ("the passage index", lambda: c.text_index.load()),  # FAISS and BM25 (damaged BM25 files are rebuilt)
            ("the entity index", lambda: c.entity_index.index),
            ("the QA engine", lambda: c.qa),  # linker (lexicon from the graph), retriever, sessions, LLM client
            ("the unknown-name check", lambda: c.linker.unknown_names.warm()),  # kg/unknown_names.py
            ("the phenotype index", lambda: c.phenotype_index),  # built once, then cached (rebuilt if damaged)
            ("name completion", lambda: c.name_index),
        ]
        if self.build is not None:  # the build makes it once the entity index holds the HPO terms' vectors
            steps = [step for step in steps if step[0] != "the phenotype index"]
        if any((images / f"images{suffix}").exists() for suffix in (".vectors", ".faiss", ".ids.json")):
            steps.append(("the image index", lambda: c.image_index))
        return steps

    def _load(self) -> None:
        started = time.perf_counter()
        self.seconds = None
        for what, step in self._steps():
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - reported by /readyz, retried by the next call
                detail = f"{type(exc).__name__}: {exc}"
                if what == "the image index" and isinstance(exc, VectorIndexError):
                    detail += (
                        ". The image index cannot be used: stop the server and run `medkg reindex --only images "
                        "--from DIR` with the DICOM files or folders the studies were loaded from (it sets the "
                        "damaged files aside and embeds the images again, keeping their metadata and report "
                        "links), or restore a backup (`medkg restore FILE.tar.gz`)"
                    )
                self.error = f"{what} failed to load: {detail}"
                log.error("medkg is not ready: %s", self.error)
                return
        self.error = None
        self.seconds = round(time.perf_counter() - started, 2)

    @property
    def loaded(self) -> bool:
        """Every model and index loaded, none failed (what /readyz and /metrics read the indexes' sizes after)."""
        return self.seconds is not None and not self.error

    def start(self) -> None:
        """Load in the background, unless a load runs; after a failure, try again (the last error stays
        reported until a load succeeds)."""
        with self._lock:
            if self._thread is None or (not self._thread.is_alive() and self.error):
                self._thread = threading.Thread(target=self._load, name="medkg-warmup", daemon=True)
                self._thread.start()

    def report(self) -> dict[str, Any]:
        """What is ready and what is not (the stores are asked each time); starts the load when nothing has."""
        c = self.container
        checks: dict[str, Any] = {}
        try:
            stats = c.graph.stats()
            checks["graph"] = {"ok": True, "backend": stats.backend, "entities": stats.entities}
        except GraphStoreError as exc:
            checks["graph"] = {"ok": False, "detail": str(exc)}
        # ready once every step has loaded (not when the QA engine alone is up: the phenotype and
        # image indexes load after it, and a damaged one must not be reported ready first)
        loaded = self.loaded
        checks["models"] = {"ok": loaded, "seconds": self.seconds}
        if loaded:
            try:
                checks["passages"] = {"ok": True, "count": len(c.text_index)}
                checks["entity_index"] = {"ok": True, "count": len(c.entity_index.index)}
            except (VectorIndexError, OSError) as exc:  # an index damaged after start-up
                self.error = f"{type(exc).__name__}: {exc}"
                checks["models"] = {"ok": False, "detail": self.error}
            checks["answers"] = {"ok": True, "mode": "llm" if c.llm_answerer is not None else "extractive"}
        else:
            self.start()
            if self.error:
                checks["models"]["detail"] = self.error
        ready = all(v["ok"] for v in checks.values())
        report: dict[str, Any] = {"status": "ready" if ready else "failed" if self.error else "loading"}
        report["checks"] = checks
        if self.build is not None:
            report["build"] = self.build.report()
            if ready and report["build"]["state"] == "running":
                report["status"] = "building"  # answering from what is indexed so far
        return report
