"""`relink`: documents loaded before an ontology (or before a change of the linking rules) are linked
again from their stored passages, on both backends; reports from the report table."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ingest.pubmed.load import MESH_HEADING_SOURCE, PubmedLoader
from ingest.radiology_reports import HAS_FINDING, RadiologyReport, ReportLoader, read_iu_reports
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker, Lexicon
from kg.model import CO_MENTIONED, MENTIONS, Relation
from kg.nlp import build_pipeline
from kg.text_index import TextIndex
from tests.conftest import shared
from tests.support.articles import MARFAN_ONTOLOGY as ONTOLOGY
from tests.support.articles import marfan
from tests.support.studies import RADIOLOGY_ONTOLOGY as RADIOLOGY

ECTOPIA = next(e for e in ONTOLOGY if e.id == "HP:0001083")  # "lens dislocation" in the abstract
ATENOLOL = next(e for e in ONTOLOGY if e.id == "DRUGBANK:DB00335")


def pubmed_loader(store: BaseGraphStore, index: TextIndex, **kw) -> PubmedLoader:
    """A loader whose linker knows the graph as it is now (less the MeSH headings' names, as the
    container's document linker)."""
    nlp = build_pipeline()
    lexicon = Lexicon.build(store, nlp, exclude_sources=[MESH_HEADING_SOURCE])
    return PubmedLoader(store, index, nlp, EntityLinker(nlp, lexicon), progress=False, **kw)


def mentioned(store: BaseGraphStore, passage_id: str) -> set[str]:
    return {n.entity.id for n in store.neighbours(passage_id, rel_types=[MENTIONS], direction="out")}


def co_mention(store: BaseGraphStore, a: str, b: str) -> Relation | None:
    a, b = sorted((a, b))
    found = store.current_relations([Relation(subject=a, type=CO_MENTIONED, object=b, source="pubmed")])
    return next(iter(found.values()), None)


def test_relink_adds_new_links_ends_stale_ones_and_moves_co_mention_evidence(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    store.upsert_entities([e for e in ONTOLOGY if e is not ECTOPIA])
    index = TextIndex(tmp_path / "idx", text_embedder)
    first = pubmed_loader(store, index)
    first.load([marfan("100"), marfan("101")])
    assert "HP:0001083" not in mentioned(store, "PMID:100#s0")
    pair = co_mention(store, "DOID:14323", "DRUGBANK:DB00335")  # Marfan + atenolol: s0 and s2 of each
    assert pair.evidence == {
        "sentences": ["PMID:100#s0", "PMID:100#s2", "PMID:101#s0", "PMID:101#s2"],
        "count": 4,
    }
    assert index.get_documents(["PMID:100"])["PMID:100"].linked_with == first.linker.signature
    aortic = co_mention(store, "DOID:14323", "HP:0002616").evidence
    assert aortic["count"] == 4

    # The ontology grows (ectopia lentis) and atenolol is withdrawn: relink one of the two documents.
    store.upsert_entities([ECTOPIA, ATENOLOL.model_copy(update={"obsolete": True})])
    loader = pubmed_loader(store, index)
    assert loader.linker.signature != first.linker.signature
    report = loader.relink(["PMID:100"])
    assert report.read["documents relinked"] == 1
    assert report.read["mentions added"] == 1 and report.read["mentions ended"] == 1
    assert mentioned(store, "PMID:100#s0") == {"DOID:14323", "HP:0002616", "HP:0001083"}
    lens = store.neighbours("PMID:100#s0", rel_types=[MENTIONS], direction="out")
    lens = next(n.relation for n in lens if n.entity.id == "HP:0001083")
    passage_text = store.get_entity("PMID:100#s0").description
    assert [passage_text[a:b] for a, b in lens.evidence["spans"]] == ["lens dislocation"]
    ended = [r for r in store.relations(subject="PMID:100#s0", type=MENTIONS) if r.valid_to is not None]
    assert [r.object for r in ended] == ["DRUGBANK:DB00335"]  # ended, kept in the history
    assert "DRUGBANK:DB00335" in mentioned(store, "PMID:101#s0")  # not relinked yet
    # The relinked document's sentences left the atenolol pair; the other document's stay.
    pair = co_mention(store, "DOID:14323", "DRUGBANK:DB00335")
    assert pair.evidence == {"sentences": ["PMID:101#s0", "PMID:101#s2"], "count": 2}
    # Ectopia lentis meets Marfan syndrome (via its long form) and the aortic root in sentence 1.
    assert co_mention(store, "HP:0001083", "DOID:14323").evidence == {"sentences": ["PMID:100#s1"], "count": 1}
    assert co_mention(store, "HP:0001083", "HP:0002616").evidence == {"sentences": ["PMID:100#s1"], "count": 1}
    # Pairs whose sentences did not change are untouched.
    assert co_mention(store, "DOID:14323", "HP:0002616").evidence == aortic

    # Both documents: the first is already linked by this linker, the second is relinked; the
    # atenolol pair has no sentence left and ends.
    report = loader.relink(["PMID:100", "PMID:101"])
    assert report.read["documents already linked by this linker"] == 1 and report.read["documents relinked"] == 1
    assert co_mention(store, "DOID:14323", "DRUGBANK:DB00335") is None
    assert any(r.valid_to for r in store.relations(subject="DOID:14323", object="DRUGBANK:DB00335"))
    assert co_mention(store, "HP:0001083", "DOID:14323").evidence["count"] == 2

    # Nothing left to do; forcing it changes nothing either; an unknown id is counted, not fatal.
    before = store.stats()
    again = loader.relink(["PMID:100", "PMID:101", "PMID:999"])
    assert again.read["documents already linked by this linker"] == 2
    assert again.read["documents not in the passage index"] == 1
    forced = loader.relink(["PMID:100", "PMID:101"], force=True)
    assert forced.read["documents whose links are unchanged"] == 2
    assert forced.relations.added == forced.relations.updated == forced.relations.invalidated == 0
    assert store.stats() == before

    # A load with the current linker records its signature: nothing to relink afterwards.
    loader.load([marfan("102")])
    assert loader.relink(["PMID:102"]).read["documents already linked by this linker"] == 1


def test_relink_counts_co_mentions_past_the_listed_ones_exactly(
    store: BaseGraphStore, tmp_path: Path, text_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair's evidence lists at most MAX_EVIDENCE sentence ids and counts the rest: relinking a
    document whose sentences are among the unlisted ones takes them out of the count too."""
    monkeypatch.setattr("ingest.pubmed.load.MAX_EVIDENCE", 2)
    store.upsert_entities(ONTOLOGY)
    index = TextIndex(tmp_path / "idx", text_embedder)
    pubmed_loader(store, index).load([marfan("100"), marfan("101")])
    listed = ["PMID:100#s0", "PMID:100#s2"]
    assert co_mention(store, "DOID:14323", "DRUGBANK:DB00335").evidence == {"sentences": listed, "count": 4}
    aortic = co_mention(store, "DOID:14323", "HP:0002616").evidence
    store.upsert_entities([ATENOLOL.model_copy(update={"obsolete": True})])  # atenolol withdrawn
    loader = pubmed_loader(store, index)
    assert loader.relink(["PMID:101"]).read["documents relinked"] == 1  # its two sentences were not listed
    assert co_mention(store, "DOID:14323", "DRUGBANK:DB00335").evidence == {"sentences": listed, "count": 2}
    assert co_mention(store, "DOID:14323", "HP:0002616").evidence == aortic  # unchanged pairs untouched
    loader.relink(["PMID:100"])
    assert co_mention(store, "DOID:14323", "DRUGBANK:DB00335") is None  # no sentence left: ended


def test_relink_of_a_long_abstract_keeps_passages_and_sentence_numbers(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    """Several passages: each mention lands in its passage with the span of the load, each co-mention
    in the sentence of the load."""
    store.upsert_entities(ONTOLOGY)
    index = TextIndex(tmp_path / "idx", text_embedder)
    loader = pubmed_loader(store, index, max_words=12)
    results = "Cancer was rare. " + "Atenolol slowed aortic root dilatation in MFS. " * 3
    loader.load([marfan(abstract=results)])
    passages = index.document_passages("PMID:100")
    assert len(passages) > 2

    def snapshot() -> tuple[dict, dict]:
        edges = {
            (p, n.entity.id): n.relation.evidence for p in passages for n in store.neighbours(p, rel_types=[MENTIONS])
        }
        ids = sorted({entity for _, entity in edges})
        pairs = {(a, b): co_mention(store, a, b) for a, b in itertools.combinations(ids, 2)}
        return edges, {k: r.evidence for k, r in pairs.items() if r is not None}

    before = snapshot()
    assert any(len(ev["sentences"]) > 2 for ev in before[1].values())
    forced = loader.relink(["PMID:100"], force=True)
    assert forced.read["documents whose links are unchanged"] == 1
    # A new linker (the cancer entity withdrawn) relinks it: the rest stays exactly as loaded.
    store.upsert_entities([next(e for e in ONTOLOGY if e.id == "DOID:162").model_copy(update={"obsolete": True})])
    pubmed_loader(store, index, max_words=12).relink(["PMID:100"])
    edges, pairs = snapshot()
    assert {k: v for k, v in before[0].items() if k[1] != "DOID:162"} == edges
    assert {k: v for k, v in before[1].items() if "DOID:162" not in k} == pairs


def test_relink_of_stored_reports(store: BaseGraphStore, tmp_path: Path, text_embedder) -> None:
    reports_csv, projections = (
        shared("iu_xray_reports", "indiana_reports_dev.csv"),
        shared("iu_xray_reports", "indiana_projections.csv"),
    )
    reports = [r for r in itertools.islice(read_iu_reports(reports_csv, projections), 40)]
    assert all(isinstance(r, RadiologyReport) for r in reports)
    pneumothorax = next(e for e in RADIOLOGY if e.id == "HP:0002107")
    store.upsert_entities([e for e in RADIOLOGY if e is not pneumothorax])
    nlp = build_pipeline()
    index = TextIndex(tmp_path / "idx", text_embedder)

    def loader() -> ReportLoader:
        return ReportLoader(store, index, nlp, EntityLinker(nlp, Lexicon.build(store, nlp)), progress=False)

    loaded = loader().load(reports)
    assert loaded.documents_added == 40
    assert "HP:0002107" not in mentioned(store, "IUXR:6#s0")

    store.upsert_entities([pneumothorax])
    relinked = loader().relink()
    assert relinked.read == {"reports relinked": 40, "passages embedded": 0}
    # "No pneumothorax or large pleural effusion.": the new mention, negated as a load would say.
    edges = {n.entity.id: n.relation for n in store.neighbours("IUXR:6#s0", rel_types=[MENTIONS], direction="out")}
    assert edges["HP:0002107"].evidence.get("negated") is True
    with_finding = [r.uid for r in reports if any(t.startswith("Pneumothorax") for t in r.mesh)]
    for uid in with_finding:
        findings = store.neighbours(f"IUXR:{uid}", rel_types=[HAS_FINDING], direction="out")
        assert "HP:0002107" in {n.entity.id for n in findings}
    assert loader().relink().read == {"reports already linked by this linker": 40}


def test_a_documents_table_of_an_older_medkg_gains_the_linker_column(tmp_path: Path, text_embedder) -> None:
    import sqlite3

    directory = tmp_path / "idx"
    directory.mkdir()
    db = sqlite3.connect(directory / "passages.sqlite")
    db.execute(
        "CREATE TABLE documents (id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, title TEXT NOT NULL, journal TEXT, "
        "year INTEGER, authors TEXT NOT NULL, doi TEXT, retracted INTEGER NOT NULL DEFAULT 0, "
        "deleted INTEGER NOT NULL DEFAULT 0)"
    )
    db.execute("INSERT INTO documents VALUES ('PMID:1', 'abc', 'Old', NULL, 2001, '[]', NULL, 0, 0)")
    db.commit()
    db.close()
    index = TextIndex(directory, text_embedder)
    old = index.get_documents(["PMID:1"])["PMID:1"]
    assert (old.title, old.year, old.linked_with) == ("Old", 2001, None)
    assert list(index.iter_document_ids("PMID:")) == ["PMID:1"] and list(index.iter_document_ids("IUXR:")) == []
    index.put_documents([old.__class__(**{**old.__dict__, "linked_with": "sig"})])
    assert index.get_documents(["PMID:1"])["PMID:1"].linked_with == "sig"
    index.close()


def test_an_interrupted_relink_resumes_without_counting_twice(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    store.upsert_entities([e for e in ONTOLOGY if e is not ECTOPIA])
    index = TextIndex(tmp_path / "idx", text_embedder)
    pubmed_loader(store, index).load([marfan(pmid=str(500 + i)) for i in range(12)])
    store.upsert_entities([ECTOPIA])
    ids = [f"PMID:{500 + i}" for i in range(12)]

    def interrupted():
        for i, doc_id in enumerate(ids):
            if i == 11:
                raise KeyboardInterrupt  # Ctrl-C after 11 documents: batches of 2, checkpoints every 4
            yield doc_id

    loader = pubmed_loader(store, index, batch_size=2, checkpoint_every=4)
    with pytest.raises(KeyboardInterrupt):
        loader.relink(interrupted())
    signature = loader.linker.signature
    done = [d for d, doc in index.get_documents(ids).items() if doc.linked_with == signature]
    assert len(done) == 8  # what reached a checkpoint; the rest is redone on the next run
    resumed = pubmed_loader(store, index).relink(ids)
    assert resumed.read["documents already linked by this linker"] == 8
    # Documents 9 and 10 were relinked before the interruption but not checkpointed: found unchanged.
    assert resumed.read["documents whose links are unchanged"] == 2 and resumed.read["documents relinked"] == 2
    assert co_mention(store, "HP:0001083", "DOID:14323").evidence["count"] == 12  # sentence 1 of each, once
