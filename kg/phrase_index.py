"""The phrase index: each phenotype's short names (name and synonyms) embedded alone ("Small head",
"Spider fingers", "Chest tightness": HPO's layperson synonyms among them), for the question linker. A
question's short phrase meets the name nearest to it here, where the entity index's "name: description"
vectors blur it: "a tiny head" is Small forehead (0.65) there and Microcephaly's "Small head" (0.94)
here. Kept in step with the graph as the entity index is (fingerprinted, incremental, resumable).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.model import Entity
from kg.name_index import fold

__all__ = ["PHRASE_CATEGORIES", "PhraseIndex"]

#: the categories whose names are embedded one by one: findings, which people describe in their own words
PHRASE_CATEGORIES = frozenset({"Phenotype", "Symptom"})
#: the names embedded: short ones, as people say a finding ("Small head", "Spider fingers"); HPO's long
#: names and its grouping terms ("Abnormality of the ...", "Abnormal ... morphology") are how a clinician
#: files a finding, not how anyone describes one (the demo store: 26,228 phrases, against 40,848 with every
#: name, which took 2.3x as long to embed and linked no handwritten question better).
PHRASE_MAX_WORDS = 4
_GROUPING = ("abnormal ", "abnormality ")
_KEY = "\t"  # key: entity id, tab, the folded phrase


class PhraseIndex(EntityIndex):
    label = "phrase index"
    progress_label = "embed phrases"

    def __init__(self, directory: Path, embedder: TextEmbedder, name: str = "phrases", read_only: bool = False) -> None:
        super().__init__(directory, embedder, name=name, read_only=read_only)

    def _keyed_texts(self, entities: list[Entity]) -> list[tuple[str, str]]:
        keyed: list[tuple[str, str]] = []
        for e in entities:
            if e.category not in PHRASE_CATEGORIES or e.obsolete:
                continue
            seen: set[str] = set()
            for phrase in (e.name, *e.synonyms):
                key = fold(phrase)
                if not key or len(key.split()) > PHRASE_MAX_WORDS or key.startswith(_GROUPING):
                    continue
                if key not in seen:
                    seen.add(key)
                    keyed.append((f"{e.id}{_KEY}{key}", phrase))
        return keyed

    def nearest(self, texts: list[str], vectors: np.ndarray | None = None) -> list[tuple[str, str, float] | None]:
        """``(entity id, phrase folded, cosine)`` of the phrase nearest to each text (None: an empty
        index); ``vectors``: the texts' embeddings, when the caller has them."""
        if not texts or len(self.index) == 0:
            return [None] * len(texts)
        found: list[tuple[str, str, float] | None] = []
        for hits in self.index.search(self.embedder.encode(texts) if vectors is None else vectors, 1):
            if not hits:
                found.append(None)
                continue
            key, score = hits[0]
            entity_id, _, phrase = key.partition(_KEY)
            found.append((entity_id, phrase, score))
        return found
