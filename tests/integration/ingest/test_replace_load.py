"""``medkg ingest obo|edges --replace``: a file that is the whole of its source, loaded again corrected,
ends (never deletes) the edges of that source it no longer states, on both backends; loaded again as it
was it changes nothing; a file with problems ends nothing; other sources are left alone."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from ingest.edges import edge_items, load_mapping
from ingest.hpo import hpo_items
from ingest.obo import obo_items
from ingest.writer import OlderRelease, ingest
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from tests.conftest import SHARED_DATA
from tests.support.ontology_data import INDICATIONS, need

V1 = """format-version: 1.2
ontology: doid

[Term]
id: DOID:1
name: root

[Term]
id: DOID:2
name: disease two
synonym: "old name" EXACT []
is_a: DOID:1
relationship: part_of DOID:3

[Term]
id: DOID:3
name: disease three
is_a: DOID:1

[Term]
id: DOID:4
name: disease four
is_a: DOID:1
"""
# DOID:2 loses its part_of and gets another synonym, DOID:3 is gone, DOID:4 is obsolete and replaced
V2 = """format-version: 1.2
ontology: doid

[Term]
id: DOID:1
name: root

[Term]
id: DOID:2
name: disease two
synonym: "new name" EXACT []
is_a: DOID:1

[Term]
id: DOID:4
name: obsolete disease four
is_obsolete: true
replaced_by: DOID:2
"""


def current(store: BaseGraphStore, subject: str) -> set[tuple[str, str, str]]:
    return {(r.type, r.object, r.source) for r in store.relations(subject=subject, include_invalid=False)}


def test_a_corrected_obo_file_ends_what_it_no_longer_states(store: BaseGraphStore, tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1.obo", tmp_path / "v2.obo"
    v1.write_text(V1)
    v2.write_text(V2)
    ingest(store, obo_items(v1, source="doid", replace=True), "doid", progress=False)
    # another source's edge on the same terms, and the same file loaded without --replace
    store.upsert_relations([Relation(subject="DOID:3", type="IS_A", object="DOID:2", source="curator")])
    store.upsert_entities([Entity(id="DOID:1", name="root", synonyms=["base"], sources=["curator"])])
    assert ingest(store, obo_items(v2, source="doid"), "doid", progress=False).relations.invalidated == 0
    assert ("PART_OF", "DOID:3", "doid") in current(store, "DOID:2")  # additive: nothing ended
    assert store.get_entity("DOID:2").synonyms == ["old name", "new name"]  # merged

    report = ingest(store, obo_items(v2, source="doid", replace=True), "doid", progress=False)
    assert report.relations.invalidated == 3
    assert report.read["edges of doid the file no longer states (ended)"] == 3
    assert current(store, "DOID:2") == {("IS_A", "DOID:1", "doid")}
    assert current(store, "DOID:3") == {("IS_A", "DOID:2", "curator")}  # another source's edge stays
    assert current(store, "DOID:4") == {("REPLACED_BY", "DOID:2", "doid")}
    # the file's own entities take its statement as it is now; one another source also states is merged
    assert store.get_entity("DOID:2").synonyms == ["new name"]
    assert store.get_entity("DOID:1").synonyms == ["base"] and store.get_entity("DOID:1").sources == ["doid", "curator"]
    history = [r for r in store.relations(subject="DOID:2") if r.type == "PART_OF"]
    assert len(history) == 1 and history[0].valid_to is not None  # ended, kept

    again = ingest(store, obo_items(v2, source="doid", replace=True), "doid", progress=False)
    assert again.relations.added == again.relations.updated == again.relations.invalidated == 0

    # a file with a problem ends nothing: the line it could not read may hold an edge it still states
    broken = tmp_path / "v3.obo"
    broken.write_text(V2.replace("id: DOID:4", "id: not a curie").replace("is_a: DOID:1", "", 1))
    report = ingest(store, obo_items(broken, source="doid", replace=True), "doid", progress=False)
    assert report.problem_count == 1 and report.relations.invalidated == 0
    assert "--replace: nothing ended, the file had problems (fix them and load it again)" in report.notes
    assert current(store, "DOID:2") == {("IS_A", "DOID:1", "doid")}


def test_a_corrected_edge_list_ends_the_rows_it_dropped_or_changed(store: BaseGraphStore, tmp_path: Path) -> None:
    need(INDICATIONS)
    mapping = load_mapping("pharmacotherapydb")
    lines = INDICATIONS.read_text().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    first = ingest(store, edge_items(INDICATIONS, mapping, replace=True), mapping.source, progress=False)
    assert first.relations.added == len(rows) == 1_388

    # Galantamine's row dropped, Donepezil's DM (TREATS) corrected to SYM (PALLIATES)
    assert rows[0].split("\t")[:2] == ["DOID:10652", "DB00843"] and rows[1].split("\t")[1] == "DB00674"
    corrected = tmp_path / "indications.tsv"
    corrected.write_text(header + rows[0].replace("\tDM\t", "\tSYM\t") + "".join(rows[2:]))
    report = ingest(store, edge_items(corrected, mapping, replace=True), mapping.source, progress=False)
    assert report.relations.invalidated == 2 and report.relations.added == 1
    types = {(r.subject, r.type) for r in store.relations(object="DOID:10652", include_invalid=False)}
    assert ("DRUGBANK:DB00843", "PALLIATES") in types and ("DRUGBANK:DB00843", "TREATS") not in types
    assert not any(s == "DRUGBANK:DB00674" for s, _ in types)
    assert store.current_sources()[mapping.source] == len(rows) - 1


def test_a_newer_release_loaded_whole_supersedes_the_older_but_not_another_file(
    store: BaseGraphStore, tmp_path: Path
) -> None:
    def release(name: str, text: str, version: str) -> Path:
        path = tmp_path / name
        path.write_text(text.replace("ontology: doid", f"data-version: {version}\nontology: doid"))
        return path

    old = release("old.obo", V1, "doid/releases/2024-01-01")
    subset = release("slim.obo", V1.replace("disease three", "disease three (slim)"),
                     "doid/releases/2025-06-01/subsets/DO_rare_slim.obo")  # fmt: skip
    new = release("new.obo", V2, "doid/releases/2025-06-01")
    ingest(store, obo_items(old, source="doid", replace=True), "doid", progress=False)
    ingest(store, obo_items(subset, source="doid", replace=True), "doid", progress=False)
    assert store.current_sources() == {"doid:2024-01-01": 4, "doid/DO_rare_slim:2025-06-01": 4}

    report = ingest(store, obo_items(new, source="doid", replace=True), "doid", progress=False)
    assert report.read["edges of the older release doid:2024-01-01 (ended)"] == 4
    assert store.current_sources() == {"doid:2025-06-01": 2, "doid/DO_rare_slim:2025-06-01": 4}
    assert current(store, "DOID:2") == {
        ("IS_A", "DOID:1", "doid:2025-06-01"),
        ("IS_A", "DOID:1", "doid/DO_rare_slim:2025-06-01"),
        ("PART_OF", "DOID:3", "doid/DO_rare_slim:2025-06-01"),
    }


def test_an_older_release_loaded_whole_after_a_newer_one_is_refused(store: BaseGraphStore, tmp_path: Path) -> None:
    def release(name: str, text: str, version: str) -> Path:
        path = tmp_path / name
        path.write_text(text.replace("ontology: doid", f"data-version: {version}\nontology: doid"))
        return path

    ingest(store, obo_items(release("new.obo", V2, "doid/releases/2025-06-01"), source="doid", replace=True), "doid",
           progress=False)  # fmt: skip
    before = (store.current_sources(), store.get_entity("DOID:2"), current(store, "DOID:2"))
    old = release("old.obo", V1, "doid/releases/2024-01-01")
    with pytest.raises(OlderRelease, match="holds doid:2025-06-01, newer than doid:2024-01-01"):
        ingest(store, obo_items(old, source="doid", replace=True), "doid", progress=False)
    assert (store.current_sources(), store.get_entity("DOID:2"), current(store, "DOID:2")) == before
    assert "old name" not in (store.get_entity("DOID:2").synonyms or [])
    again = ingest(store, obo_items(release("same.obo", V2, "doid/releases/2025-06-01"), source="doid", replace=True),
                   "doid", progress=False)  # fmt: skip
    assert again.relations.invalidated == 0 and store.current_sources() == before[0]


DOREPORTS = SHARED_DATA / "disease_ontology" / "doreports"


def test_each_do_report_is_a_source_of_its_own(store: BaseGraphStore) -> None:
    """The disease-symptom report and each xref report are sources of their own: ``--replace`` of one ends
    nothing of another's, and drops no xref another file stated."""
    symptoms, omim, mesh = (DOREPORTS / f for f in ("disease-symptom.tsv", "OMIMinDO.tsv", "MESHinDO.tsv"))
    need(symptoms, omim, mesh)
    ingest(store, edge_items(symptoms, load_mapping("do_disease_symptom")), "s", progress=False, link=False)
    ingest(store, edge_items(omim, load_mapping("do_xrefs_by_vocabulary")), "o", progress=False, link=False)
    before = store.current_sources()
    assert before == {"doid-reports/disease-symptom": 2222}
    omim_xrefs = set(store.get_entity("DOID:0050120").xrefs)
    assert omim_xrefs == {"OMIMPS:267700"}

    mapping = load_mapping("do_xrefs_by_vocabulary")
    report = ingest(store, edge_items(mesh, mapping, replace=True), "m", progress=False, link=False)
    assert report.relations.invalidated == 0 and store.current_sources() == before
    assert omim_xrefs <= set(store.get_entity("DOID:0050120").xrefs)  # OMIMinDO's xrefs stay
    assert store.get_entity("DOID:0050120").sources == ["doid-reports/disease-symptom", "doid-reports/OMIMinDO",
                                                         "doid-reports/MESHinDO"]  # fmt: skip
    # and the symptom report loaded whole leaves the xref reports' xrefs
    ingest(store, edge_items(symptoms, load_mapping("do_disease_symptom"), replace=True), "s", progress=False,
           link=False)  # fmt: skip
    assert omim_xrefs <= set(store.get_entity("DOID:0050120").xrefs)


def test_a_replace_load_of_the_symptom_report_ends_its_edges_under_the_former_source(
    store: BaseGraphStore, tmp_path: Path
) -> None:
    """A graph loaded when every DO report's source was ``doid-reports``: the symptom report loaded whole
    restates its edges under its own source and ends the old ones (every ``doid-reports`` edge was one
    of its), but merges with (drops nothing of) the entities those loads stated."""
    report_file = tmp_path / "disease-symptom.tsv"
    report_file.write_text(
        "disease_id\tdisease_label\tsymptom_id\tsymptom_label\n"
        "DOID:1205\tallergic disease\tSYMP:0000900\tallergic reaction\n"
        "DOID:820\tmyocarditis\tSYMP:0000061\tinflammation\n"
    )
    store.upsert_entities([
        Entity(id="DOID:1205", name="allergic disease", category="Disease", xrefs=["MESH:D004342"],
               sources=["doid-reports"]),
        Entity(id="SYMP:0000900", name="allergic reaction", category="Symptom", sources=["doid-reports"]),
        Entity(id="SYMP:0000001", name="gone", category="Symptom", sources=["doid-reports"]),
    ])  # fmt: skip
    store.upsert_relations([
        Relation(subject="DOID:1205", type="HAS_SYMPTOM", object="SYMP:0000900", source="doid-reports"),
        Relation(subject="DOID:1205", type="HAS_SYMPTOM", object="SYMP:0000001", source="doid-reports"),
    ])  # fmt: skip
    mapping = load_mapping("do_disease_symptom")
    report = ingest(store, edge_items(report_file, mapping, replace=True), "s", progress=False, link=False)
    assert report.relations.invalidated == 2
    assert report.read["edges of doid-reports the file no longer states (ended)"] == 2
    assert store.current_sources() == {"doid-reports/disease-symptom": 2}
    assert current(store, "DOID:1205") == {("HAS_SYMPTOM", "SYMP:0000900", "doid-reports/disease-symptom")}
    assert store.get_entity("DOID:1205").xrefs == ["MESH:D004342"]  # another report's xref stays
    again = ingest(store, edge_items(report_file, mapping, replace=True), "s", progress=False, link=False)
    assert again.relations.added == again.relations.updated == again.relations.invalidated == 0


def test_a_replace_load_keeps_every_row_of_an_entity_that_straddles_a_batch(
    store: BaseGraphStore, tmp_path: Path
) -> None:
    xrefs = tmp_path / "xrefs.tsv"
    xrefs.write_text(
        'id\tlabel\txref\n"DOID:1"\t"d one"\t"MIM:100100"\n"DOID:1"\t"d one"\t"MESH:D000001"\n'
        '"DOID:1"\t"d one"\t"UMLS_CUI:C0000001"\n"DOID:2"\t"d two"\t"MIM:100200"\n'
    )
    mapping = load_mapping("do_xrefs")
    for batch in (20_000, 2, 1):
        ingest(store, edge_items(xrefs, mapping, replace=True), "x", progress=False, entity_batch=batch, link=False)
        assert store.get_entity("DOID:1").xrefs == ["OMIM:100100", "MESH:D000001", "UMLS:C0000001"], batch
    # a row the file dropped is still dropped when the entity's rows straddle a batch
    xrefs.write_text('id\tlabel\txref\n"DOID:1"\t"d one"\t"MIM:100100"\n"DOID:1"\t"d one"\t"MESH:D000001"\n')
    ingest(store, edge_items(xrefs, mapping, replace=True), "x", progress=False, entity_batch=1, link=False)
    assert store.get_entity("DOID:1").xrefs == ["OMIM:100100", "MESH:D000001"]


HPOA_HEADER = (
    "#description: x\n#version: {v}\ndatabase_id\tdisease_name\tqualifier\thpo_id\treference\tevidence\tonset\t"
    "frequency\tsex\tmodifier\taspect\tbiocuration\n"
)
HPO_OBO = """format-version: 1.2
data-version: hp/releases/{v}

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001

[Term]
id: HP:0001250
name: Seizure
is_a: HP:0000118
"""


def test_a_newer_hpo_release_with_problems_ends_no_older_release(store: BaseGraphStore, tmp_path: Path) -> None:
    """A truncated phenotype.hpoa of a newer release: what it could not read may still be stated, so the
    older release's annotations stay current (the report says so)."""
    line = "OMIM:{}\tDisease {}\t\tHP:0001250\tPMID:{}\tPCS\t\t1/2\t\t\tP\tHPO:x\n"
    rows = "".join(line.format(100000 + i, i, i) for i in range(400))

    def release(version: str, truncate: bool = False) -> Path:
        folder = tmp_path / version
        folder.mkdir()
        (folder / "hp.obo").write_text(HPO_OBO.format(v=version))
        data = gzip.compress((HPOA_HEADER.format(v=version) + rows).encode())
        (folder / "phenotype.hpoa").write_bytes(data[: len(data) // 2] if truncate else data)
        return folder

    first = ingest(store, hpo_items(release("2024-01-01"), genes=False), "hpo", progress=False, link=False)
    assert first.problem_count == 0 and store.current_sources() == {"hpo:2024-01-01": 402}
    report = ingest(store, hpo_items(release("2025-01-01", truncate=True), genes=False), "hpo", progress=False,
                    link=False)  # fmt: skip
    assert report.problem_count == 1 and "reading stopped" in report.problems[0].message
    assert report.relations.invalidated == 0
    assert "newer release: older releases not ended, the files had problems (fix them and load again)" in report.notes
    assert store.current_sources()["hpo:2024-01-01"] == 402
    # the whole file loaded again ends them
    whole = ingest(store, hpo_items(release("2025-01-02"), genes=False), "hpo", progress=False, link=False)
    assert whole.problem_count == 0 and set(store.current_sources()) == {"hpo:2025-01-02"}


def test_an_undated_release_is_never_newer_than_a_dated_one(store: BaseGraphStore, tmp_path: Path) -> None:
    undated, dated = tmp_path / "undated.obo", tmp_path / "dated.obo"
    undated.write_text(V1.replace("ontology: doid", "data-version: doid/releases/latest\nontology: doid"))
    dated.write_text(V2.replace("ontology: doid", "data-version: doid/releases/2025-06-01\nontology: doid"))
    ingest(store, obo_items(undated, source="doid", replace=True), "doid", progress=False)
    assert set(store.current_sources()) == {"doid:latest"}
    report = ingest(store, obo_items(dated, source="doid", replace=True), "doid", progress=False)  # not refused
    assert report.problem_count == 0 and store.current_sources()["doid:2025-06-01"] == 2


def test_a_gene_with_a_blank_symbol_is_named_by_its_id(store: BaseGraphStore, tmp_path: Path) -> None:
    """genes_to_phenotype.txt with a white-space symbol or HPO's "-" (none; NCBIGene:7467 in the 2025-01-16
    release): the load goes on, the gene is named by its id."""
    folder = tmp_path / "hpo"
    folder.mkdir()
    (folder / "hp.obo").write_text(HPO_OBO.format(v="2024-01-01"))
    line = "OMIM:100000\tDisease\t\tHP:0001250\tPMID:1\tPCS\t\t1/2\t\t\tP\tHPO:x\n"
    (folder / "phenotype.hpoa").write_text(HPOA_HEADER.format(v="2024-01-01") + line)
    (folder / "genes_to_phenotype.txt").write_text(
        "ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id\n"
        "7454\t \tHP:0001250\tSeizure\t-\tOMIM:100000\n"
        "7467\t-\tHP:0001250\tSeizure\t-\tOMIM:100000\n"
        "4313\tMMP2\tHP:0001250\tSeizure\t-\tOMIM:100000\n"
    )
    report = ingest(store, hpo_items(folder), "hpo", progress=False, link=False)
    assert report.problem_count == 0 and report.read["genes without a symbol (named by their id)"] == 2
    assert store.get_entity("NCBIGene:7454").name == "NCBIGene:7454"
    assert store.get_entity("NCBIGene:7467").name == "NCBIGene:7467"
    assert store.get_entity("NCBIGene:4313").name == "MMP2"
    assert current(store, "NCBIGene:7454") == {
        ("ASSOCIATED_WITH", "HP:0001250", "hpo:2024-01-01"),
        ("ASSOCIATED_WITH", "OMIM:100000", "hpo:2024-01-01"),
    }
