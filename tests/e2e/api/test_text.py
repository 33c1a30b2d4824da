"""Passage search and question linking over HTTP: the real app, a real embedded store, real indexes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.model import Article, Section
from kg.model import Entity
from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp: Path = tmp_path_factory.mktemp("api-text")
    container = Container(load_settings(data_dir=tmp, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2))
    container.graph.upsert_entities(
        [
            Entity(id="DOID:14323", name="Marfan syndrome", category="Disease"),
            Entity(id="HP:0002616", name="Aortic root aneurysm", category="Phenotype", synonyms=["aortic dilatation"]),
            Entity(id="HP:0001658", name="Myocardial infarction", category="Phenotype", synonyms=["Heart attack"]),
        ]
    )
    container.entity_index.update(container.graph, progress=False)
    articles = [
        Article(
            pmid="1001",
            title="Losartan versus atenolol in Marfan syndrome.",
            sections=[Section(text="Aortic dilatation progressed slowly in children with Marfan syndrome.")],
            year=2014,
        ),
        Article(
            pmid="1002",
            title="Retracted trial of statins.",
            sections=[Section(text="Statins reduced myocardial infarction.")],
            retracted=True,
        ),
    ]
    PubmedLoader(container.graph, container.text_index, container.nlp, container.linker, progress=False).load(articles)
    with TestClient(create_app(container=container)) as c:
        yield c


def test_search_returns_cited_passages(client: TestClient) -> None:
    r = client.get("/v1/search", params={"q": "marfan syndrome aortic dilation", "k": 3})
    assert r.status_code == 200
    hits = r.json()
    assert hits and hits[0]["doc_id"] == "PMID:1001" and hits[0]["year"] == 2014
    assert all(re.fullmatch(r"PMID:\d+#s\d+", h["id"]) for h in hits)
    assert hits[0]["title"] == "Losartan versus atenolol in Marfan syndrome."
    statins = client.get("/v1/search", params={"q": "statins myocardial infarction", "mode": "bm25"}).json()
    assert statins[0]["doc_id"] == "PMID:1002" and statins[0]["retracted"] is True
    assert client.get("/v1/search", params={"q": "quarterly tax deadline"}).json() == []
    assert client.get("/v1/search", params={"q": "x", "mode": "nope"}).status_code == 422
    assert client.get("/v1/search", params={"q": ""}).status_code == 422


def test_link_finds_entities_in_a_question(client: TestClient) -> None:
    r = client.get("/v1/link", params={"q": "Does losartan slow aortic dilatation in Marfan syndrome?"})
    assert r.status_code == 200
    linked = {e["id"]: m["method"] for m in r.json() for e in m["entities"]}
    assert linked == {"HP:0002616": "lexicon", "DOID:14323": "lexicon"}
    heart = client.get("/v1/link", params={"q": "heart attacks"}).json()
    assert [e["id"] for m in heart for e in m["entities"]] == ["HP:0001658"]
