from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from kg.graph.base import entity_to_row, relation_to_row, row_to_entity, row_to_relation
from kg.model import Entity, GraphPath, Relation, WriteSummary, format_time, name_key


def test_entity_normalises_id_name_lists() -> None:
    e = Entity(id="MIM:154700", name="  Marfan   syndrome ", synonyms=["MFS", "MFS", " "], xrefs=["ORDO:558"])
    assert e.id == "OMIM:154700"
    assert e.name == "Marfan syndrome"
    assert e.synonyms == ["MFS"]
    assert e.xrefs == ["ORPHA:558"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"id": "154700", "name": "x"},
        {"id": "OMIM:1", "name": "   "},
        {"id": "OMIM:1", "name": "x", "category": "not a category"},
    ],
)
def test_entity_rejects_bad_fields(kwargs: dict) -> None:
    with pytest.raises(ValidationError):
        Entity(**kwargs)


def test_relation_type_and_key() -> None:
    r = Relation(subject="MIM:154700", type="HAS_PHENOTYPE", object="HP:0001166", source="hpo:2025-01-16")
    assert r.key == "OMIM:154700|HAS_PHENOTYPE|HP:0001166|hpo:2025-01-16"
    assert r.is_current
    with pytest.raises(ValidationError, match="UPPER_SNAKE"):
        Relation(subject="HP:1", type="has phenotype", object="HP:2")
    with pytest.raises(ValidationError):
        Relation(subject="HP:1", type="IS_A", object="HP:2", confidence=1.5)


def test_merge_keeps_history_and_unions_lists() -> None:
    created = datetime(2020, 1, 1, tzinfo=UTC)
    old = Entity(id="HP:1", name="Old", synonyms=["a"], sources=["hpo"], created_at=created, category="Phenotype")
    new = Entity(id="HP:1", name="New", synonyms=["b", "a"], sources=["doid"], description="d")
    merged = old.merged_with(new)
    assert merged.name == "New"
    assert merged.category == "Phenotype"  # the default category never overwrites a real one
    assert merged.synonyms == ["a", "Old", "b"]  # the replaced name stays findable
    assert merged.sources == ["hpo", "doid"]
    assert merged.description == "d"
    assert merged.created_at == created
    assert merged.merged_with(new).same_content(merged)
    # Two sources that name it differently: after one round, restating either changes only the name.
    other = Entity(id="HP:1", name="Old", sources=["hpo"])
    assert merged.merged_with(other).merged_with(new).synonyms == ["a", "Old", "b", "New"]
    # A case-only change, or a stub named by its id, leaves no synonym behind.
    assert old.merged_with(Entity(id="HP:1", name="OLD")).synonyms == ["a"]
    assert Entity(id="HP:1", name="HP:1").merged_with(new).synonyms == ["b", "a"]


def test_rows_round_trip() -> None:
    now = format_time(datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC))
    e = Entity(id="HP:0001250", name="Seizure", synonyms=["Epileptic seizure"], category="Phenotype")
    row = entity_to_row(e, now)
    assert row["name_key"] == "seizure" and row["synonym_keys"] == ["epileptic seizure"]
    assert row_to_entity(row).model_dump(exclude={"created_at"}) == e.model_dump(exclude={"created_at"})
    r = Relation(
        subject="OMIM:1",
        type="HAS_PHENOTYPE",
        object="HP:0001250",
        evidence={"pmids": ["PMID:1"]},
        confidence=0.5,
        negated=True,
    )
    back = row_to_relation(relation_to_row(r, now))
    assert back.model_dump(exclude={"valid_from"}) == r.model_dump(exclude={"valid_from"})
    assert format_time(back.valid_from) == now


def test_times_sort_as_text() -> None:
    a = format_time(datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC))
    b = format_time(datetime(2024, 11, 2, 3, 4, 5, tzinfo=UTC))
    assert a < b and len(a) == len(b) == 27


def test_name_key_folds_case_and_space() -> None:
    assert name_key("  Sjögren   SYNDROME ") == "sjögren syndrome"
    assert name_key("Straße") == name_key("STRASSE")


def test_path_cost_ignores_same_as() -> None:
    rels = [
        Relation(subject="DRUGBANK:DB00945", type="TREATS", object="DOID:1"),
        Relation(subject="DOID:1", type="SAME_AS", object="OMIM:1"),
        Relation(subject="OMIM:1", type="HAS_PHENOTYPE", object="HP:1"),
    ]
    p = GraphPath(nodes=["DRUGBANK:DB00945", "DOID:1", "OMIM:1", "HP:1"], relations=rels)
    assert (p.cost, p.length) == (2, 3)


def test_write_summary_adds_up() -> None:
    s = WriteSummary(added=1, skipped={"x": 1})
    s += WriteSummary(added=2, updated=1, skipped={"x": 2, "y": 1})
    assert (s.added, s.updated, s.skipped) == (3, 1, {"x": 3, "y": 1})
