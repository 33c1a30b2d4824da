"""One contract, both adapters: every test runs on the embedded Ladybug store and on a real Neo4j,
with the same inputs and the same expected answers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore, GraphStoreError
from kg.model import Entity, Relation

DRUG = Entity(id="DB00945", name="Aspirin", category="Drug", synonyms=["acetylsalicylic acid", "ASA"])
DOID = Entity(id="Disease::DOID:14323", name="Marfan syndrome", category="Disease", xrefs=["MIM:154700"])
OMIM = Entity(id="MIM:154700", name="MARFAN SYNDROME; MFS", category="Disease", synonyms=["MFS"])
ORPHA = Entity(id="ORDO:558", name="Marfan syndrome", category="Disease")
PHENO = Entity(id="HP:0001166", name="Arachnodactyly", category="Phenotype", synonyms=["Long, slender fingers"])
GENE = Entity(id="Gene::2200", name="FBN1", category="Gene", synonyms=["fibrillin 1"])
LENS = Entity(id="HP:0001083", name="Ectopia lentis", category="Phenotype")

GRAPH_ENTITIES = [DRUG, DOID, OMIM, ORPHA, PHENO, GENE, LENS]
GRAPH_RELATIONS = [
    Relation(subject="DB00945", type="TREATS", object="DOID:14323", source="pharmacotherapydb:1.0"),
    Relation(subject="DOID:14323", type="SAME_AS", object="MIM:154700", source="doid"),
    Relation(subject="ORPHA:558", type="SAME_AS", object="OMIM:154700", source="orphanet"),
    Relation(
        subject="OMIM:154700",
        type="HAS_PHENOTYPE",
        object="HP:0001166",
        source="hpo:2025-01-16",
        evidence={"pmids": ["PMID:11111"], "evidence_code": "PCS", "frequency": "HP:0040281"},
    ),
    Relation(subject="OMIM:154700", type="HAS_PHENOTYPE", object="HP:0001083", source="hpo:2025-01-16"),
    Relation(subject="NCBIGene:2200", type="ASSOCIATED_WITH", object="OMIM:154700", source="hpo:2025-01-16"),
]


def load(store: BaseGraphStore) -> None:
    assert store.upsert_entities(GRAPH_ENTITIES).added == len(GRAPH_ENTITIES)
    assert store.upsert_relations(GRAPH_RELATIONS).added == len(GRAPH_RELATIONS)


def describe(path) -> list[str]:  # noqa: ANN001
    return [f"{r.subject}-{r.type}->{r.object}" for r in path.relations]


# ---- entities -----------------------------------------------------------------------------------


def test_entities_round_trip_with_normalised_ids(store: BaseGraphStore) -> None:
    load(store)
    got = store.get_entity("OMIM:#154700")
    assert got is not None and got.id == "OMIM:154700"
    assert got.model_dump(exclude={"created_at"}) == OMIM.model_dump(exclude={"created_at"})
    assert got.created_at is not None and got.created_at.tzinfo is not None
    assert store.get_entity("OMIM:999999") is None
    assert set(store.get_entities(["Gene::2200", "DB00945", "HP:404"])) == {"NCBIGene:2200", "DRUGBANK:DB00945"}


def test_find_by_name_or_synonym_ignores_case_and_spacing(store: BaseGraphStore) -> None:
    load(store)
    assert [e.id for e in store.find_entities("marfan  SYNDROME")] == ["DOID:14323", "ORPHA:558"]
    assert [e.id for e in store.find_entities("mfs")] == ["OMIM:154700"]
    assert [e.id for e in store.find_entities("Acetylsalicylic Acid")] == ["DRUGBANK:DB00945"]
    assert [e.id for e in store.find_entities("marfan syndrome", category="Disease", limit=1)] == ["DOID:14323"]
    assert store.find_entities("marfan syndrome", category="Gene") == []
    assert store.find_entities("   ") == []
    # "?category=" is no filter on either backend
    assert [e.id for e in store.find_entities("marfan syndrome", category="")] == ["DOID:14323", "ORPHA:558"]


def test_a_self_loop_is_refused_and_a_source_cannot_hold_the_key_separator(store: BaseGraphStore) -> None:
    load(store)
    before = store.degrees(["DOID:14323"])
    summary = store.upsert_relations([Relation(subject="DOID:14323", type="RELATED_TO", object="DOID:14323")])
    assert summary.skipped == {"self-loop": 1} and summary.added == 0
    assert store.degrees(["DOID:14323"]) == before  # a loop counted once on Neo4j, twice on Ladybug: none
    assert all(n.entity.id != "DOID:14323" for n in store.neighbours("DOID:14323"))
    with pytest.raises(ValueError, match="cannot hold"):
        Relation(subject="DOID:14323", type="IS_A", object="ORPHA:558", source="c|d")


def test_unicode_names_survive(store: BaseGraphStore) -> None:
    names = {
        "HP:0100001": "Sjögren–Larsson ÿ syndrome",
        "HP:0100002": "Behçet disease",
        "HP:0100003": "β-thalassemia",
        "HP:0100004": "先天性心脏病",
        "HP:0100005": "Straße 🧬 marker",
    }
    store.upsert_entities([Entity(id=i, name=n, category="Phenotype", synonyms=[n.upper()]) for i, n in names.items()])
    for curie, name in names.items():
        assert store.get_entity(curie).name == name  # type: ignore[union-attr]
        assert [e.id for e in store.find_entities(name.upper())] == [curie]
    assert [e.id for e in store.find_entities("STRASSE 🧬 MARKER")] == ["HP:0100005"]


def test_injection_strings_are_data(store: BaseGraphStore) -> None:
    hostile = "x'}) MATCH (n) DETACH DELETE n //\"; DROP TABLE Entity; $(evil)"
    store.upsert_entities([Entity(id="HP:0000001", name=hostile, synonyms=[hostile], description=hostile), PHENO])
    assert store.get_entity("HP:0000001").name == hostile  # type: ignore[union-attr]
    assert [e.id for e in store.find_entities(hostile)] == ["HP:0000001"]
    assert store.stats().entities == 2


def test_reupsert_merges_without_changing_counts(store: BaseGraphStore) -> None:
    load(store)
    before = store.get_entity("HP:0001166")
    again = store.upsert_entities(GRAPH_ENTITIES)
    assert (again.added, again.updated, again.unchanged) == (0, 0, len(GRAPH_ENTITIES))
    richer = PHENO.model_copy(update={"synonyms": ["Spider fingers"], "description": "Long, thin fingers."})
    s = store.upsert_entities([richer])
    assert (s.added, s.updated) == (0, 1)
    after = store.get_entity("HP:0001166")
    assert after is not None and before is not None
    assert after.synonyms == ["Long, slender fingers", "Spider fingers"]
    assert after.description == "Long, thin fingers."
    assert after.created_at == before.created_at
    assert [e.id for e in store.find_entities("spider fingers")] == ["HP:0001166"]
    assert store.stats().entities == store.entity_count() == len(GRAPH_ENTITIES)


def test_category_change_is_stored(store: BaseGraphStore) -> None:
    store.upsert_entities([Entity(id="MESH:D000370", name="Ageusia", category="Symptom")])
    store.upsert_entities([Entity(id="MESH:D000370", name="Ageusia", category="Phenotype")])
    assert store.get_entity("MESH:D000370").category == "Phenotype"  # type: ignore[union-attr]
    assert store.stats().categories == {"Phenotype": 1}


# ---- relations ----------------------------------------------------------------------------------


def test_relations_need_both_endpoints_and_report_the_rest(store: BaseGraphStore) -> None:
    store.upsert_entities([OMIM, PHENO])
    s = store.upsert_relations(
        [
            Relation(subject="OMIM:154700", type="HAS_PHENOTYPE", object="HP:0001166"),
            Relation(subject="OMIM:154700", type="HAS_PHENOTYPE", object="HP:9999999"),
            Relation(
                subject="OMIM:154700",
                type="HAS_PHENOTYPE",
                object="HP:0001166",
                source="old",
                valid_to=datetime(2000, 1, 1, tzinfo=UTC),
            ),
        ]
    )
    assert s.added == 1
    assert s.skipped == {"endpoint not in graph": 1, "already invalid": 1}
    assert store.stats().relations == 1


def test_relation_reupsert_is_idempotent_and_updates_in_place(store: BaseGraphStore) -> None:
    load(store)
    again = store.upsert_relations(GRAPH_RELATIONS)
    assert (again.added, again.updated, again.unchanged) == (0, 0, len(GRAPH_RELATIONS))
    original = store.relations(subject="OMIM:154700", object="HP:0001166")[0]
    changed = GRAPH_RELATIONS[3].model_copy(
        update={"evidence": {"pmids": ["PMID:11111", "PMID:22222"]}, "confidence": 0.9}
    )
    s = store.upsert_relations([changed])
    assert (s.added, s.updated, s.invalidated) == (0, 1, 0)
    [now] = store.relations(subject="OMIM:154700", object="HP:0001166")
    assert now.evidence == {"pmids": ["PMID:11111", "PMID:22222"]} and now.confidence == 0.9
    assert now.valid_from == original.valid_from
    st = store.stats()
    assert (st.relations, st.invalidated_relations) == (len(GRAPH_RELATIONS), 0)


def test_same_fact_from_two_sources_is_two_edges(store: BaseGraphStore) -> None:
    load(store)
    store.upsert_relations([GRAPH_RELATIONS[3].model_copy(update={"source": "orphanet:2024"})])
    assert sorted(r.source for r in store.relations(subject="OMIM:154700", object="HP:0001166")) == [
        "hpo:2025-01-16",
        "orphanet:2024",
    ]


def test_contradiction_invalidates_the_old_edge_and_keeps_it(store: BaseGraphStore) -> None:
    load(store)
    negated = GRAPH_RELATIONS[3].model_copy(update={"negated": True, "evidence": {"qualifier": "NOT"}})
    s = store.upsert_relations([negated])
    assert (s.added, s.updated, s.invalidated) == (1, 0, 1)
    history = store.relations(subject="OMIM:154700", object="HP:0001166")
    assert [(r.negated, r.is_current) for r in history] == [(False, False), (True, True)]
    old, new = history
    assert old.valid_to == new.valid_from
    current = store.relations(subject="OMIM:154700", object="HP:0001166", include_invalid=False)
    assert [r.negated for r in current] == [True]
    st = store.stats()
    assert (st.relations, st.invalidated_relations) == (len(GRAPH_RELATIONS), 1)
    # Re-stating the negative fact changes nothing; re-stating the positive one flips back.
    assert store.upsert_relations([negated]).unchanged == 1
    flip = store.upsert_relations([GRAPH_RELATIONS[3]])
    assert (flip.added, flip.invalidated) == (1, 1)
    assert len(store.relations(subject="OMIM:154700", object="HP:0001166")) == 3


def test_a_fact_stated_again_with_an_earlier_date_starts_when_its_last_version_ended(store: BaseGraphStore) -> None:
    """Versions of one fact never overlap in valid time: ended, then stated again by a source dated
    before the end, it is valid again from the end; a date after the end is kept as given."""
    load(store)
    [first] = store.relations(subject="OMIM:154700", object="HP:0001083")
    assert first.valid_from is not None
    ended = first.valid_from + timedelta(days=30)
    assert store.invalidate("OMIM:154700", "HAS_PHENOTYPE", "HP:0001083", at=ended) == 1
    fact = next(r for r in GRAPH_RELATIONS if r.object == "HP:0001083")
    restated = fact.model_copy(update={"valid_from": first.valid_from + timedelta(days=1)})
    assert store.upsert_relations([restated]).added == 1
    old, new = store.relations(subject="OMIM:154700", object="HP:0001083")
    assert (old.valid_to, new.valid_from, new.valid_to) == (ended, ended, None)
    later = ended + timedelta(days=30)
    assert store.invalidate("OMIM:154700", "HAS_PHENOTYPE", "HP:0001083", at=later) == 1
    after_end = later + timedelta(days=10)
    store.upsert_relations([fact.model_copy(update={"valid_from": after_end})])
    history = store.relations(subject="OMIM:154700", object="HP:0001083")
    assert [(r.valid_from, r.valid_to) for r in history[1:]] == [(ended, later), (after_end, None)]
    # another source's versions are another fact
    early = datetime(2024, 1, 1, tzinfo=UTC)
    store.upsert_relations([fact.model_copy(update={"source": "orphanet:2024", "valid_from": early})])
    mine = [r for r in store.relations(subject="OMIM:154700", object="HP:0001083") if r.source == "orphanet:2024"]
    assert [r.valid_from for r in mine] == [early]


def test_invalidated_edges_are_hidden_from_current_queries_but_kept(store: BaseGraphStore) -> None:
    load(store)
    [fact] = store.relations(subject="OMIM:154700", object="HP:0001083")
    assert fact.valid_from is not None
    when = fact.valid_from + timedelta(hours=1)
    assert store.invalidate("MIM:154700", "HAS_PHENOTYPE", "HP:0001083", at=when) == 1
    assert store.invalidate("MIM:154700", "HAS_PHENOTYPE", "HP:0001083") == 0  # nothing current left
    assert store.invalidate("MIM:154700", "HAS_PHENOTYPE", "HP:0001166", source="someone-else") == 0
    # a fact cannot end before it began: refused, nothing ended
    [current] = store.relations(subject="OMIM:154700", object="HP:0001166")
    assert current.valid_from is not None and current.valid_to is None
    with pytest.raises(InvalidInput, match="before it became valid"):
        store.invalidate("OMIM:154700", "HAS_PHENOTYPE", "HP:0001166", at=current.valid_from - timedelta(days=1))
    naive = (current.valid_from - timedelta(days=1)).astimezone(UTC).replace(tzinfo=None)  # read as UTC
    with pytest.raises(InvalidInput, match="before it became valid"):
        store.invalidate("OMIM:154700", "HAS_PHENOTYPE", "HP:0001166", at=naive)
    assert store.relations(subject="OMIM:154700", object="HP:0001166")[0].valid_to is None
    nbrs = store.neighbours("OMIM:154700", rel_types=["HAS_PHENOTYPE"])
    assert [n.entity.id for n in nbrs] == ["HP:0001166"]
    with_history = store.neighbours("OMIM:154700", rel_types=["HAS_PHENOTYPE"], include_invalid=True)
    assert [n.entity.id for n in with_history] == ["HP:0001083", "HP:0001166"]
    [gone] = store.relations(subject="OMIM:154700", object="HP:0001083")
    assert gone.valid_to == when
    assert store.paths("OMIM:154700", "HP:0001083", max_hops=3) == []
    st = store.stats()
    assert (st.relations, st.invalidated_relations) == (len(GRAPH_RELATIONS) - 1, 1)
    assert st.relation_types["HAS_PHENOTYPE"] == 1


def test_holders_are_the_ends_of_current_edges_of_some_types(store: BaseGraphStore) -> None:
    load(store)
    assert store.holders(["TREATS"], "object") == {"DOID:14323"}
    assert store.holders(["TREATS", "ASSOCIATED_WITH"], "subject") == {"DRUGBANK:DB00945", "NCBIGene:2200"}
    assert store.holders(["HAS_PHENOTYPE"], "subject") == {"OMIM:154700"}
    store.invalidate("OMIM:154700", "HAS_PHENOTYPE", "HP:0001083")
    assert store.holders(["HAS_PHENOTYPE"], "object") == {"HP:0001166"}  # an ended edge holds nothing
    assert store.holders(["NO_SUCH_TYPE"], "object") == set()
    with pytest.raises(InvalidInput):
        store.holders(["TREATS"], "middle")  # type: ignore[arg-type]


def test_relations_needs_a_subject_or_an_object(store: BaseGraphStore) -> None:
    load(store)
    for subject, object in ((None, None), ("", ""), ("", None), (" ", "")):
        with pytest.raises(InvalidInput, match="subject, an object"):
            store.relations(subject=subject, object=object)
    assert len(store.relations(subject="", object="HP:0001083")) == 1


# ---- traversal ----------------------------------------------------------------------------------


def test_neighbours_filter_by_type_and_direction(store: BaseGraphStore) -> None:
    load(store)
    out = store.neighbours("OMIM:154700", direction="out")
    assert [(n.relation.type, n.entity.id, n.direction) for n in out] == [
        ("HAS_PHENOTYPE", "HP:0001083", "out"),
        ("HAS_PHENOTYPE", "HP:0001166", "out"),
    ]
    inc = store.neighbours("OMIM:154700", direction="in")
    assert [(n.relation.type, n.entity.id) for n in inc] == [
        ("ASSOCIATED_WITH", "NCBIGene:2200"),
        ("SAME_AS", "DOID:14323"),
        ("SAME_AS", "ORPHA:558"),
    ]
    both = store.neighbours("OMIM:154700", rel_types=["SAME_AS", "ASSOCIATED_WITH"])
    assert {n.entity.id for n in both} == {"NCBIGene:2200", "DOID:14323", "ORPHA:558"}
    assert len(store.neighbours("OMIM:154700", limit=2)) == 2
    assert store.neighbours("HP:404") == []
    with pytest.raises(ValueError):
        store.neighbours("OMIM:154700", direction="sideways")  # type: ignore[arg-type]


def test_the_neighbours_of_many_entities_are_each_ones_neighbours(store: BaseGraphStore) -> None:
    """One query for many entities gives each what :meth:`neighbours` gives it alone, limit and order
    included (an edge between two of them is each one's)."""
    load(store)
    ids = ["OMIM:154700", "DOID:14323", "HP:404", "ORPHA:558"]
    asks = ((None, "both", 1000), (["SAME_AS", "HAS_PHENOTYPE"], "out", 1), (None, "in", 2))
    for rel_types, direction, limit in asks:
        many = store.neighbours_of(ids, rel_types=rel_types, direction=direction, limit=limit, chunk=2)
        assert list(many) == ids
        for i in ids:
            alone = store.neighbours(i, rel_types=rel_types, direction=direction, limit=limit)
            assert many[i] == alone, (i, rel_types, direction)
    assert len(store.neighbours_of(["OMIM:154700"])["OMIM:154700"]) == 5
    with pytest.raises(ValueError):
        store.neighbours_of(ids, direction="sideways")  # type: ignore[arg-type]


def test_edge_rows_read_many_nodes_with_brief_neighbours(store: BaseGraphStore) -> None:
    """The bulk read of the phenotype index: every current edge of each id, the whole relation row and the
    neighbour's id, name and category only; the same whatever the ids a query."""
    load(store)
    diseases = ["OMIM:154700", "DOID:14323", "ORPHA:558", "HP:404"]
    rows = list(store.edge_rows(diseases, ["HAS_PHENOTYPE", "SAME_AS"]))
    assert [(a, r["type"], n["id"]) for a, r, n in rows] == [
        ("DOID:14323", "SAME_AS", "OMIM:154700"),
        ("OMIM:154700", "HAS_PHENOTYPE", "HP:0001083"),
        ("OMIM:154700", "HAS_PHENOTYPE", "HP:0001166"),
        ("ORPHA:558", "SAME_AS", "OMIM:154700"),
    ]
    assert rows[2][2] == {"id": "HP:0001166", "name": "Arachnodactyly", "category": "Phenotype"}
    evidence = rows[2][1]["evidence"]
    assert (json.loads(evidence) if isinstance(evidence, str) else evidence) == GRAPH_RELATIONS[3].evidence
    assert rows[2][1]["source"] == "hpo:2025-01-16" and rows[2][1]["negated"] is False
    assert list(store.edge_rows(diseases, ["HAS_PHENOTYPE", "SAME_AS"], chunk=1)) == rows
    genes = list(store.edge_rows(["OMIM:154700"], ["ASSOCIATED_WITH"], direction="in"))
    assert [(a, n) for a, _, n in genes] == [
        ("OMIM:154700", {"id": "NCBIGene:2200", "name": "FBN1", "category": "Gene"})
    ]


def test_neighbourhood_two_hops(store: BaseGraphStore) -> None:
    load(store)
    one = store.neighbourhood("DB00945", hops=1)
    assert [e.id for e in one.entities] == ["DOID:14323", "DRUGBANK:DB00945"]
    two = store.neighbourhood("DB00945", hops=2)
    assert [e.id for e in two.entities] == ["DOID:14323", "DRUGBANK:DB00945", "OMIM:154700"]
    three = store.neighbourhood("DB00945", hops=3)
    assert len(three.entities) == len(GRAPH_ENTITIES)
    assert len(three.relations) == len(GRAPH_RELATIONS)
    assert store.neighbourhood("HP:404").entities == []


def test_paths_cross_same_as_for_free(store: BaseGraphStore) -> None:
    load(store)
    # drug TREATS disease (DOID) SAME_AS disease (OMIM) HAS_PHENOTYPE phenotype (HP): cost 2, length 3
    [path] = store.paths("DB00945", "HP:0001166", max_hops=2)
    assert path.nodes == ["DRUGBANK:DB00945", "DOID:14323", "OMIM:154700", "HP:0001166"]
    assert describe(path) == [
        "DRUGBANK:DB00945-TREATS->DOID:14323",
        "DOID:14323-SAME_AS->OMIM:154700",
        "OMIM:154700-HAS_PHENOTYPE->HP:0001166",
    ]
    assert (path.cost, path.length) == (2, 3)
    assert path.relations[2].evidence["pmids"] == ["PMID:11111"]
    assert store.paths("DB00945", "HP:0001166", max_hops=1) == []
    assert store.paths("DB00945", "HP:0001166", max_hops=2, free_same_as=0) == []
    assert store.paths("DB00945", "HP:0001166", max_hops=3, free_same_as=0) == []  # the SAME_AS hop is needed
    # Two SAME_AS hops in a row (ORPHA -> OMIM <- DOID) cost nothing.
    [p2] = store.paths("ORPHA:558", "DB00945", max_hops=1)
    assert p2.nodes == ["ORPHA:558", "OMIM:154700", "DOID:14323", "DRUGBANK:DB00945"] and p2.cost == 1


def test_paths_are_ordered_filtered_and_limited(store: BaseGraphStore) -> None:
    load(store)
    store.upsert_relations(
        [Relation(subject="NCBIGene:2200", type="ASSOCIATED_WITH", object="HP:0001166", source="hpo:2025-01-16")]
    )
    paths = store.paths("Gene::2200", "HP:0001166", max_hops=3)
    assert [(p.cost, p.nodes) for p in paths] == [
        (1, ["NCBIGene:2200", "HP:0001166"]),
        (2, ["NCBIGene:2200", "OMIM:154700", "HP:0001166"]),
    ]
    assert len(store.paths("Gene::2200", "HP:0001166", max_hops=3, limit=1)) == 1
    only_assoc = store.paths("Gene::2200", "HP:0001166", max_hops=3, rel_types=["ASSOCIATED_WITH"])
    assert [p.nodes for p in only_assoc] == [["NCBIGene:2200", "HP:0001166"]]
    assert store.paths("HP:0001166", "HP:0001166") == []
    with pytest.raises(ValueError):
        store.paths("HP:0001166", "HP:0001083", max_hops=0)


def test_a_fact_stated_by_two_sources_is_one_hop_of_one_path(store: BaseGraphStore) -> None:
    """The same walk over the same facts, from two sources, is one path (the first source by key), so
    such twins do not crowd the other paths out of ``limit``."""
    load(store)
    store.upsert_relations(
        [
            GRAPH_RELATIONS[3].model_copy(update={"source": "orphanet:2024"}),
            Relation(subject="NCBIGene:2200", type="ASSOCIATED_WITH", object="HP:0001166", source="hpo:2025-01-16"),
        ]
    )
    paths = store.paths("Gene::2200", "HP:0001166", max_hops=3, limit=3)  # two walks, not three paths
    assert [p.nodes for p in paths] == [["NCBIGene:2200", "HP:0001166"], ["NCBIGene:2200", "OMIM:154700", "HP:0001166"]]
    assert paths[1].relations[1].source == "hpo:2025-01-16"  # of "hpo:..." and "orphanet:...", the first


def test_degrees_count_every_edge_and_paths_start_from_the_sparser_end(store: BaseGraphStore) -> None:
    load(store)
    store.upsert_relations([Relation(subject="DB00945", type="TREATS", object="HP:0001083", source="test")])
    store.invalidate("DB00945", "TREATS", "HP:0001083")  # history still counts as an edge
    assert store.degrees(["MIM:154700", "DB00945", "Gene::2200", "HP:404"]) == {
        "OMIM:154700": 5,
        "DRUGBANK:DB00945": 2,
        "NCBIGene:2200": 1,
        "HP:404": 0,
    }
    store.upsert_relations([Relation(subject="DB00945", type="TREATS", object="ORPHA:558", source="test")])
    # the search runs from whichever end has fewer edges; the paths read from source to target all the same
    natural = store.paths("DB00945", "HP:0001166", max_hops=3)
    from_source = store.paths("DB00945", "HP:0001166", max_hops=3, degrees={"DRUGBANK:DB00945": 0, "HP:0001166": 9})
    from_target = store.paths("DB00945", "HP:0001166", max_hops=3, degrees={"DRUGBANK:DB00945": 9, "HP:0001166": 0})
    assert [describe(p) for p in from_target] == [describe(p) for p in from_source] == [describe(p) for p in natural]
    assert [p.nodes for p in from_target] == [
        ["DRUGBANK:DB00945", "DOID:14323", "OMIM:154700", "HP:0001166"],
        ["DRUGBANK:DB00945", "ORPHA:558", "OMIM:154700", "HP:0001166"],
    ]
    assert [p.nodes for p in store.paths("HP:0001166", "DB00945", max_hops=3)] == [
        list(reversed(p.nodes)) for p in from_target
    ]


def test_the_direct_edge_between_hubs_survives_the_candidate_cap(store: BaseGraphStore) -> None:
    """Between two hubs the raw paths outnumber the cap, and the databases do not enumerate them
    shortest first: the direct edge and the short paths must still be found (iterative deepening)."""
    load(store)
    hubs = [Entity(id=f"OMIM:9000{i:02d}", name=f"Disease {i}", category="Disease") for i in range(30)]
    store.upsert_entities(hubs)
    store.upsert_relations(
        [
            Relation(subject=h.id, type="HAS_PHENOTYPE", object=t, source="test")
            for h in hubs
            for t in (PHENO.id, LENS.id)
        ]
    )  # 31 two-hop paths (30 hubs and Marfan) between the two phenotypes, 5 candidates a query
    store.upsert_relations([Relation(subject=LENS.id, type="IS_A", object=PHENO.id, source="test")])
    found = store.paths(PHENO.id, LENS.id, max_hops=3, limit=4, candidate_cap=5)
    assert [p.length for p in found] == [1, 2, 2, 2]
    assert describe(found[0]) == ["HP:0001083-IS_A->HP:0001166"]
    every = store.paths(PHENO.id, LENS.id, max_hops=2, limit=100)  # the store's cap: all of them
    assert [p.length for p in every] == [1] + [2] * 31


def test_negated_edges_are_not_connections(store: BaseGraphStore) -> None:
    store.upsert_entities([OMIM, PHENO])
    store.upsert_relations([Relation(subject="OMIM:154700", type="HAS_PHENOTYPE", object="HP:0001166", negated=True)])
    assert store.paths("OMIM:154700", "HP:0001166") == []
    assert [n.relation.negated for n in store.neighbours("OMIM:154700")] == [True]


# ---- batches, bulk, stats -----------------------------------------------------------------------


def test_batch_commits_together_or_not_at_all(store: BaseGraphStore) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with store.batch():
            store.upsert_entities([OMIM, PHENO])
            store.upsert_relations([GRAPH_RELATIONS[3]])
            raise RuntimeError("boom")
    assert store.stats().entities == store.entity_count() == 0 and store.stats().relations == 0
    with store.batch():
        store.upsert_entities([OMIM, PHENO])
        with store.batch():  # nested blocks join the outer transaction
            store.upsert_relations([GRAPH_RELATIONS[3]])
    st = store.stats()
    assert (st.entities, st.relations) == (2, 1)


def test_a_failed_statement_fails_the_whole_batch(store: BaseGraphStore) -> None:
    """A caller that catches a failed statement and goes on writing must not commit half a batch:
    Ladybug ends the transaction at the error and would run the rest in auto-commit mode."""
    with pytest.raises(GraphStoreError, match="rolled back because an earlier statement"):
        with store.batch():
            store.upsert_entities([OMIM])
            with pytest.raises(GraphStoreError):
                store._run("RETURN (")
            store.upsert_entities([PHENO])
    assert store.existing([OMIM.id, PHENO.id]) == set()
    with store.batch():  # the next batch starts afresh
        store.upsert_entities([OMIM, PHENO])
    assert store.existing([OMIM.id, PHENO.id]) == {OMIM.id, PHENO.id}


def test_ten_thousand_entity_batches(store: BaseGraphStore) -> None:
    n = 10_000
    entities = [
        Entity(id=f"HP:{i:07d}", name=f"Phenotype {i} ä", category="Phenotype", synonyms=[f"syn {i}"] if i % 2 else [])
        for i in range(n)
    ]
    relations = [
        Relation(subject=f"HP:{i:07d}", type="IS_A", object=f"HP:{i // 2:07d}", source="hpo") for i in range(1, n)
    ]
    first = store.upsert_entities(entities)
    assert (first.added, first.updated) == (n, 0)
    r1 = store.upsert_relations(relations)
    assert r1.added == n - 1
    st = store.stats()
    assert (st.entities, st.relations, st.relation_types) == (n, n - 1, {"IS_A": n - 1})
    again = store.upsert_entities(entities)
    assert again.unchanged == n
    r2 = store.upsert_relations(relations)
    assert (r2.added, r2.updated, r2.unchanged) == (0, 0, n - 1)
    assert store.stats() == st
    assert [e.id for e in store.find_entities("syn 9999")] == ["HP:0009999"]
    [p] = store.paths("HP:0000004", "HP:0000006", max_hops=4)
    assert p.nodes == ["HP:0000004", "HP:0000002", "HP:0000001", "HP:0000003", "HP:0000006"]


def test_stats_count_categories_and_types(store: BaseGraphStore) -> None:
    load(store)
    st = store.stats()
    assert st.backend == store.backend
    assert st.entities == 7 and st.relations == 6 and st.invalidated_relations == 0
    assert st.categories == {"Disease": 3, "Drug": 1, "Gene": 1, "Phenotype": 2}
    assert st.relation_types == {"ASSOCIATED_WITH": 1, "HAS_PHENOTYPE": 2, "SAME_AS": 2, "TREATS": 1}


def test_clear_removes_everything(store: BaseGraphStore) -> None:
    load(store)
    store.clear()
    st = store.stats()
    assert (st.entities, st.relations) == (0, 0)


def test_bad_ids_fail_clearly(store: BaseGraphStore) -> None:
    with pytest.raises(ValueError, match="has no prefix"):
        store.get_entity("154700")
    with pytest.raises(ValueError, match="give a subject"):
        store.relations()
    assert isinstance(GraphStoreError("x"), RuntimeError)


def test_scan_pages_in_id_order_and_existing(store: BaseGraphStore) -> None:
    load(store)
    page1 = store.scan_entities(limit=3)
    page2 = store.scan_entities(after=page1[-1].id, limit=10)
    ids = [e.id for e in page1 + page2]
    assert ids == sorted(e.id for e in GRAPH_ENTITIES)
    assert [e.id for e in store.scan_entities(with_xrefs=True)] == ["DOID:14323"]
    assert store.existing(["MIM:154700", "HP:404", "Gene::2200"]) == {"OMIM:154700", "NCBIGene:2200"}


@pytest.mark.neo4j
def test_concurrent_writers_leave_one_current_edge_per_fact(_neo4j_store: BaseGraphStore) -> None:
    """Two processes loading into Neo4j at once (the embedded store allows one writer): each upsert
    reads, then writes, so without a write lock both could create the same fact."""
    from concurrent.futures import ThreadPoolExecutor

    from kg.graph.neo4j_store import Neo4jGraphStore
    from tests.conftest import require_neo4j

    store = _neo4j_store
    store.clear()
    ids = [f"X:{i}" for i in range(41)]
    store.upsert_entities([Entity(id=i, name=i, category="Thing") for i in ids])
    facts = [Relation(subject=ids[0], type="LINKS", object=i, source="s") for i in ids[1:]]
    writers = [Neo4jGraphStore(**require_neo4j(), batch_size=5) for _ in range(4)]
    try:
        with ThreadPoolExecutor(len(writers)) as pool:
            list(pool.map(lambda w: w.upsert_relations(facts), writers))
        assert store.current_sources() == {"s": len(facts)}
    finally:
        for w in writers:
            w.close()
        store.clear()
