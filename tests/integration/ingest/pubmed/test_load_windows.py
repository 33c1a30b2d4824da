"""PubMed loads where what changes an article comes before its citation record is written: the
records of a checkpoint window wait for the checkpoint, and a deletion, a retraction notice or a
revised version met meanwhile must act on them as on stored ones. Real embedded store, real
pipeline and embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.model import Article, Deletion, Section
from kg.graph.ladybug_store import LadybugGraphStore
from kg.nlp import build_pipeline
from kg.text_index import TextIndex
from tests.conftest import open_ladybug

LONG = "Cancer was rare. " + "Atenolol slowed aortic root dilatation in MFS. " * 3


def article(pmid: str, text: str = "Atenolol slowed aortic root dilatation.", **extra) -> Article:
    return Article(pmid=pmid, title=f"Atenolol trial {pmid}.", sections=[Section(text=text)], **extra)


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[LadybugGraphStore]:
    store = open_ladybug(tmp_path)
    yield store
    store.close()


@pytest.fixture(scope="module")
def nlp():  # noqa: ANN201 - spacy Language
    return build_pipeline()


def loader(graph: LadybugGraphStore, tmp_path: Path, nlp, embedder, **kw) -> PubmedLoader:
    return PubmedLoader(graph, TextIndex(tmp_path / "idx", embedder), nlp, None, progress=False, **kw)


@pytest.mark.parametrize("batch_size", [256, 1])
def test_a_deletion_wins_over_a_record_waiting_for_the_checkpoint(
    graph: LadybugGraphStore, tmp_path: Path, nlp, text_embedder, batch_size: int
) -> None:
    load = loader(graph, tmp_path, nlp, text_embedder, batch_size=batch_size)
    # 100 deleted before its first checkpoint; 200 stored, then revised and deleted in one window;
    # 300 deleted and sent again in the same window.
    load.load([article("100"), Deletion(pmids=["100"]), article("200")])
    report = load.load([article("200", LONG), Deletion(pmids=["200"]), article("300"), Deletion(pmids=["300"])])
    load.load([article("300", LONG)])
    docs = load.text_index.get_documents(["PMID:100", "PMID:200", "PMID:300"])
    assert {d: doc.deleted for d, doc in docs.items()} == {"PMID:100": True, "PMID:200": True, "PMID:300": True}
    assert report.read["documents deleted"] == 2
    assert load.text_index.document_count() == 0
    assert list(load.text_index.iter_document_ids("PMID:")) == []

    # A later file that sends them again, revised: withdrawn stays withdrawn.
    again = load.load([article("100", LONG), article("200", "Atenolol helps."), article("300", "Atenolol helps.")])
    assert again.notes == {"articles withdrawn earlier by a DeleteCitation (not loaded again)": 3}
    for doc_id in ("PMID:100", "PMID:200", "PMID:300"):
        assert graph.get_entity(doc_id).obsolete
        assert load.text_index.document_passages(doc_id) == []


@pytest.mark.parametrize("batch_size", [256, 1])
def test_a_retraction_notice_in_the_same_window_flags_the_citation_record(
    graph: LadybugGraphStore, tmp_path: Path, nlp, text_embedder, batch_size: int
) -> None:
    load = loader(graph, tmp_path, nlp, text_embedder, batch_size=batch_size)
    report = load.load([article("200"), article("300", retraction_of=["200"])])
    assert load.text_index.get_documents(["PMID:200"])["PMID:200"].retracted
    assert report.read["documents flagged retracted"] == 1
    assert graph.get_entity("PMID:200").description.startswith("RETRACTED.")
    passages = load.text_index.get(load.text_index.document_passages("PMID:200"))
    assert passages and all(p.retracted for p in passages.values())
    # the notice again changes nothing
    again = load.load([article("300", "Retracted: see the notice.", retraction_of=["200"])])  # a revised notice
    assert again.read.get("documents flagged retracted", 0) == 0


def test_a_revised_version_in_a_later_batch_of_the_same_run_retires_the_old_passages(
    graph: LadybugGraphStore, tmp_path: Path, nlp, text_embedder
) -> None:
    load = loader(graph, tmp_path, nlp, text_embedder, batch_size=1, max_words=12)
    report = load.load([article("100", LONG), article("100", "Atenolol helps.")])  # v1, then v2, one window
    assert report.read["passages retired"] > 0
    assert load.text_index.document_passages("PMID:100") == ["PMID:100#s0"]
    old = [e.id for e in graph.scan_entities() if e.category == "Passage" and e.id != "PMID:100#s0"]
    assert old and all(graph.get_entity(p).obsolete for p in old)
    assert {h.id for h in load.text_index.search("cancer aortic root dilatation", k=10, floor=-1)} == {"PMID:100#s0"}
