"""Question answering over HTTP on both backends: the real app, real stores, real FAISS/BM25 and the
real embedding model; the LLM path against a local OpenAI-compatible server (tests/llm_server.py)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from kg.model import Relation
from service.api.app import create_app
from service.container import Container
from tests.support.llm_server import FakeLLMServer, Reply
from tests.support.qa_store import qa_container


@pytest.fixture(scope="module", params=["ladybug", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def app_container(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    with qa_container(request, tmp_path_factory) as container:
        yield container


@pytest.fixture(scope="module")
def client(app_container: Container) -> Iterator[TestClient]:
    with TestClient(create_app(container=app_container)) as c:
        yield c


def _qa(client: TestClient, question: str, **body: object) -> dict:
    r = client.post("/v1/qa", json={"question": question, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_marfan_phenotypes_are_answered_with_hpo_facts_and_pmids(client: TestClient) -> None:
    out = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?")
    assert out["mode"] == "extractive" and not out["insufficient_evidence"]
    cited = {c["id"]: c for c in out["citations"]}
    assert "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166" in cited
    assert any(re.fullmatch(r"PMID:20591885#s\d+", c) for c in cited)
    fact = cited["KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"]
    assert fact["kind"] == "kg" and "Arachnodactyly" in fact["text"] and "PMID:20591885" in fact["text"]
    assert fact["url"] == "https://pubmed.ncbi.nlm.nih.gov/20591885/"
    # every sentence of the answer carries a citation, and every inline id is listed
    sentences = [s for s in re.split(r"(?<=\.)\s+(?=[A-Z])", out["answer"]) if s]
    assert sentences and all("[" in s for s in sentences)
    inline = {i.strip() for b in re.findall(r"\[([^\]]+)\]", out["answer"]) for i in b.split(";")}
    assert inline == set(cited)
    assert {"link", "embed", "graph_facts", "graph_rank", "text", "bundle", "answer", "total"} <= set(out["timings_ms"])
    assert 0 < out["evidence"]["tokens"] <= out["evidence"]["budget"] == 1500
    assert {e["id"] for e in out["linked_entities"]} >= {"OMIM:154700"}


def test_drugs_that_treat_epilepsy_cite_the_indication_edges(client: TestClient) -> None:
    out = _qa(client, "What drugs treat epilepsy?")
    cited = {c["id"] for c in out["citations"]}
    assert {"KG:DRUGBANK:DB00313-TREATS-DOID:1826", "KG:DRUGBANK:DB00555-TREATS-DOID:1826"} <= cited
    assert "Valproic acid" in out["answer"] and "Lamotrigine" in out["answer"]


def test_a_question_about_nothing_in_the_graph_abstains(client: TestClient) -> None:
    out = _qa(client, "What is the capital of France?")
    assert out["insufficient_evidence"] is True
    assert out["citations"] == [] and out["confidence"] == 0.0
    assert "[" not in out["answer"]


def test_a_question_listing_phenotypes_routes_to_the_differential(client: TestClient) -> None:
    out = _qa(client, "A child presents with seizures, microcephaly and hypotonia: which diagnoses are likely?")
    assert [d["disease"] for d in out["differential"]][:1] == ["OMIM:100001"]
    assert {m["disease_term"] for m in out["differential"][0]["matches"]} >= {"HP:0001250", "HP:0000252"}
    cited = {c["id"]: c for c in out["citations"]}
    assert {"KG:OMIM:100001-HAS_PHENOTYPE-HP:0001250", "KG:OMIM:100001-HAS_PHENOTYPE-HP:0000252"} <= cited.keys()
    # each fact links to the publications of its own annotation, not to those of another one
    assert cited["KG:OMIM:100001-HAS_PHENOTYPE-HP:0001250"]["url"].rstrip("/").endswith("/11")
    assert cited["KG:OMIM:100001-HAS_PHENOTYPE-HP:0000252"]["url"].rstrip("/").endswith("/12")
    assert out["answer"].index("Microcephaly-epilepsy syndrome") < out["answer"].index("Congenital hypotonia")
    assert "differential" in out["timings_ms"]
    # the evidence meets every ranked disease first (its best match), then each one's further matches
    facts = [r["id"].split("-HAS_PHENOTYPE-")[0].removeprefix("KG:") for r in out["retrieved"] if r["kind"] == "kg"]
    ranked = [d["disease"] for d in out["differential"] if d["disease"] in facts]  # those with a matched fact
    assert len(ranked) > 1 and facts[: len(ranked)] == ranked and len(facts) > len(ranked), (ranked, facts)
    plain = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?")
    assert plain["differential"] == []
    # a gene named in the question narrows the ranking to its diseases, and the answer says so
    gene = _qa(client, "A child with seizures, microcephaly and hypotonia has a TBCK variant: which diagnoses?")
    assert [d["disease"] for d in gene["differential"]] == ["OMIM:100002"]
    assert "Diseases (those associated with TBCK) ranked" in gene["answer"]
    assert "KG:OMIM:100002-HAS_PHENOTYPE-HP:0001252" in {c["id"] for c in gene["citations"]}
    # a phenotype the question negates is excluded from the case, and the answer says so
    negated = _qa(client, "A child with seizures and microcephaly but no hypotonia: which diagnoses are likely?")
    flags = {e["id"]: e["negated"] for e in negated["linked_entities"] if e["id"].startswith("HP:")}
    assert flags == {"HP:0001250": False, "HP:0000252": False, "HP:0001252": True}
    assert [d["disease"] for d in negated["differential"]][:1] == ["OMIM:100001"]
    assert all(m["observed"] != "HP:0001252" for d in negated["differential"] for m in d["matches"])
    assert "to the observed phenotypes (Hypotonia excluded):" in negated["answer"]


def test_paths_between_linked_entities_are_returned_and_cited(client: TestClient) -> None:
    out = _qa(client, "Is losartan used for Marfan syndrome?", options={"hops": 2})
    assert out["kg_paths"], out
    steps = [s for p in out["kg_paths"] for s in p["steps"]]
    assert any(s["type"] == "TREATS" and s["citation"] == "KG:DRUGBANK:DB00678-TREATS-ORPHA:558" for s in steps)
    assert "KG:DRUGBANK:DB00678-TREATS-ORPHA:558" in {c["id"] for c in out["citations"]}


def test_a_path_step_cites_the_stated_fact_not_a_denial_of_it(client: TestClient, app_container: Container) -> None:
    denial = Relation(
        subject="DRUGBANK:DB00678", type="TREATS", object="ORPHA:558", source="a negative trial", negated=True
    )
    app_container.graph.upsert_relations([denial])
    try:
        out = _qa(client, "Is losartan used for Marfan syndrome?", options={"hops": 2})
        assert "KG:DRUGBANK:DB00678-NOT_TREATS-ORPHA:558" in {r["id"] for r in out["retrieved"]}
        steps = [
            s
            for p in out["kg_paths"]
            for s in p["steps"]
            if (s["subject"], s["type"]) == ("DRUGBANK:DB00678", "TREATS")
        ]
        assert steps and {s["citation"] for s in steps} == {"KG:DRUGBANK:DB00678-TREATS-ORPHA:558"}
    finally:
        app_container.graph.invalidate_relations([denial])


def test_an_edge_on_several_paths_is_one_fact(app_container: Container) -> None:
    retriever = app_container.qa.retriever
    question = "Is losartan used for Marfan syndrome with aortic root dilatation?"
    _, groups, _ = retriever.link(question)
    found = retriever.graph_evidence.retrieve(question, retriever.embedder.encode([question])[0], groups, max_hops=2)
    on_paths = [r.key for p in found.paths for r in p.relations if r.type != "SAME_AS"]
    assert len(on_paths) > len(set(on_paths))  # the case: paths that share an edge
    ids = [f.id for f in found.facts]
    assert len(ids) == len(set(ids))


def test_token_budget_bounds_the_evidence(client: TestClient) -> None:
    small = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?", options={"budget": 100})
    big = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?", options={"budget": 3000})
    assert small["evidence"]["tokens"] <= 100 < big["evidence"]["tokens"]
    assert small["evidence"]["items"] < big["evidence"]["items"]


def test_a_session_question_is_linked_once_unless_expanded(
    client: TestClient, app_container: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session step links the question to decide the expansion; retrieval reuses those links for
    a question it did not expand, and links an expanded one afresh."""
    linker = app_container.qa.retriever.linker
    seen: list[str] = []
    real = linker.read_question

    def counted(text: str, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the real linker, counted
        seen.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(linker, "read_question", counted)
    sid = client.post("/v1/sessions").json()["id"]
    first = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?", session_id=sid)
    assert first["expanded_query"] == first["question"] and seen == [first["question"]]
    assert "OMIM:154700" in {e["id"] for e in first["linked_entities"]}
    seen.clear()
    follow = _qa(client, "and what about its treatment?", session_id=sid)
    assert follow["expanded_query"] != follow["question"]
    assert seen == [follow["question"], follow["expanded_query"]]


def test_a_follow_up_in_a_session_is_expanded_with_its_entities(client: TestClient) -> None:
    created = client.post("/v1/sessions")
    assert created.status_code == 201
    sid = created.json()["id"]
    first = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?", session_id=sid)
    assert first["expanded_query"] == first["question"]
    follow = _qa(client, "and what about its treatment?", session_id=sid)
    assert "Marfan syndrome" in follow["expanded_query"] and follow["expanded_query"] != follow["question"]
    assert "KG:DRUGBANK:DB00678-TREATS-ORPHA:558" in {c["id"] for c in follow["citations"]}
    session = client.get(f"/v1/sessions/{sid}").json()
    assert [t["question"] for t in session["turns"]] == [first["question"], follow["question"]]
    memory = {m["key"]: m for m in session["memory"]}
    assert memory["OMIM:154700"]["recalls"] >= 1  # recalled for the follow-up, so reinforced
    assert client.get("/v1/sessions/AAAAAAAAAAAAAAAAAAAAAAAA").status_code == 404
    assert client.post("/v1/qa", json={"question": "x", "session_id": "AAAAAAAAAAAAAAAAAAAAAAAA"}).status_code == 404
    assert client.get("/v1/sessions/bad id!").status_code == 422


def test_a_follow_up_after_a_change_of_topic_is_expanded_with_the_new_one(client: TestClient) -> None:
    sid = client.post("/v1/sessions").json()["id"]
    _qa(client, "Which phenotypes are characteristic of Marfan syndrome?", session_id=sid)
    other = _qa(client, "What drugs treat epilepsy?", session_id=sid)  # not a follow-up: nothing expanded
    assert other["expanded_query"] == other["question"]
    follow = _qa(client, "and what about its side effects?", session_id=sid)
    added = follow["expanded_query"].removeprefix(follow["question"]).lower()
    assert added.startswith(" (epilepsy"), added  # the newer topic first: the old one was only read, not used
    memory = {m["key"]: m["recalls"] for m in client.get(f"/v1/sessions/{sid}").json()["memory"]}
    assert memory["OMIM:154700"] <= 2  # used once for the follow-up, mentioned once with its entities


def test_a_follow_up_keeps_a_phenotype_the_session_ruled_out_excluded(client: TestClient) -> None:
    """A phenotype an earlier question negated is remembered as absent: a follow-up expanded with it
    keeps it excluded from the differential, never turns it into an observed feature."""
    sid = client.post("/v1/sessions").json()["id"]
    question = "A child with seizures and microcephaly but no hypotonia: which diagnoses are likely?"
    first = _qa(client, question, session_id=sid)
    assert "(Hypotonia excluded)" in first["answer"]
    follow = _qa(client, "And with those seizures, which diagnoses are likely?", session_id=sid)
    flags = {e["id"]: e["negated"] for e in follow["linked_entities"] if e["id"].startswith("HP:")}
    assert flags["HP:0001252"] is True and flags["HP:0000252"] is False  # "(Microcephaly; no Hypotonia)"
    assert all(m["observed"] != "HP:0001252" for d in follow["differential"] for m in d["matches"])
    assert "(Hypotonia excluded)" in follow["answer"]
    memory = {m["key"]: m["label"] for m in client.get(f"/v1/sessions/{sid}").json()["memory"]}
    assert memory["HP:0001252"] == "no Hypotonia" and memory["HP:0000252"] == "Microcephaly"
    # stated later, it is remembered as present again
    _qa(client, "A child with hypotonia and seizures: which diagnoses are likely?", session_id=sid)
    memory = {m["key"]: m["label"] for m in client.get(f"/v1/sessions/{sid}").json()["memory"]}
    assert memory["HP:0001252"] == "Hypotonia"


def test_offline_answers_stream_as_server_sent_events(client: TestClient) -> None:
    with client.stream("POST", "/v1/qa", json={"question": "What drugs treat epilepsy?", "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [
            (m.group(1), json.loads(m.group(2)))
            for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", r.read().decode())
        ]
    names = [e for e, _ in events]
    assert names[0] == "retrieval" and names[-1] == "answer" and "delta" in names
    streamed = "".join(d["text"] for e, d in events if e == "delta")
    assert streamed == events[-1][1]["answer"]


def test_bad_requests_get_clear_errors(client: TestClient) -> None:
    assert client.post("/v1/qa", content=b"{oops", headers={"content-type": "application/json"}).status_code == 422
    assert client.post("/v1/qa", json={"question": ""}).status_code == 422
    assert client.post("/v1/qa", json={"question": "x", "options": {"k": 0}}).status_code == 422
    r = client.post("/v1/qa", json={"question": "epilepsy drugs", "options": {"mode": "llm"}})
    assert r.status_code == 409 and "MEDKG_LLM_BASE_URL" in r.json()["detail"]  # the server's state, not the form


def test_other_endpoints(client: TestClient) -> None:
    hits = client.post("/v1/search", json={"q": "losartan aortic root dilatation", "k": 2}).json()
    assert hits[0]["doc_id"] == "PMID:24102121"
    paths = client.get("/v1/graph/paths", params={"source": "DRUGBANK:DB00678", "target": "OMIM:154700", "max_hops": 2})
    assert paths.status_code == 200 and paths.json()[0]["nodes"][0]["id"] == "DRUGBANK:DB00678"
    assert client.get("/v1/entities/HP:0001166").json()["name"] == "Arachnodactyly"
    assert client.get("/v1/entities", params={"q": "ectopia lentis"}).json()[0]["id"] == "HP:0001083"
    ready = client.get("/readyz")
    for _ in range(100):
        if ready.status_code == 200:
            break
        ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert client.get("/openapi.json").json()["paths"]["/v1/qa"]["post"]


# ---- the LLM path ------------------------------------------------------------------------------
@pytest.fixture()
def llm_client(app_container: Container) -> Iterator[tuple[TestClient, FakeLLMServer]]:
    with FakeLLMServer() as llm:
        settings = app_container.settings.model_copy(
            update={"llm_base_url": llm.base_url, "llm_model": "fake-model", "llm_timeout_s": 1.0, "llm_max_retries": 1}
        )
        container = Container(settings, graph=app_container.graph)
        for shared in ("text_embedder", "entity_index", "text_index", "nlp", "linker", "sessions"):
            container.__dict__[shared] = getattr(app_container, shared)
        with TestClient(create_app(container=container)) as c:
            yield c, llm
            for shared in ("text_index", "entity_index", "sessions"):  # the module's container closes these
                container.__dict__.pop(shared)


def test_llm_answers_are_checked_and_a_fabricated_citation_is_dropped(
    llm_client: tuple[TestClient, FakeLLMServer],
) -> None:
    client, llm = llm_client

    def answer(body: dict) -> dict:
        evidence = body["messages"][-1]["content"]
        real = "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"
        assert f"[{real}]" in evidence and "knowledge graph" in body["messages"][0]["content"].lower()
        return {
            "answer": f"Marfan syndrome features arachnodactyly [{real}] and cured baldness [PMID:99999999#s1].",
            "citations": [real, "PMID:99999999#s1"],
            "confidence": 0.8,
            "insufficient_evidence": False,
        }

    llm.handler = answer
    out = _qa(client, "Which phenotypes are characteristic of Marfan syndrome?")
    assert out["mode"] == "llm"
    assert out["dropped_citations"] == ["PMID:99999999#s1"]
    assert "99999999" not in out["answer"] and [c["id"] for c in out["citations"]] == [
        "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"
    ]
    assert llm.requests[-1].body["response_format"]["type"] == "json_schema"


def test_the_llm_hears_every_earlier_turn_of_a_session(llm_client: tuple[TestClient, FakeLLMServer]) -> None:
    """It was told the running summary and the last two turns, and the summary only begins when a
    turn leaves the six-turn window: turns 3 to 6 from the end were never shown to it."""
    client, llm = llm_client
    real = "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"
    llm.handler = lambda body: {
        "answer": f"Marfan syndrome features arachnodactyly [{real}].",
        "citations": [real],
        "confidence": 0.8,
        "insufficient_evidence": False,
    }
    sid = client.post("/v1/sessions").json()["id"]
    asked = [f"Which phenotypes are characteristic of Marfan syndrome, part {n}?" for n in range(1, 6)]
    for question in asked:
        _qa(client, question, session_id=sid)
    prompt = "\n".join(m["content"] for m in llm.requests[-1].body["messages"])
    assert [q for q in asked[:-1] if q in prompt] == asked[:-1]


@pytest.mark.reliability
def test_llm_failures_are_502_and_504(llm_client: tuple[TestClient, FakeLLMServer]) -> None:
    client, llm = llm_client
    llm.enqueue(Reply.error(500), Reply.error(500))
    r = client.post("/v1/qa", json={"question": "What drugs treat epilepsy?"})
    assert r.status_code == 502 and r.json()["error"] == "bad_gateway" and "HTTP 500" in r.json()["detail"]
    llm.enqueue(Reply.raw("not json at all"))
    assert client.post("/v1/qa", json={"question": "What drugs treat epilepsy?"}).status_code == 502
    llm.enqueue(Reply.json({"answer": "x"}, delay_s=3), Reply.json({"answer": "x"}, delay_s=3))
    r = client.post("/v1/qa", json={"question": "What drugs treat epilepsy?"})
    assert r.status_code == 504 and r.json()["error"] == "gateway_timeout"
    offline = client.post("/v1/qa", json={"question": "What drugs treat epilepsy?", "options": {"mode": "extractive"}})
    assert offline.status_code == 200 and offline.json()["mode"] == "extractive"


def test_llm_answers_stream(llm_client: tuple[TestClient, FakeLLMServer]) -> None:
    client, llm = llm_client
    fact = "KG:DRUGBANK:DB00313-TREATS-DOID:1826"
    content = {
        "answer": f'Valproic acid treats epilepsy [{fact}] and "cures" it [KG:MADE-UP-ID].',
        "citations": [fact],
        "confidence": 0.7,
        "insufficient_evidence": False,
    }
    llm.enqueue(Reply(content=json.dumps(content), chunk_chars=5))
    with client.stream("POST", "/v1/qa", json={"question": "What drugs treat epilepsy?", "stream": True}) as r:
        assert r.status_code == 200
        events = [
            (m.group(1), json.loads(m.group(2)))
            for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", r.read().decode())
        ]
    deltas = [d["text"] for e, d in events if e == "delta"]
    assert len(deltas) > 5 and "".join(deltas) == content["answer"]
    final = events[-1][1]
    assert events[-1][0] == "answer" and final["dropped_citations"] == ["KG:MADE-UP-ID"]
    assert final["answer"] == f'Valproic acid treats epilepsy [{fact}] and "cures" it.'


def test_a_session_that_expires_while_streaming_ends_with_an_error_event(
    llm_client: tuple[TestClient, FakeLLMServer],
) -> None:
    """The 200 and the first events are out before the answer is recorded in the session: if the
    session expired meanwhile, the stream must say so, not just stop."""
    client, llm = llm_client
    sessions = client.app.state.container.sessions
    sid = client.post("/v1/sessions").json()["id"]
    real = "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"

    def answer_slowly(body: dict) -> dict:  # the session's time runs out while the LLM answers
        sessions.clock = lambda: time.time() + 10 * sessions.ttl_s
        return {"answer": f"Arachnodactyly [{real}].", "citations": [real], "confidence": 0.8}

    llm.handler = answer_slowly
    question = {"question": "Which phenotypes are characteristic of Marfan syndrome?", "session_id": sid}
    try:
        with client.stream("POST", "/v1/qa", json={**question, "stream": True}) as r:
            assert r.status_code == 200
            events = [m.group(1) for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", r.read().decode())]
    finally:
        sessions.clock = time.time
    assert events[0] == "retrieval" and events[-1] == "error" and "answer" not in events


# ---- names medkg knows nothing about ------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "unknown"),
    [
        ("What is the recommended dose of zorblaxitol for epilepsy?", ["zorblaxitol"]),
        ("Is quintraxamab approved for Marfan syndrome?", ["quintraxamab"]),
        ("Does XQZ7 cause seizures or does Florbexin treat them?", ["XQZ7", "Florbexin"]),
    ],
)
def test_a_question_about_an_unknown_name_says_so_and_cites_nothing(
    client: TestClient, question: str, unknown: list[str]
) -> None:
    """Nothing about epilepsy, Marfan syndrome or seizures is offered in place of the unknown drug or gene."""
    out = _qa(client, question)
    assert out["insufficient_evidence"] is True and out["confidence"] == 0.0
    assert out["answer"].startswith("medkg has no information about " + " or ".join(unknown))
    assert [u["text"] for u in out["unknown_names"]] == unknown
    assert out["citations"] == [] and out["retrieved"] == [] and out["kg_paths"] == []
    assert "[" not in out["answer"]


def test_words_of_everyday_english_and_of_the_literature_are_not_unknown(client: TestClient) -> None:
    for question in (
        "what medicine helps with fits in my kid",  # everyday words, however informal
        "Is atenolol used in Marfan syndrome?",  # in no name of the graph, but in an indexed passage
    ):
        assert _qa(client, question)["unknown_names"] == [], question
    out = _qa(client, "Is atenolol used in Marfan syndrome?")
    assert any(c["id"].startswith("PMID:24102121") for c in out["citations"]), out["citations"]


def test_an_unknown_name_streams_the_same_answer(client: TestClient) -> None:
    question = "What is the recommended dose of zorblaxitol for epilepsy?"
    with client.stream("POST", "/v1/qa", json={"question": question, "stream": True}) as r:
        events = [
            (m.group(1), json.loads(m.group(2)))
            for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", r.read().decode())
        ]
    assert events[0] == ("retrieval", {"expanded_query": question, "linked_entities": events[0][1]["linked_entities"],
                                       "evidence_ids": []})  # fmt: skip
    assert events[-1][0] == "answer" and events[-1][1]["answer"] == _qa(client, question)["answer"]


def test_the_llm_is_not_asked_about_an_unknown_name(llm_client: tuple[TestClient, FakeLLMServer]) -> None:
    client, llm = llm_client
    before = len(llm.requests)
    out = _qa(client, "Is quintraxamab approved for Marfan syndrome?", mode="llm")
    assert out["answer"].startswith("medkg has no information about quintraxamab")
    assert out["citations"] == [] and len(llm.requests) == before


def test_a_vignette_naming_an_unknown_drug_is_answered_from_what_is_known_after_a_note(client: TestClient) -> None:
    question = (
        "A 16-year-old boy who takes zorblaxitol for acne is tall with long fingers and arachnodactyly; his "
        "father had an aortic root aneurysm. Which phenotypes are characteristic of Marfan syndrome, the "
        "diagnosis his physician suspects?"
    )
    out = _qa(client, question)
    assert out["answer"].startswith("medkg has no information about zorblaxitol; what follows does not use it. ")
    assert [u["text"] for u in out["unknown_names"]] == ["zorblaxitol"]
    assert any(c["id"].startswith("KG:OMIM:154700-HAS_PHENOTYPE-") for c in out["citations"])


def test_the_llm_is_told_what_a_vignette_names_that_medkg_does_not_know(
    llm_client: tuple[TestClient, FakeLLMServer],
) -> None:
    client, llm = llm_client
    real = "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"

    def answer(body: dict) -> dict:
        user = body["messages"][-1]["content"]
        assert "Unknown to this knowledge base: zorblaxitol." in user and "as if it were about zorblaxitol" in user
        return {"answer": f"Arachnodactyly is a feature [{real}].", "citations": [real], "confidence": 0.7,
                "insufficient_evidence": False}  # fmt: skip

    llm.handler = answer
    question = (
        "A 16-year-old boy who takes zorblaxitol for acne is tall with long fingers and arachnodactyly; his "
        "father had an aortic root aneurysm. Which phenotypes are characteristic of Marfan syndrome, the "
        "diagnosis his physician suspects?"
    )
    out = _qa(client, question, mode="llm")
    assert out["mode"] == "llm" and out["answer"].startswith("medkg has no information about zorblaxitol;")
    assert [c["id"] for c in out["citations"]] == [real]
    llm.handler = None


def test_the_llm_is_not_asked_when_nothing_reaches_the_support_floor(
    llm_client: tuple[TestClient, FakeLLMServer],
) -> None:
    """Evidence nothing supports (off topic: a passage above the search floor, below the answer's) is
    not handed to the LLM to answer from: the answer abstains as the offline one does."""
    client, llm = llm_client
    out = _qa(client, "How do I bake sourdough bread at home?", mode="llm")
    assert out["insufficient_evidence"] and out["citations"] == []
    assert llm.requests == []


@pytest.mark.parametrize(
    ("question", "first"),
    [
        ("Which drugs treat epilepsy?", r"\[KG:DRUGBANK:DB\d+-TREATS-DOID:1826\]"),  # the asked relation
        ("What did studies find about Marfan syndrome in children?", r"\[PMID:\d+#s\d+\]"),  # no fact answers
    ],
)
def test_what_answers_leads_the_evidence_the_llm_is_given(
    llm_client: tuple[TestClient, FakeLLMServer], question: str, first: str
) -> None:
    client, llm = llm_client
    seen: list[str] = []

    def answer(body: dict) -> dict:
        evidence = body["messages"][-1]["content"].split("Evidence:\n", 1)[1]
        seen.append(evidence.splitlines()[0])
        cid = re.match(r"\[([^\]]+)\]", seen[-1])[1]  # type: ignore[index]
        return {"answer": f"So it says [{cid}].", "citations": [cid], "confidence": 0.5, "insufficient_evidence": False}

    llm.handler = lambda body: Reply.json(answer(body))
    out = _qa(client, question, mode="llm")
    assert re.match(first, seen[0]), seen
    assert out["mode"] == "llm" and len(out["citations"]) == 1
