"""Name completion: a category is queried on its own, and the ranking (whole term first, name first,
shorter first) holds over every entry sharing the prefix, however many there are."""

from __future__ import annotations

from typing import cast

import pytest

from kg.graph.base import BaseGraphStore
from kg.model import Entity
from kg.name_index import NameIndex, fold


class _Scan:
    """Just the scan that ``NameIndex.from_graph`` reads (a real store is slow to fill with 25,000)."""

    def __init__(self, entities: list[Entity]) -> None:
        self.entities = sorted(entities, key=lambda e: e.id)

    def scan_entities(self, after: str = "", limit: int = 1000) -> list[Entity]:
        return [e for e in self.entities if e.id > after][:limit]


def _index(entities: list[Entity]) -> NameIndex:
    return NameIndex.from_graph(cast(BaseGraphStore, _Scan(entities)))


@pytest.fixture(scope="module")
def crowded() -> NameIndex:
    """25,000 names that sort before "Seizure" under both "s" and "se" (more than any bounded walk)."""
    filler = [Entity(id=f"HP:9{i:06d}", name=f"Se{i:05d} abnormality", category="Phenotype") for i in range(25_000)]
    return _index(
        [
            *filler,
            Entity(id="HP:0001250", name="Seizure", category="Phenotype"),
            Entity(id="HP:0002197", name="Generalized-onset seizure", category="Phenotype"),
            Entity(id="HP:0000002", name="Convulsion", synonyms=["Seizures", "Fits"], category="Phenotype"),
            Entity(id="MONDO:0005027", name="Epilepsy", synonyms=["Seizure disorder"], category="Disease"),
            Entity(id="HP:0000003", name="Old seizure term", category="Phenotype", obsolete=True),
        ]
    )


def test_a_category_is_queried_on_its_own(store: BaseGraphStore) -> None:
    drugs = [Entity(id=f"DRUGBANK:DB{i:05d}", name=f"Abacavir analogue {i}", category="Drug") for i in range(30)]
    store.upsert_entities([*drugs, Entity(id="HP:0000001", name="Abnormal gait", category="Phenotype")])
    index = NameIndex.from_graph(store)
    assert [c.id for c in index.complete("ab", category="Phenotype")] == ["HP:0000001"]
    unfiltered = index.complete("ab", limit=50)
    assert len(unfiltered) == 31 and unfiltered[0].id == "HP:0000001"  # the shorter name first
    assert [c.category for c in index.complete("abac", category="Drug", limit=3)] == ["Drug"] * 3
    assert index.complete("ab", category="Gene") == []
    assert index.complete("gait")[0].id == "HP:0000001"  # a later word
    assert index.complete("zz") == [] and index.complete("ab", limit=0) == []


@pytest.mark.parametrize("typed", ["s", "S", "se", "sei", "Seiz"])
def test_the_best_match_comes_first_for_any_prefix_length(crowded: NameIndex, typed: str) -> None:
    found = crowded.complete(typed, limit=5)
    assert found[0].id == "HP:0001250" and found[0].via == "name"
    assert crowded.complete(typed, category="Disease")[0].id == "MONDO:0005027"


def test_the_whole_ranking_holds_past_thousands_of_matches(crowded: NameIndex) -> None:
    found = crowded.complete("se", limit=30_000)
    assert len({c.id for c in found}) == len(found) == 25_004  # each entity once, the obsolete one left out
    assert [c.id for c in found[:2]] == ["HP:0001250", "HP:9000000"]
    # whole names, then whole synonyms, then a later word of a name, then of a synonym
    assert [(c.id, c.matched, c.via) for c in found[-3:]] == [
        ("HP:0000002", "Seizures", "synonym"),
        ("MONDO:0005027", "Seizure disorder", "synonym"),
        ("HP:0002197", "Generalized-onset seizure", "name"),
    ]
    ranks = [(not fold(c.matched).startswith("se"), c.via != "name", len(c.matched)) for c in found]
    assert ranks == sorted(ranks)
    # the best of an entity's terms is the one shown: "Fits" does not match, "Seizures" does
    assert [c.matched for c in crowded.complete("fit")] == ["Fits"]
    assert [c.id for c in crowded.complete("onset")] == ["HP:0002197"]  # after a hyphen
    assert crowded.complete("s", category="Phenotype", limit=3)[0].id == "HP:0001250"


def test_an_empty_index_completes_nothing() -> None:
    assert NameIndex().complete("anything") == []
    assert NameIndex().complete("a", category="Phenotype") == []
    assert len(_index([])) == 0 and _index([]).complete("a") == []
