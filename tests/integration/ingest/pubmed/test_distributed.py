"""The Ray Data pipeline (``medkg ingest pubmed --ray``) against the one-process loader, on the real
shared PubMed files (every source; the two largest exports left to test_load.py) and a local Ray of 2
workers: the same graph, passages, mentions and search rankings on both backends; resumable by shard."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ingest.pubmed.readers import expand_paths, iter_records
from kg.model import CO_MENTIONED, MENTIONS
from kg.settings import load_settings
from service import ingestion
from service.container import Container
from tests.conftest import neo4j_settings, shared
from tests.integration.ingest.pubmed.test_load import hpo_terms
from tests.support.qa_store import ENTITIES

pytestmark = pytest.mark.slow

# The two largest exports (335 of the shared files' 475 articles) are left to test_load.py, which loads every
# file: what is compared here is two pipelines, on every source's files and one export of 93 articles.
LARGEST = {"qi29_pubmed_result.xml", "solitude6060_pubmed_result.xml"}


@contextmanager
def fresh(request: pytest.FixtureRequest, backend: str, data_dir: Path) -> Iterator[Container]:
    """A container on an empty graph of ``backend`` holding a few entities in the entity index (the
    linker's vector fallback, which the workers read from the data dir) and HPO's terms in the lexicon."""
    settings = load_settings(
        data_dir=data_dir, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=4, embedding_dtype="float32"
    )
    graph = None
    if backend == "neo4j":
        graph = request.getfixturevalue("_neo4j_store")
        graph.clear()
    c = Container(settings, graph=graph)
    try:
        c.graph.upsert_entities(ENTITIES)
        c.entity_index.update(c.graph, progress=False)
        c.graph.upsert_entities(hpo_terms())
        yield c
    finally:
        c.close()
        if graph is not None:
            graph.clear()


def snapshot(c: Container, queries: list[str]) -> dict[str, Any]:
    """What a load made: graph counts, every passage, every MENTIONS and CO_MENTIONED edge, the top 10
    of each query."""
    docs = list(c.text_index.iter_document_ids("PMID:"))
    passage_ids = [p for d in docs for p in c.text_index.document_passages(d)]
    stored = c.text_index.get(passage_ids)
    passages = {p: (r.doc_id, r.text, r.embed_text, r.retracted) for p, r in stored.items()}
    mentions = sorted(
        (pid, n["id"], _json(rel.get("evidence")), rel.get("confidence"))
        for pid, rel, n in c.graph.edge_rows(passage_ids, [MENTIONS], "out")
    )
    entity_ids = sorted({m[1] for m in mentions})
    co = sorted(
        (a, n["id"], _json(rel.get("evidence"))) for a, rel, n in c.graph.edge_rows(entity_ids, [CO_MENTIONED], "out")
    )
    stats = c.graph.stats()
    return {
        "categories": stats.categories,
        "relation types": stats.relation_types,
        "documents": docs,
        "passages": passages,
        "mentions": mentions,
        "co-mentions": co,
        "searches": [[h.id for h in c.text_index.search(q, k=10)] for q in queries],
    }


def _json(value: Any) -> str:
    return json.dumps(json.loads(value) if isinstance(value, str) else value, sort_keys=True)


def queries_from(c: Container) -> list[str]:
    """50 searches: the titles of 50 loaded articles."""
    docs = list(c.text_index.iter_document_ids("PMID:"))[:50]
    first = c.text_index.get([f"{d}#s0" for d in docs])
    return [first[f"{d}#s0"].text.split("\n")[0] for d in docs if f"{d}#s0" in first]


def test_a_ray_load_equals_a_one_process_load_on_both_backends(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Today's loader on the embedded store, then the Ray pipeline (its shards prepared once, merged into
    each backend): the same graph, passages, mentions, co-mentions and top 10 of 50 searches. (Embedding
    in float32: in bfloat16 a vector depends a little on the batch it was computed in, and one in 50
    rankings swapped two neighbours at ranks 9 and 10.)"""
    files = [p for p in expand_paths([shared("pubmed_xml")]) if p.suffix == ".xml" and p.name not in LARGEST]
    with fresh(request, "ladybug", tmp_path / "plain") as c:
        plain = ingestion.load_literature(c, iter_records(files), "pubmed", link=True, extract=False, progress=False)
        queries = queries_from(c)
        expected = snapshot(c, queries)
    assert plain.summary.read["mentions"] > 600 and len(queries) == 50

    backends = ["ladybug"] + (["neo4j"] if neo4j_settings() or os.environ.get("CI") == "true" else [])
    shards = tmp_path / "shards"
    for backend in backends:  # Ray prepares the shards once; they are merged into each backend
        with fresh(request, backend, tmp_path / f"ray-{backend}") as c:
            loaded = ingestion.load_literature_ray(
                c, files, "pubmed", link=True, progress=False, workers=2, shard_dir=shards, keep_shards=True
            )
            assert loaded.prepared.shards == (len(files) if backend == "ladybug" else 0)
            assert loaded.merged == len(files) and loaded.merged_before == 0
            read = loaded.summary.read
            # every vector made by the workers, none here
            assert read["passage vectors made by the workers"] == read["passages embedded"] > 300, read
            for what in ("articles read", "passages", "mentions"):
                assert read[what] == plain.summary.read[what], (backend, what)
            assert [str(p) for p in loaded.summary.problems] == [str(p) for p in plain.summary.problems]
            got = snapshot(c, queries)
        for key in expected:
            assert got[key] == expected[key], (backend, key)


def test_a_ray_load_resumes_by_shard(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch) -> None:
    """A merge that fails part way keeps the shards merged before the failure and the written files;
    the re-run prepares nothing again, merges only the rest, and ends as an uninterrupted load."""
    from ingest.pubmed import distributed

    files = expand_paths([shared("pubmed_xml", "ncbiutils"), shared("pubmed_xml", "biopython_entrez")])
    with fresh(request, "ladybug", tmp_path / "ray") as c:
        real_read = distributed.read_shard
        broken = {"after": 10}

        def read_shard(path: Path):  # the eleventh shard's file cannot be read
            if broken["after"] == 0:
                raise OSError(f"{path}: disk error")
            broken["after"] -= 1
            yield from real_read(path)

        monkeypatch.setattr(distributed, "read_shard", read_shard)
        with pytest.raises(OSError, match="disk error"):  # a checkpoint every few records: shards merged before
            ingestion.load_literature_ray(c, files, "pubmed", link=True, progress=False, workers=1, checkpoint_every=2)
        monkeypatch.setattr(distributed, "read_shard", real_read)
        again = ingestion.load_literature_ray(c, files, "pubmed", link=True, progress=False, workers=1)
        assert again.prepared.shards == 0  # every shard was written by the first run
        assert 0 < again.merged_before < len(files) and again.merged_before + again.merged == len(files)
        resumed = snapshot(c, [])
        third = ingestion.load_literature_ray(c, files, "pubmed", link=True, progress=False, workers=1)
        assert third.merged_before == len(files) and third.merged == third.prepared.shards == 0
        assert not list((c.settings.data_dir / "shards").glob("*.parquet"))  # merged shards are dropped
    with fresh(request, "ladybug", tmp_path / "plain") as c:
        ingestion.load_literature(c, iter_records(files), "pubmed", link=True, extract=False, progress=False)
        assert snapshot(c, []) == resumed
