"""The drugs' everyday and brand names from the drug-named-entity-recognition wheel, on both backends:
added to the graph's drugs as synonyms (the dictionary's noise and other entities' names left out),
idempotent, and what the linker then finds in a question."""

from __future__ import annotations

import pytest

from ingest.drug_names import drug_name_items, load_dictionary, usable_name
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from kg.model import Entity

DRUGS = [
    Entity(id="DRUGBANK:DB00945", name="Acetylsalicylic acid", category="Drug", sources=["pharmacotherapydb:1.0"]),
    Entity(id="DRUGBANK:DB00316", name="Acetaminophen", category="Drug", sources=["pharmacotherapydb:1.0"]),
    Entity(id="DRUGBANK:DB00367", name="Levonorgestrel", category="Drug", sources=["pharmacotherapydb:1.0"]),
    # another entity that bears one of acetaminophen's brand names: that name is not added to the drug
    Entity(id="TEST:1", name="Panadol", category="Gene", sources=["test"]),
    # a MeSH heading named as the drug (PubMed's headings) does not stop its names
    Entity(id="MESH:D001241", name="Aspirin", category="Concept", sources=["mesh"]),
]


@pytest.mark.parametrize(
    ("name", "usable"),
    [
        ("aspirin", True),
        ("tylenol", True),
        ("cyclosporin a", True),
        ("vitamin d", True),
        ("goserelin acetate", True),
        ("plan b", False),  # a phrase of everyday words
        ("ears and nose", False),
        ("acetate, goserelin", False),  # MeSH's inverted form
        ("5-fu", False),  # a code, not a name
        ("c/t/s", False),
        ("publisher=universal-publishers", False),  # Wikipedia markup
        ("today", False),  # an everyday word
    ],
)
def test_which_names_of_the_dictionary_read_as_drug_names(name: str, usable: bool) -> None:
    assert usable_name(name) is usable


def test_the_wheels_dictionary_names_drugs_by_drugbank_id() -> None:
    names = load_dictionary().names
    assert {"aspirin", "ecotrin"} <= set(names["DRUGBANK:DB00945"])
    assert {"paracetamol", "tylenol", "panadol"} <= set(names["DRUGBANK:DB00316"])
    assert "plan b" not in names["DRUGBANK:DB00367"] and "norlevo" in names["DRUGBANK:DB00367"]


def test_names_are_added_to_the_graphs_drugs_once(store: BaseGraphStore) -> None:
    store.upsert_entities(DRUGS)
    report = ingest(store, drug_name_items(store), "drug-names", progress=False)
    assert report.problem_count == 0
    assert report.read["of them in the graph"] == 3 and report.read["drugs named"] == 3
    aspirin = store.get_entity("DRUGBANK:DB00945")
    assert aspirin is not None and aspirin.name == "Acetylsalicylic acid"  # the graph's name stays
    assert {"aspirin", "ecotrin"} <= set(aspirin.synonyms)
    assert any(s.startswith("drug-named-entity-recognition:") for s in aspirin.sources)
    acetaminophen = store.get_entity("DRUGBANK:DB00316")
    assert acetaminophen is not None and {"paracetamol", "tylenol"} <= set(acetaminophen.synonyms)
    assert "panadol" not in acetaminophen.synonyms and report.read["names left out: another entity's name"] == 1
    assert [e.id for e in store.find_entities("tylenol")] == ["DRUGBANK:DB00316"]
    assert store.find_entities("Panadol")[0].id == "TEST:1"
    # no new drug: the dictionary's 11,000 others stay unknown to the graph
    assert store.get_entity("DRUGBANK:DB00331") is None
    # again: nothing changes
    again = ingest(store, drug_name_items(store), "drug-names", progress=False)
    assert again.entities.updated == 0 and again.read.get("names added", 0) == 0
