"""Name completion over a real store: the bounded walk of a prefix meets only the category asked for."""

from __future__ import annotations

import pytest

import kg.name_index as name_index
from kg.graph.base import BaseGraphStore
from kg.model import Entity
from kg.name_index import NameIndex


def test_a_category_is_walked_on_its_own(store: BaseGraphStore, monkeypatch: pytest.MonkeyPatch) -> None:
    drugs = [Entity(id=f"DRUGBANK:DB{i:05d}", name=f"Abacavir analogue {i}", category="Drug") for i in range(30)]
    store.upsert_entities([*drugs, Entity(id="HP:0000001", name="Abnormal gait", category="Phenotype")])
    monkeypatch.setattr(name_index, "MAX_WALK", 10)  # fewer entries than the drugs before the phenotype
    index = NameIndex.from_graph(store)
    assert [c.id for c in index.complete("ab", category="Phenotype")] == ["HP:0000001"]
    assert len(index.complete("ab", limit=50)) == 10  # unfiltered, the walk stays bounded
    assert [c.category for c in index.complete("abac", category="Drug", limit=3)] == ["Drug"] * 3
    assert index.complete("ab", category="Gene") == []
