"""The BM25 half of the fact rerank (GraphEvidence.rank): its tokens are those of the passage index."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from kg.model import Entity, Relation
from kg.retrieval.facts import GraphEvidence, ScoredFact


class _SameVector:
    """Every text the same vector: the cosine ties, BM25 decides."""

    dimension = 4

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.tile(np.array([0.5, 0.5, 0.5, 0.5], np.float32), (len(texts), 1))

    encode_memoised = encode


def _evidence() -> GraphEvidence:
    no_vectors = SimpleNamespace(vectors_of=lambda ids: {})  # no entity embedded: each is embedded by name
    return GraphEvidence(graph=None, entity_index=SimpleNamespace(index=no_vectors), embedder=_SameVector())  # type: ignore[arg-type]


def test_bm25_of_the_rerank_keeps_one_character_tokens() -> None:
    texts = ["Type 2 diabetes mellitus is treated by Metformin", "Type 1 diabetes mellitus is treated by Insulin"]
    scores = _evidence()._bm25("treatment of type 1 diabetes", texts)
    assert scores[1] > scores[0]
    hep = _evidence()._bm25("hepatitis C", ["Hepatitis B has phenotype Jaundice", "Hepatitis C has phenotype Jaundice"])
    assert hep[1] > hep[0]
    assert _evidence()._bm25("a", texts) == [0.0, 0.0]  # still a stop word


def test_rank_puts_the_fact_of_the_asked_type_first() -> None:
    entities = {
        "MONDO:2": Entity(id="MONDO:2", name="Type 2 diabetes mellitus"),
        "MONDO:1": Entity(id="MONDO:1", name="Type 1 diabetes mellitus"),
        "HP:9": Entity(id="HP:9", name="Ketoacidosis"),
    }
    facts = [
        ScoredFact(relation=Relation(subject="MONDO:2", type="HAS_PHENOTYPE", object="HP:9"), seed="MONDO:2"),
        ScoredFact(relation=Relation(subject="MONDO:1", type="HAS_PHENOTYPE", object="HP:9"), seed="MONDO:1"),
    ]
    qvec = _SameVector().encode(["q"])[0]
    ranked = _evidence().rank("phenotypes of type 1 diabetes", qvec, facts, entities)
    assert [f.relation.subject for f in ranked] == ["MONDO:1", "MONDO:2"]
    assert ranked[0].bm25 > ranked[1].bm25
