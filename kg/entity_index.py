"""The entity vector index: every entity embedded as "name: description" so the linker can find entities
by meaning ("fits" -> Seizure), kept in step with the graph incrementally (a vector's fingerprint
covers its text and the model, so an update embeds only what is new or changed).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kg.embedders import TextEmbedder
from kg.graph.base import BaseGraphStore
from kg.index_generation import Generations
from kg.model import NOT_VOCABULARY, Entity
from kg.progress import progress_bar
from kg.vector_index import VectorIndex, VectorIndexError

__all__ = ["EntityIndex", "IndexUpdate", "describe", "embedding_text"]

logger = logging.getLogger(__name__)


def _words(category: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", category).lower()


def describe(entity: Entity) -> str:
    """The entity's definition, or a description made from what the graph knows of it (used for the
    embedding and shown by the API, never written back over a definition)."""
    if entity.description:
        return entity.description
    text = f"{entity.name} is a {_words(entity.category)}"
    if entity.synonyms:
        text += "; also called " + ", ".join(entity.synonyms[:8])
    return text + "."


def embedding_text(entity: Entity) -> str:
    text = f"{entity.name}: {describe(entity)}"
    if entity.description and entity.synonyms:
        text += " Synonyms: " + ", ".join(entity.synonyms[:8]) + "."
    return text


@dataclass
class IndexUpdate:
    embedded: int
    unchanged: int
    removed: int
    total: int
    seconds: float
    label: str = "entity index"  # which index: "entity index", "phrase index"


class EntityIndex:
    label = "entity index"
    progress_label = "embed entities"

    def __init__(
        self, directory: Path, embedder: TextEmbedder, name: str = "entities", read_only: bool = False
    ) -> None:
        self.directory = Path(directory)
        self.embedder = embedder
        self.name = name
        self.read_only = read_only  # a reader beside the data dir's writer (an API replica, a Ray worker)
        self.generations = Generations(self.directory, name)
        self._index: VectorIndex | None = None
        self._opening = threading.Lock()

    @property
    def index(self) -> VectorIndex:
        if self.read_only and self.generations.changed():  # a writer published new entity vectors
            with self._opening:
                self._index = None
        if self._index is not None:
            return self._index
        with self._opening:  # one VectorIndex per file, whichever thread opens it first
            return self._open()

    def _open(self) -> VectorIndex:
        if self._index is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                self._index = VectorIndex.open(
                    self.directory, self.name, self.embedder.dimension, model=self.embedder.model_name,
                    read_only=self.read_only,
                )  # fmt: skip
            except VectorIndexError as exc:
                raise VectorIndexError(f"{exc}. {self.rebuild_hint()}") from exc
        return self._index

    def close(self) -> None:
        """Close the vector index's files (reopened by the next use)."""
        with self._opening:
            if self._index is not None:
                self._index.close()
                self._index = None

    def rebuild_hint(self) -> str:
        files = f"{self.directory / self.name}.vectors"
        return (
            f"The {self.label} cannot be used: stop the server and run `medkg reindex --only entities` (it sets "
            f"{files} aside and embeds every entity of the graph again), or restore a backup (`medkg restore "
            "FILE.tar.gz`)"
        )

    def _fingerprint(self, text: str) -> str:
        return hashlib.sha1(f"{self.embedder.signature}\n{text}".encode()).hexdigest()

    def _keyed_texts(self, entities: list[Entity]) -> list[tuple[str, str]]:
        """``(key, text)`` of each vector the entities have here: one per entity, keyed by its id;
        passages have their own index; records and obsolete entities are never linked to."""
        return [(e.id, embedding_text(e)) for e in entities if e.category not in NOT_VOCABULARY and not e.obsolete]

    def update(self, store: BaseGraphStore, progress: bool = True, page: int = 10_000, batch: int = 512) -> IndexUpdate:
        """Embed entities (not documents or passages) new or changed since the last update; drop those gone.
        Saved after every page of the graph's entities, so a stopped update keeps what it embedded (the
        progress bar counts the entities scanned, of the graph's count)."""
        started = time.perf_counter()
        index = self.index
        seen: set[str] = set()
        embedded = unchanged = 0
        after = ""
        bar = progress_bar(
            total=store.entity_count(),
            desc=self.progress_label,
            unit=" entities",
            disable=not progress,
            mininterval=0.5,
        )
        with bar:
            while rows := store.scan_entities(after=after, limit=page):
                after = rows[-1].id
                keyed = self._keyed_texts(rows)
                ids = [k for k, _ in keyed]
                texts = [t for _, t in keyed]
                prints = [self._fingerprint(t) for t in texts]
                seen.update(ids)
                todo = index.needs_update(ids, prints)
                unchanged += len(ids) - len(todo)
                shown = 0  # the page's rows shown done, in proportion to its vectors embedded
                for start in range(0, len(todo), batch):
                    chunk = todo[start : start + batch]
                    vectors = self.embedder.encode_memoised([texts[i] for i in chunk])
                    embedded += index.upsert([ids[i] for i in chunk], vectors, [prints[i] for i in chunk])
                    step = len(rows) * (start + len(chunk)) // len(todo) - shown
                    bar.update(step)
                    shown += step
                bar.update(len(rows) - shown)
                index.save()  # a checkpoint: a no-op when nothing changed
        removed = index.remove([i for i in index.ids() if i not in seen])
        rebuilt = index.fit_kind()
        if embedded or removed or rebuilt:
            index.save()
            self.generations.publish()
        seconds = round(time.perf_counter() - started, 2)
        return IndexUpdate(embedded, unchanged, removed, len(index), seconds, self.label)

    def reindex(self, store: BaseGraphStore, progress: bool = True) -> tuple[IndexUpdate, list[Path]]:
        """``update`` after setting a damaged index aside (renamed, not deleted): every entity of the
        graph whose vector is missing or stale is embedded again. Returns the update and the files set
        aside."""
        set_aside: list[Path] = []
        try:
            self.index  # noqa: B018 - opening it checks it
        except VectorIndexError:
            set_aside = VectorIndex.set_aside(self.directory, self.name)
            self._index = None
        return self.update(store, progress=progress), set_aside

    def vectors(
        self, entities: list[Entity | None], progress: bool = False, batch: int = 512
    ) -> tuple[np.ndarray, int]:
        """The normalised vector of each entity, as the index holds it when it was embedded from the
        entity's current text with this model (its fingerprint says so), else embedded now and not
        stored (the index is only written by ``update``); a zero row for ``None``. An index that cannot
        be opened (damaged, another model's) is passed over with a warning: every entity is embedded.
        Returns the matrix and how many were embedded now."""
        out = np.zeros((len(entities), self.embedder.dimension), dtype=np.float32)
        index: VectorIndex | None
        try:
            index = self.index
        except VectorIndexError as exc:
            logger.warning("%s; embedding the %d entities asked for instead", exc, len(entities))
            index = None
        todo: list[tuple[int, str]] = []
        for row, entity in enumerate(entities):
            if entity is None:
                continue
            text = embedding_text(entity)
            current = index is not None and index.fingerprint(entity.id) == self._fingerprint(text)
            if current and (v := index.vector(entity.id)) is not None:
                out[row] = v
            else:
                todo.append((row, text))
        with progress_bar(total=len(todo), desc="embed terms", unit=" terms", disable=not progress or not todo) as bar:
            for start in range(0, len(todo), batch):
                chunk = todo[start : start + batch]
                vectors = np.asarray(self.embedder.encode_memoised([t for _, t in chunk]), dtype=np.float32)
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                out[[r for r, _ in chunk]] = vectors / np.where(norms > 0, norms, 1.0)
                bar.update(len(chunk))
        return out, len(todo)

    def search(self, text: str, k: int = 10) -> list[tuple[str, float]]:
        if len(self.index) == 0:
            return []
        return self.index.search(self.embedder.encode([text]), k)[0]
