"""The passage indexes: real FAISS, real BM25 (bm25s), the real offline embedder."""

from __future__ import annotations

from pathlib import Path

from kg.text_index import DocumentRecord, PassageRecord, TextIndex

PASSAGES = [
    PassageRecord("PMID:1#s0", "PMID:1", "Marfan syndrome causes aortic root dilation and lens dislocation."),
    PassageRecord("PMID:1#s3", "PMID:1", "Beta blockers slow the rate of aortic dilatation in these patients."),
    PassageRecord("PMID:2#s0", "PMID:2", "Metformin lowers blood glucose in type 2 diabetes mellitus."),
    PassageRecord("PMID:3#s0", "PMID:3", "Febrile seizures in children are usually benign."),
    PassageRecord("PMID:4#s0", "PMID:4", "Zoledronic acid reduces fracture risk in osteoporosis."),
]


def test_add_search_persist_and_remove(tmp_path: Path, text_embedder) -> None:
    index = TextIndex(tmp_path, text_embedder)
    first = index.add(PASSAGES)
    index.commit()
    assert (first.added, first.embedded) == (5, 5)
    again = index.add(PASSAGES)  # re-adding the same text costs nothing
    assert (again.added, again.changed, again.unchanged, again.embedded) == (0, 0, 5, 0)

    hits = index.search("marfan syndrome aortic dilation", k=3)
    assert [h.doc_id for h in hits[:2]] == ["PMID:1", "PMID:1"]
    assert hits[0].bm25_rank is not None and hits[0].dense_rank is not None
    assert index.search("sugar control with metformin", k=1, mode="dense")[0].id == "PMID:2#s0"
    assert index.search("zoledronic", k=1, mode="bm25")[0].id == "PMID:4#s0"  # a rare keyword: BM25's job
    assert index.search("zoledronic", k=5, mode="dense")[0].id == "PMID:4#s0"
    # The floor: an unrelated question gets nothing rather than the least bad passage.
    assert index.search("how do I file quarterly taxes", k=3) == []
    assert index.search("how do I file quarterly taxes", k=3, floor=-1.0) != []

    index.close()
    reopened = TextIndex(tmp_path, text_embedder)
    assert len(reopened) == 5 and len(reopened.vectors) == 5
    assert reopened.search("marfan syndrome aortic dilation", k=1)[0].doc_id == "PMID:1"

    # A changed passage is re-embedded; removal by document drops text, vectors and keywords.
    changed = reopened.add([PassageRecord("PMID:3#s0", "PMID:3", "Absence seizures respond to ethosuximide.")])
    assert (changed.changed, changed.embedded) == (1, 1)
    assert reopened.remove_documents(["PMID:1"]) == 2
    reopened.commit()
    assert len(reopened) == 3 and "PMID:1#s0" not in reopened.vectors
    assert all(h.doc_id != "PMID:1" for h in reopened.search("marfan aortic", k=5, floor=-1.0))
    assert reopened.search("ethosuximide", k=1, mode="bm25")[0].id == "PMID:3#s0"


def test_documents_carry_citations_and_flags(tmp_path: Path, text_embedder) -> None:
    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES[:2])
    index.commit()
    index.put_documents([DocumentRecord("PMID:1", "abc", "Marfan review", "J Med", 2019, ("Smith JA",), "10.1/x")])
    doc = index.get_documents(["PMID:1"])["PMID:1"]
    assert (doc.title, doc.year, doc.authors, doc.retracted) == ("Marfan review", 2019, ("Smith JA",), False)
    assert index.mark_documents(["PMID:1"], retracted=True) == 1
    hit = index.search("marfan", k=1)[0]
    assert hit.retracted and hit.title == "Marfan review" and hit.year == 2019
    assert index.mark_documents(["PMID:1"], retracted=True) == 0  # already flagged


def test_bm25_is_rebuilt_when_its_files_lag_the_table(tmp_path: Path, text_embedder) -> None:
    """A crash after the table was written but before BM25 was rebuilt heals on the next open."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES[:3])
    index.commit()
    index.add(PASSAGES[3:])  # not committed: BM25 files describe 3 passages
    index.vectors.save()
    index.close()
    reopened = TextIndex(tmp_path, text_embedder)
    assert reopened.search("zoledronic", k=1, mode="bm25")[0].id == "PMID:4#s0"
