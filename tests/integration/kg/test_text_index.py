"""The passage indexes: real FAISS, real BM25 (Tantivy), the real offline embedder."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from kg.text_index import DocumentRecord, PassageRecord, TextIndex
from kg.vector_index import VectorIndexError

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
    # An answer's evidence leaves retracted passages out before the cut to k, not after it.
    index.add(PASSAGES[2:])
    index.commit()
    kept = index.search("marfan", k=3, floor=-1.0, exclude_retracted=True)
    assert len(kept) == 3 and all(h.doc_id != "PMID:1" and not h.retracted for h in kept)
    assert index.search("marfan", k=3, floor=-1.0)[0].doc_id == "PMID:1"  # shown, flagged, otherwise


def test_retracted_candidates_do_not_leave_fewer_than_k(tmp_path: Path, text_embedder) -> None:
    """When the best candidates are all retracted, the search looks past them for k that are not, in
    every mode; in hybrid, never past the cosine floor."""
    index = TextIndex(tmp_path, text_embedder)
    retracted = [
        PassageRecord(
            f"PMID:{100 + i}#s0", f"PMID:{100 + i}", f"Marfan syndrome causes aortic root dilation (cohort {i})."
        )
        for i in range(8)
    ]
    index.add([*retracted, *PASSAGES])
    index.commit()
    index.put_documents([DocumentRecord(p.doc_id, "x", "t", "J", 2020, (), None) for p in retracted])
    assert index.mark_documents([p.doc_id for p in retracted], retracted=True) == 8
    for mode in ("hybrid", "dense", "bm25"):
        hits = index.search(
            "marfan syndrome aortic root dilation", k=2, mode=mode, candidates=4, floor=-1.0, exclude_retracted=True
        )
        assert [h.doc_id for h in hits] == ["PMID:1", "PMID:1"], mode
    # above the floor there is nothing else to find: no widening to unrelated passages
    strict = index.search("marfan syndrome aortic root dilation", k=5, candidates=4, exclude_retracted=True)
    assert {h.doc_id for h in strict} == {"PMID:1"}


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


def test_a_crash_after_a_passage_changed_to_text_of_the_same_length_leaves_bm25_current(
    tmp_path: Path, text_embedder
) -> None:
    index = TextIndex(tmp_path, text_embedder)
    index.add([PassageRecord("IUXR:7#s1", "IUXR:7", "Small left pleural effusion.")])
    index.commit()
    index.add([PassageRecord("IUXR:7#s1", "IUXR:7", "Large left pleural effusion.")])  # the same length
    index.close()  # a crash before commit: BM25 files of the old text, the same ids and lengths
    reopened = TextIndex(tmp_path, text_embedder)
    assert [h.id for h in reopened.search("large effusion", k=1, mode="bm25")] == ["IUXR:7#s1"]
    assert reopened.search("small", k=1, mode="bm25") == []


def test_vectors_of_passages_removed_before_a_crash_are_dropped(tmp_path: Path, text_embedder) -> None:
    """Removal deletes the rows first; a process that stops before the vectors are saved leaves theirs
    behind, and they must not take the places of real passages in a search."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES)
    index.commit()
    assert index.remove(["PMID:1#s0", "PMID:1#s3"]) == 2
    index.close()  # the crash: the vectors on disk still hold all five
    reopened = TextIndex(tmp_path, text_embedder)
    assert len(reopened.vectors) == 3 and "PMID:1#s0" not in reopened.vectors
    hits = reopened.search("marfan syndrome aortic dilation", k=3, mode="dense", floor=-1.0)
    assert len(hits) == 3 and all(h.doc_id != "PMID:1" for h in hits)


def test_reindex_resumes_and_drops_stale_vectors(tmp_path: Path, text_embedder) -> None:
    """``reindex`` from the passage table alone: after the vector files are lost, an interrupted run
    keeps what it saved at its checkpoints and the next run embeds only the rest; vectors of passages
    no longer stored are dropped; the result searches like the original."""
    many = [PassageRecord(f"PMID:{i}#s0", f"PMID:{i}", f"passage {i}: {p.text}") for i, p in enumerate(PASSAGES * 4)]
    index = TextIndex(tmp_path, text_embedder)
    index.add(many)
    index.commit()
    expected = index.search("marfan syndrome aortic dilation", k=3)
    index.vectors.upsert(["PMID:gone#s0"], text_embedder.encode(["a passage deleted behind its back"]))
    index.vectors.save()
    index.close()
    shutil.rmtree(tmp_path / "passages.vectors")

    class Interrupted(RuntimeError):
        pass

    class FailingEmbedder:  # the real model, until the third batch
        def __init__(self) -> None:
            self.calls = 0
            self.dimension, self.signature = text_embedder.dimension, text_embedder.signature
            self.model_name = text_embedder.model_name

        def encode(self, texts: list[str]):  # noqa: ANN202
            self.calls += 1
            if self.calls == 3:
                raise Interrupted
            return text_embedder.encode(texts)

        encode_memoised = encode

    broken = TextIndex(tmp_path, FailingEmbedder())  # type: ignore[arg-type]
    try:
        broken.reindex(progress=False, page=5, batch=2, checkpoint=4)
    except Interrupted:
        pass
    broken.close()
    resumed = TextIndex(tmp_path, text_embedder)
    assert len(resumed.vectors) == 4  # the first checkpoint (two batches of two)
    r = resumed.reindex(progress=False, page=5, batch=2, checkpoint=4)
    assert (r.passages, r.embedded, r.removed, r.set_aside) == (20, 16, 0, [])
    assert len(resumed.vectors) == 20
    assert [h.id for h in resumed.search("marfan syndrome aortic dilation", k=3)] == [h.id for h in expected]
    # a vector whose passage is gone is dropped; a damaged file is set aside and rebuilt
    resumed.vectors.upsert(["PMID:gone#s0"], text_embedder.encode(["stale"]))
    resumed.vectors.save()
    assert resumed.reindex(progress=False).removed == 1
    resumed.close()
    (tmp_path / "passages.vectors" / "seg-000001.f32").write_bytes(b"not vectors")
    fresh = TextIndex(tmp_path, text_embedder)
    r = fresh.reindex(progress=False)
    assert r.embedded == 20 and [p.name.split(".damaged-")[0] for p in r.set_aside] == ["passages.vectors"]
    assert all(p.exists() for p in r.set_aside) and len(fresh.vectors) == 20
    fresh.close()


def test_an_index_embedded_by_another_model_is_refused_until_reindexed(tmp_path: Path, text_embedder) -> None:
    """Switching MEDKG_EMBEDDING_MODEL to a model of the same dimension: the old vectors are not mixed
    with queries embedded by the new one; the error says to reindex, and reindex embeds everything."""
    from kg.embedders import TextEmbedder, resolve_model_path

    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES)
    index.commit()
    index.close()
    # the same weights under another name stand for another model (what the index can tell apart)
    other = TextEmbedder(resolve_model_path(text_embedder.model_name)[0], dtype=text_embedder.dtype)
    assert other.model_name != text_embedder.model_name and other.dimension == text_embedder.dimension
    switched = TextIndex(tmp_path, other)
    with pytest.raises(VectorIndexError, match=r"this process embeds with .*medkg reindex --only passages"):
        switched.search("marfan syndrome aortic dilation", k=1)
    r = switched.reindex(progress=False)
    assert r.embedded == 5 and len(r.set_aside) == 1
    assert switched.search("marfan syndrome aortic dilation", k=1)[0].doc_id == "PMID:1"
    switched.close()
    with pytest.raises(VectorIndexError, match="this process embeds with"):  # and now the old model is refused
        TextIndex(tmp_path, text_embedder).vectors  # noqa: B018


HEPATITIS = [
    PassageRecord("PMID:10#s0", "PMID:10", "Hepatitis B virus infection is often chronic."),
    PassageRecord("PMID:11#s0", "PMID:11", "Hepatitis C virus infection is treated with sofosbuvir."),
    PassageRecord("PMID:12#s0", "PMID:12", "Insulin replaces the missing hormone in type 1 diabetes."),
    PassageRecord("PMID:13#s0", "PMID:13", "Lifestyle change comes first in type 2 diabetes."),
    PassageRecord("PMID:14#s0", "PMID:14", "Vitamin D deficiency softens the bones."),
]


def test_one_character_tokens_tell_passages_apart(tmp_path: Path, text_embedder) -> None:
    """ "hepatitis B" and "hepatitis C", "type 1" and "type 2" differ by one character only."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(HEPATITIS)
    index.commit()
    assert [d for d, _ in index.bm25_search("hepatitis C", 2)] == ["PMID:11#s0", "PMID:10#s0"]
    assert [d for d, _ in index.bm25_search("hepatitis B", 2)] == ["PMID:10#s0", "PMID:11#s0"]
    assert index.bm25_search("type 1 diabetes", 1)[0][0] == "PMID:12#s0"
    assert index.bm25_search("type 2 diabetes", 1)[0][0] == "PMID:13#s0"
    assert index.bm25_search("D", 1)[0][0] == "PMID:14#s0"
    assert index.search("hepatitis C", k=1)[0].id == "PMID:11#s0"
    # "a" is still an English stop word, not a token that matches every passage with an article.
    assert index.bm25_search("a", 5) == []


def test_a_data_dir_of_the_bm25s_release_opens_with_its_lexical_index_written_once(
    tmp_path: Path, text_embedder, caplog: pytest.LogCaptureFixture
) -> None:
    """A data dir of a medkg that kept BM25 in bm25s files (``passages.bm25``, no lexical meta): the
    first open queues every passage, the first search writes them, the old files go; later opens
    write nothing."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(HEPATITIS)
    index.commit()
    index.close()
    shutil.rmtree(tmp_path / "passages.tantivy")  # what that release had instead: bm25s files, no meta row
    (tmp_path / "passages.bm25").mkdir()
    (tmp_path / "passages.bm25" / "medkg.json").write_text("{}")
    with sqlite3.connect(tmp_path / "passages.sqlite") as db:
        db.execute("DELETE FROM meta WHERE key = 'lexical_tokenizer'")
        db.execute("DROP TABLE lexical_pending")

    with caplog.at_level("INFO", logger="kg.text_index"):
        reopened = TextIndex(tmp_path, text_embedder)
    assert any("5 passages to write" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "passages.bm25").exists()
    assert [d for d, _ in reopened.bm25_search("hepatitis C", 2)] == ["PMID:11#s0", "PMID:10#s0"]
    reopened.close()
    caplog.clear()
    with caplog.at_level("INFO", logger="kg.text_index"):
        again = TextIndex(tmp_path, text_embedder)
    assert not caplog.records and len(again.lexical) == 5
    assert again.bm25_search("type 1 diabetes", 1)[0][0] == "PMID:12#s0"


def test_a_lexical_index_of_another_tokenizer_is_written_again(tmp_path: Path, text_embedder) -> None:
    index = TextIndex(tmp_path, text_embedder)
    index.add(HEPATITIS)
    index.commit()
    index.close()
    with sqlite3.connect(tmp_path / "passages.sqlite") as db:
        db.execute("UPDATE meta SET value = 1 WHERE key = 'lexical_tokenizer'")
    reopened = TextIndex(tmp_path, text_embedder)
    assert reopened._db.execute("SELECT count(*) FROM lexical_pending").fetchone()[0] == 5
    assert [d for d, _ in reopened.bm25_search("hepatitis C", 2)] == ["PMID:11#s0", "PMID:10#s0"]
    assert reopened._db.execute("SELECT count(*) FROM lexical_pending").fetchone()[0] == 0


def test_a_commit_writes_only_the_passages_it_changed(tmp_path: Path, text_embedder) -> None:
    """The lexical index grows in place: a commit writes the passages added, changed or removed since
    the last one, not the corpus."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES)
    index.commit()
    written: list[list[str]] = []
    write = index.lexical.write
    index.lexical.write = lambda ids, tokens_of: written.append(list(ids)) or write(ids, tokens_of)  # type: ignore[method-assign]
    index.add([PassageRecord("PMID:9#s0", "PMID:9", "Losartan in Marfan syndrome.")])
    index.remove(["PMID:1#s0"])
    index.commit()
    index.commit()  # nothing pending: nothing written
    assert written == [["PMID:1#s0", "PMID:9#s0"]]
    assert index.bm25_search("losartan", 1)[0][0] == "PMID:9#s0"
    assert "PMID:1#s0" not in {d for d, _ in index.bm25_search("marfan syndrome aortic", 10)}
    assert len(index.lexical) == len(PASSAGES)


def test_passages_of_stop_words_only_have_no_bm25_index(tmp_path: Path, text_embedder) -> None:
    index = TextIndex(tmp_path, text_embedder)
    index.add([PassageRecord("X:1#s0", "X:1", "The of and.")])
    index.commit()  # no token in any passage: nothing to find by words, not an error
    assert index.bm25_search("the of", 3) == []
    assert [h.id for h in index.search("the of", k=3, floor=-1.0)] == ["X:1#s0"]  # dense still answers
    index.close()
    reopened = TextIndex(tmp_path, text_embedder)
    assert reopened.bm25_search("of", 3) == []
    reopened.add(HEPATITIS[:2])
    reopened.commit()
    assert reopened.bm25_search("sofosbuvir", 3)[0][0] == "PMID:11#s0"
    reopened.close()
    assert TextIndex(tmp_path, text_embedder).bm25_search("hepatitis C", 1)[0][0] == "PMID:11#s0"


def test_the_index_kind_follows_its_size_on_every_load(tmp_path: Path, text_embedder) -> None:
    """Loading past ``flat_max`` passages switches the vectors to IVF at the commit (not only at a
    reindex); removing passages below it makes them exact again. Search keeps working either way."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES)
    index.commit()
    assert index.vectors.kind == "flat"
    index.vectors.flat_max = 100
    many = [
        PassageRecord(f"PMID:{100 + i}#s0", f"PMID:{100 + i}", f"note {i}: {p.text}")
        for i, p in enumerate(PASSAGES * 30)
    ]
    index.add(many)
    index.commit()
    assert len(index.vectors) == 155 and index.vectors.kind == "ivf"
    assert index.search("fracture risk in osteoporosis", k=3)[0].text.endswith("fracture risk in osteoporosis.")
    index.close()
    reopened = TextIndex(tmp_path, text_embedder)
    assert reopened.vectors.kind == "ivf"
    reopened.vectors.flat_max = 100
    reopened.remove([p.id for p in many[:100]])
    reopened.commit()
    assert len(reopened.vectors) == 55 and reopened.vectors.kind == "flat"


def test_the_passage_count_is_kept_with_the_passages(tmp_path: Path, text_embedder) -> None:
    """len() reads a count kept in the transactions that add and remove passages (no count(*) per
    search); a table of an older medkg without it is counted once."""
    index = TextIndex(tmp_path, text_embedder)
    index.add(PASSAGES)
    index.add(PASSAGES[:2])  # unchanged: not counted again
    index.add([PassageRecord("PMID:1#s0", "PMID:1", "Marfan syndrome: changed text.")])  # changed, same id
    assert len(index) == 5
    assert index.remove(["PMID:2#s0", "PMID:404#s0"]) == 1 and len(index) == 4
    index.commit()
    index.close()
    with sqlite3.connect(tmp_path / "passages.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'passages'").fetchone() == (4,)
        db.execute("DELETE FROM meta WHERE key = 'passages'")  # as an older medkg left it
    reopened = TextIndex(tmp_path, text_embedder)
    assert len(reopened) == 4
    reopened.remove_documents(["PMID:3"])
    assert len(reopened) == 3 == reopened._db.execute("SELECT count(*) FROM passages").fetchone()[0]
    reopened.close()


def test_a_reader_opens_each_generation_the_writer_publishes(tmp_path: Path, text_embedder) -> None:
    """An API replica's passage index (read-only) finds what the writer commits after it opened, at its
    next search once the writer has published the generation, without being opened again."""
    writer = TextIndex(tmp_path, text_embedder)
    writer.add([PassageRecord("PMID:1#s0", "PMID:1", "Losartan slowed aortic root dilatation in Marfan syndrome.")])
    writer.commit()
    reader = TextIndex(tmp_path, text_embedder, read_only=True)
    reader.generations.every_s = 0  # looks at every search (in service: at most once a second)
    assert [h.id for h in reader.search("aortic root dilatation", k=5)] == ["PMID:1#s0"]
    writer.add([PassageRecord("PMID:2#s0", "PMID:2", "Valproic acid remains effective for generalized epilepsy.")])
    assert [h.id for h in reader.search("valproic acid epilepsy", k=5)] == []  # not committed yet
    writer.commit()
    assert [h.id for h in reader.search("valproic acid epilepsy", k=5)] == ["PMID:2#s0"]
    assert [h for h, _ in reader.bm25_search("valproic", 5)] == ["PMID:2#s0"] and len(reader) == 2
    with pytest.raises(VectorIndexError, match="read-only"):
        reader.add([PassageRecord("PMID:3#s0", "PMID:3", "x")])
    with pytest.raises(VectorIndexError, match="read-only"):
        reader.commit()
