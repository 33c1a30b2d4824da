"""LLM triple extraction over real HTTP (a local OpenAI-compatible server, the real ``openai`` client)
and its merge into a real graph on both backends, with a real entity index (the offline MiniLM model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.llm_extract import (
    RELATION_TYPES,
    SYSTEM_PROMPT,
    Extraction,
    ExtractionError,
    TripleExtractor,
    extraction_schema,
    merge_extraction,
    slug_id,
)
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex, embedding_text
from kg.graph.base import BaseGraphStore
from kg.model import Entity
from kg.settings import DEFAULT_EMBEDDING_MODEL
from tests.support.llm_server import FakeLLMServer, Reply

SEED = [
    Entity(
        id="DRUGBANK:DB00331",
        name="Metformin",
        category="Drug",
        synonyms=["Glucophage"],
        description="A biguanide antihyperglycemic agent used for treating non-insulin-dependent diabetes mellitus.",
    ),
    Entity(
        id="DOID:9352",
        name="Type 2 diabetes mellitus",
        category="Disease",
        synonyms=["Type 2 diabetes", "T2DM", "NIDDM"],
        description="A diabetes mellitus characterized by high blood sugar, insulin resistance, and relative lack of "
        "insulin.",
    ),
    Entity(
        id="DOID:3083",
        name="Chronic obstructive pulmonary disease",
        category="Disease",
        description="A lung disease characterized by persistent airflow limitation.",
    ),
    Entity(
        id="HP:0001658",
        name="Myocardial infarction",
        category="Phenotype",
        description="Necrosis of the myocardium caused by an obstruction of the blood supply to the heart.",
    ),
    Entity(
        id="HP:0002153",
        name="Hyperkalemia",
        category="Phenotype",
        description="An abnormally increased potassium concentration in the blood.",
    ),
]

P1, P2, P3 = "PMID:100#s1", "PMID:200#s3", "PMID:300#s2"
TEXT1 = (
    "Metformin remains first-line therapy for T2DM. In patients with chronic obstructive lung disease, metformin "
    "was associated with lactic acidosis. Metformin is not a treatment for type 1 diabetes."
)
TEXT2 = "Metformin hydrochloride (DB00331) lowers fasting glucose in type 2 diabetes."
TEXT3 = "In this cohort, metformin did not cause lactic acidosis."
PARAPHRASE = ("chronic obstructive lung disease", "A chronic lung disease with persistent airflow limitation.")


def entity(name: str, type_: str, description: str, id_: str | None = None) -> dict[str, Any]:
    return {"name": name, "type": type_, "description": description, "id": id_}


def relation(subject: str, type_: str, object_: str, negated: bool = False, confidence: float = 0.9) -> dict[str, Any]:
    return {"subject": subject, "type": type_, "object": object_, "negated": negated, "confidence": confidence}


REPLY1 = {
    "entities": [
        entity("Metformin", "Drug", "An oral glucose-lowering drug given as first-line therapy."),
        entity("T2DM", "Disease", "A form of diabetes treated first-line with metformin."),
        entity(*PARAPHRASE[:1], "Disease", PARAPHRASE[1]),
        entity("Lactic acidosis", "Disease", "A build-up of lactate in the blood reported with metformin."),
        entity("type 1 diabetes", "Disease", "An autoimmune form of diabetes for which metformin is not a treatment."),
    ],
    "relations": [
        relation("Metformin", "treats", "T2DM"),  # sanitised to TREATS
        relation("metformin", "CAUSES", "Lactic acidosis", confidence=0.6),
        relation("Metformin", "TREATS", "type 1 diabetes", negated=True),
        relation("Metformin", "WORSENS", "chronic obstructive lung disease"),  # not in the vocabulary
        relation("Metformin", "INTERACTS_WITH", "insulin"),  # insulin is not among the entities
    ],
}
REPLY2 = {
    "entities": [
        entity("Metformin hydrochloride", "Drug", "The salt form of metformin.", "DB00331"),
        entity("type 2 diabetes", "Disease", "Diabetes with raised fasting glucose."),
    ],
    "relations": [relation("Metformin hydrochloride", "TREATS", "type 2 diabetes", confidence=0.8)],
}
REPLY3 = {
    "entities": [
        entity("metformin", "Drug", "A glucose-lowering drug studied in the cohort."),
        entity("lactic acidosis", "Disease", "A build-up of lactate in the blood."),
    ],
    "relations": [relation("metformin", "CAUSES", "lactic acidosis", negated=True, confidence=0.7)],
}


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder(DEFAULT_EMBEDDING_MODEL)


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def extractor_for(llm: FakeLLMServer, timeout_s: float = 10.0, max_retries: int = 2) -> TripleExtractor:
    return TripleExtractor(llm.base_url, "fake-model", api_key=None, timeout_s=timeout_s, max_retries=max_retries)


@pytest.fixture
def seeded(store: BaseGraphStore, tmp_path: Path, embedder: TextEmbedder) -> tuple[BaseGraphStore, EntityIndex]:
    store.upsert_entities(SEED)
    index = EntityIndex(tmp_path / "indexes", embedder)
    index.update(store, progress=False)
    return store, index


def test_extract_sends_the_schema_and_merges_into_the_graph(
    seeded: tuple[BaseGraphStore, EntityIndex], llm: FakeLLMServer
) -> None:
    store, index = seeded
    extractor = extractor_for(llm)
    llm.enqueue(REPLY1, REPLY2, REPLY3, REPLY2)

    # The paraphrase really is above the threshold with the offline model (and its near misses are not).
    probe = Entity(id="MEDKG:probe", name=PARAPHRASE[0], category="Disease", description=PARAPHRASE[1])
    hits = index.search(embedding_text(probe), k=2)
    assert hits[0][0] == "DOID:3083" and hits[0][1] >= 0.85 and hits[1][1] < 0.85
    t1d = Entity(id="MEDKG:probe", name="type 1 diabetes", category="Disease", description="An autoimmune diabetes.")
    assert index.search(embedding_text(t1d), k=1)[0][1] < 0.85

    # ---- passage 1: one entity reused by each rule, one new, relations added, bad ones dropped
    extraction = extractor.extract(TEXT1, P1)
    request = llm.requests[0]
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.body["model"] == "fake-model" and request.body["temperature"] == 0
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "extraction", "strict": True, "schema": extraction_schema()},
    }
    assert request.messages[0]["role"] == "system" and "TREATS" in request.messages[0]["content"]
    assert request.messages[-1] == {"role": "user", "content": TEXT1}
    assert request.headers.get("authorization") == "Bearer none"
    assert [r.type for r in extraction.relations] == ["TREATS", "CAUSES", "TREATS"]
    assert {d.reason for d in extraction.dropped} == {
        "unknown relation type 'WORSENS'",
        "object 'insulin' is not among the extracted entities",
    }

    first = merge_extraction(store, extraction, P1, entity_index=index)
    resolved = {e.name: (e.id, e.rule) for e in first.entities}
    assert resolved == {
        "Metformin": ("DRUGBANK:DB00331", "name"),
        "T2DM": ("DOID:9352", "synonym"),
        "chronic obstructive lung disease": ("DOID:3083", "embedding"),
        "Lactic acidosis": ("MEDKG:lactic-acidosis", "new"),
        "type 1 diabetes": ("MEDKG:type-1-diabetes", "new"),  # similar to T2DM, but not above the threshold
    }
    assert first.reused == {"name": 1, "synonym": 1, "embedding": 1}
    assert first.entities_added == ["MEDKG:lactic-acidosis", "MEDKG:type-1-diabetes"]
    assert next(e.score for e in first.entities if e.rule == "embedding") >= 0.85
    assert (first.relations.added, first.relations.updated, first.relations.invalidated) == (3, 0, 0)
    assert len(first.dropped) == 2 and any("WORSENS" in d.reason for d in first.dropped)

    new = store.get_entity("MEDKG:lactic-acidosis")
    assert new is not None and new.category == "Disease" and new.sources == ["llm-extraction"]
    assert new.description == "A build-up of lactate in the blood reported with metformin."
    assert store.get_entity("DOID:3083").name == "Chronic obstructive pulmonary disease"  # reused, not renamed
    treats = store.relations(subject="DRUGBANK:DB00331", object="DOID:9352", type="TREATS")
    assert len(treats) == 1
    assert treats[0].evidence == {"passages": [P1], "model": "fake-model"}
    assert treats[0].source == "llm-extraction" and treats[0].confidence == 0.9 and not treats[0].negated
    not_t1d = store.relations(subject="DRUGBANK:DB00331", object="MEDKG:type-1-diabetes", type="TREATS")
    assert [r.negated for r in not_t1d] == [True]

    # ---- passage 2: the same fact (by id and by synonym) restated: evidence merged in place
    second = merge_extraction(store, extractor.extract(TEXT2, P2), P2, entity_index=index)
    assert {e.name: e.rule for e in second.entities} == {"Metformin hydrochloride": "id", "type 2 diabetes": "synonym"}
    assert (second.relations.added, second.relations.updated) == (0, 1)
    treats = store.relations(subject="DRUGBANK:DB00331", object="DOID:9352", type="TREATS", include_invalid=True)
    assert len(treats) == 1 and treats[0].valid_to is None
    assert treats[0].evidence["passages"] == [P1, P2] and treats[0].confidence == 0.9

    # ---- passage 3: a contradiction invalidates the old edge and adds the negated one
    third = merge_extraction(store, extractor.extract(TEXT3, P3), P3, entity_index=index)
    assert {e.id: e.rule for e in third.entities} == {"DRUGBANK:DB00331": "name", "MEDKG:lactic-acidosis": "name"}
    assert (third.relations.added, third.relations.invalidated) == (1, 1)
    history = store.relations(subject="DRUGBANK:DB00331", object="MEDKG:lactic-acidosis", type="CAUSES")
    assert len(history) == 2
    old = next(r for r in history if not r.negated)
    assert old.valid_to is not None and old.evidence["passages"] == [P1]
    current = store.relations(
        subject="DRUGBANK:DB00331", object="MEDKG:lactic-acidosis", type="CAUSES", include_invalid=False
    )
    assert len(current) == 1 and current[0].negated and current[0].evidence["passages"] == [P3]

    # ---- re-running a passage changes nothing; nothing was ever deleted
    again = merge_extraction(store, extractor.extract(TEXT2, P2), P2, entity_index=index)
    assert (again.relations.added, again.relations.updated, again.relations.unchanged) == (0, 0, 1)
    stats = store.stats()
    assert (stats.entities, stats.relations, stats.invalidated_relations) == (len(SEED) + 2, 3, 1)
    assert llm.pending == 0 and len(llm.requests) == 4


def test_without_an_index_a_paraphrase_becomes_a_new_entity(store: BaseGraphStore) -> None:
    store.upsert_entities(SEED)
    extraction = Extraction.model_validate(
        {"entities": [entity(*PARAPHRASE[:1], "Disease", PARAPHRASE[1])], "relations": []}
    )
    result = merge_extraction(store, extraction, P1, model_name="m")
    assert [(e.id, e.rule) for e in result.entities] == [(slug_id(PARAPHRASE[0]), "new")]
    assert store.get_entity("MEDKG:chronic-obstructive-lung-disease") is not None


def test_malformed_json_reply_is_an_extraction_error(llm: FakeLLMServer) -> None:
    llm.enqueue('{"entities": [{"name": "Metformin", ')
    with pytest.raises(ExtractionError, match="not valid JSON") as info:
        extractor_for(llm).extract(TEXT1, P1)
    assert info.value.passage_id == P1 and str(info.value).startswith(f"passage {P1}: ")
    assert len(llm.requests) == 1  # a bad reply is not retried


def test_a_reply_that_fails_the_schema_is_an_extraction_error(llm: FakeLLMServer) -> None:
    llm.enqueue({"entities": [{"name": "Metformin"}], "relations": []})
    with pytest.raises(ExtractionError, match=r"does not match the extraction schema: entities\.0\.type"):
        extractor_for(llm).extract(TEXT1, P1)


def test_a_malformed_response_body_is_an_extraction_error(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply.raw(b'{"choices": [ this is not json'))
    with pytest.raises(ExtractionError, match="unreadable response"):
        extractor_for(llm).extract(TEXT1, P1)


def test_http_500_then_ok_succeeds_by_retrying(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply.error(500), REPLY2)
    extraction = extractor_for(llm).extract(TEXT2, P2)
    assert [r.type for r in extraction.relations] == ["TREATS"]
    assert len(llm.requests) == 2


def test_persistent_http_errors_give_up_after_the_retries(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply.error(503), Reply.error(503), Reply.error(503))
    with pytest.raises(ExtractionError, match="HTTP 503"):
        extractor_for(llm, max_retries=2).extract(TEXT2, P2)
    assert len(llm.requests) == 3


def test_a_timeout_is_retried(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply.json(REPLY2, delay_s=3.0), REPLY2)
    extraction = extractor_for(llm, timeout_s=0.5).extract(TEXT2, P2)
    assert len(extraction.entities) == 2 and len(llm.requests) == 2
    llm.enqueue(Reply.json(REPLY2, delay_s=3.0))
    with pytest.raises(ExtractionError, match="did not answer within 0.5 s"):
        extractor_for(llm, timeout_s=0.5, max_retries=0).extract(TEXT2, P2)


def test_reply_details(llm: FakeLLMServer) -> None:
    extractor = extractor_for(llm)
    assert extractor.extract("   ", P1) == Extraction(model="fake-model") and not llm.requests  # nothing to ask
    llm.enqueue(
        Reply(content="```json\n" + json.dumps(REPLY2) + "\n```"),
        Reply(content='{"entities": [', finish_reason="length"),
    )
    assert len(extractor.extract(TEXT2, P2).relations) == 1  # a fenced reply is read
    with pytest.raises(ExtractionError, match="cut off"):
        extractor.extract(TEXT2, P2)
    schema = extraction_schema()
    for definition in schema["$defs"].values():
        assert definition["additionalProperties"] is False
        assert definition["required"] == list(definition["properties"])
    assert schema["$defs"]["ExtractedRelation"]["properties"]["type"]["enum"] == list(RELATION_TYPES)
    assert "{" not in SYSTEM_PROMPT.format(entity_types="A", relation_types="B")


def test_entities_of_a_type_not_asked_for_are_dropped(llm: FakeLLMServer) -> None:
    """The schema's enum holds the server to the entity types only if it honours strict mode: a person
    named in a passage must not become a graph entity, nor "sAmE aS!!" a category."""
    reply = {
        "entities": [
            {"name": "Escherichia coli", "type": "Organism", "description": "", "id": None},
            {"name": "urinary tract infection", "type": "Disease", "description": "", "id": None},
            {"name": "Dr Bob Smith", "type": "Person", "description": "", "id": None},
            {"name": "UTI", "type": "sAmE aS!!", "description": "", "id": None},
        ],
        "relations": [
            {"subject": "Escherichia coli", "type": "CAUSES", "object": "urinary tract infection"},
            {"subject": "Dr Bob Smith", "type": "TREATS", "object": "urinary tract infection"},
        ],
    }
    for relation in reply["relations"]:
        relation.update(negated=False, confidence=0.9)
    llm.enqueue(Reply(content=json.dumps(reply)))
    out = extractor_for(llm).extract("E. coli causes UTI; Dr Bob Smith treated it.", P1)
    assert [(e.name, e.type) for e in out.entities] == [("urinary tract infection", "Disease")]
    assert out.relations == []
    assert [d.reason for d in out.dropped] == [
        "subject 'Escherichia coli' is of type 'Organism', not one of the entity types",
        "subject 'Dr Bob Smith' is of type 'Person', not one of the entity types",
    ]
