"""Differential diagnosis on a small hand-made ontology, on both backends (real stores)."""

from __future__ import annotations

import numpy as np
import pytest

from kg.differential import PhenotypeIndex, frequency_weight
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation

TERMS = {
    "HP:0000001": None,
    "HP:0000118": "HP:0000001",
    "HP:0000707": "HP:0000118",  # nervous system
    "HP:0001250": "HP:0000707",  # seizure
    "HP:0002069": "HP:0001250",  # generalized tonic-clonic seizure
    "HP:0001252": "HP:0000707",  # hypotonia
    "HP:0000152": "HP:0000118",  # head and neck
    "HP:0000252": "HP:0000152",  # microcephaly
    "HP:0000256": "HP:0000152",  # macrocephaly
}


def phenotype(d: str, t: str, freq: str | None = None, pmids=(), negated: bool = False) -> Relation:
    evidence = {"pmids": list(pmids)} | ({"frequency": [freq]} if freq else {})
    return Relation(subject=d, type="HAS_PHENOTYPE", object=t, source="hpo", evidence=evidence, negated=negated)


@pytest.fixture
def index(store: BaseGraphStore) -> PhenotypeIndex:
    store.upsert_entities([Entity(id=t, name=t, category="Phenotype") for t in TERMS])
    store.upsert_entities(
        [Entity(id=f"OMIM:{i}", name=f"disease {i}", category="Disease") for i in (100001, 100002, 100003)]
        + [Entity(id="NCBIGene:1", name="GENE1", category="Gene")]
    )
    store.upsert_relations(
        [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in TERMS.items() if p]
        + [
            phenotype("OMIM:100001", "HP:0002069", "HP:0040281", ["PMID:11"]),
            phenotype("OMIM:100001", "HP:0000252", "HP:0040280", ["PMID:12"]),
            phenotype("OMIM:100002", "HP:0001252", "HP:0040282"),
            phenotype("OMIM:100002", "HP:0000256", "1/2"),
            phenotype("OMIM:100003", "HP:0001250", "HP:0040283"),
            phenotype("OMIM:100003", "HP:0000252", negated=True),
            Relation(subject="NCBIGene:1", type="ASSOCIATED_WITH", object="OMIM:100001", source="hpo"),
        ]
    )
    return PhenotypeIndex.from_graph(store)


def test_frequency_weights() -> None:
    assert frequency_weight(["HP:0040280"]) == 1.0
    assert frequency_weight(["3/10"]) == pytest.approx(0.3)
    assert frequency_weight(["25%"]) == pytest.approx(0.25)
    assert frequency_weight(["HP:0040284", "HP:0040282"]) == pytest.approx(0.545)  # the largest
    assert frequency_weight([]) == 0.5


def test_ranking_explains_itself(index: PhenotypeIndex) -> None:
    assert index.diseases == ["OMIM:100001", "OMIM:100002", "OMIM:100003"]
    # IC from annotations: a term more diseases share is less informative.
    ic = dict(zip(index.terms, index.ic.tolist(), strict=True))
    assert ic["HP:0000118"] == pytest.approx(0.0) and ic["HP:0002069"] > ic["HP:0001250"] > ic["HP:0000707"]
    ranked = index.rank(["HP:0002069", "HP:0000252"], top_k=3)
    assert [c.disease for c in ranked][0] == "OMIM:100001"
    top = ranked[0]
    assert {(q, t) for q, t, _ in top.matches} == {("HP:0002069", "HP:0002069"), ("HP:0000252", "HP:0000252")}
    assert top.pmids == ["PMID:11", "PMID:12"] and top.genes == ["GENE1"]
    # A disease annotated NOT to have an observed term says so.
    d3 = next(c for c in ranked if c.disease == "OMIM:100003")
    assert d3.contradictions == ["annotated NOT to have HP:0000252"]
    # A less specific observation still matches through the ontology.
    assert index.rank(["HP:0001250"], top_k=1)[0].disease in {"OMIM:100001", "OMIM:100003"}
    assert index.rank(["HP:9999999"]) == []


def test_exclusions_and_penalties(index: PhenotypeIndex) -> None:
    observed, excluded = ["HP:0001250"], ["HP:0000252"]
    plain, _, _ = index.scores(observed)
    penalised, baseline, _ = index.scores(observed, excluded, weights=(1.0, 0.0, 1.0))
    i1 = index.disease_index["OMIM:100001"]
    assert penalised[i1] < plain[i1]  # has the excluded microcephaly (obligate)
    assert np.allclose(baseline, index.scores(observed)[1])  # the baseline ignores the extras
    ranked = index.rank(observed, excluded, top_k=3)
    d1 = next(c for c in ranked if c.disease == "OMIM:100001")
    assert d1.contradictions == ["has HP:0000252, which the patient does not"]
    assert index.rank_of(penalised, ["OMIM:100003"]) == 1


def test_ranking_within_a_namespace(store: BaseGraphStore) -> None:
    store.upsert_entities(
        [Entity(id=t, name=t, category="Phenotype") for t in ("HP:0000001", "HP:0000118", "HP:0001250")]
        + [Entity(id=d, name=d, category="Disease") for d in ("OMIM:100001", "ORPHA:1")]
    )
    store.upsert_relations(
        [
            Relation(subject="HP:0000118", type="IS_A", object="HP:0000001"),
            Relation(subject="HP:0001250", type="IS_A", object="HP:0000118"),
            phenotype("OMIM:100001", "HP:0001250"),
            phenotype("ORPHA:1", "HP:0001250"),
        ]
    )
    index = PhenotypeIndex.from_graph(store)
    assert [c.disease for c in index.rank(["HP:0001250"], prefixes=["OMIM"])] == ["OMIM:100001"]
    assert len(index.rank(["HP:0001250"])) == 2
    score, _, _ = index.scores(["HP:0001250"], prefixes=["ORPHA"])
    assert index.rank_of(score, ["ORPHA:1"]) == 1 and index.rank_of(score, ["OMIM:100001"]) == 2
