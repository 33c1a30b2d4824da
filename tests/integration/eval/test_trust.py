"""medkg's own trust set (eval/data/trust_dev.jsonl) and its scorer (eval/trust.py): the set is what its
builder makes from the shared data, and the scorer passes and fails answers as it says, in both modes,
on a real store and the real app's QA engine (the LLM mode against the local test server)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval import trust, trust_questions
from kg.settings import load_settings
from service.container import Container
from tests.conftest import open_ladybug, shared
from tests.support.qa_store import build_qa_store


def test_the_set_has_six_classes_with_expectations() -> None:
    items = trust.load_set()
    assert len(items) >= 150 and len({i["id"] for i in items}) == len(items)
    counts = Counter(i["class"] for i in items)
    assert set(counts) == set(trust.CLASSES) and min(counts.values()) >= 25, counts
    for item in items:
        expect = item["expect"]
        assert expect["answer"] == (item["class"] not in ("unknown", "off_topic")), item
        assert bool(expect.get("cite")) == expect["answer"], item
        if item["class"] == "unknown":
            assert expect["unknown"] in item["question"]


def test_the_handwritten_set_comes_in_its_splits_with_expectations() -> None:
    """eval/data/trust_handwritten.jsonl: each split written before the work it measures
    (docs/evaluation.md#questions-written-by-hand); the few answerable-class questions that expect an
    abstention are those the graph cannot answer."""
    items = trust.load_set(Path(trust.__file__).parent / "data" / "trust_handwritten.jsonl")
    assert len({i["id"] for i in items}) == len(items) >= 150
    assert {i["split"] for i in items} == {"probe", "holdout", *(f"holdout{n}" for n in range(2, 11))}
    for item in items:
        expect = item["expect"]
        assert bool(expect.get("cite")) == expect["answer"], item
        if item["class"] in ("unknown", "off_topic"):
            assert not expect["answer"], item
        if item["class"] == "unknown":
            assert expect["unknown"] in item["question"]
    abstaining = [i["id"] for i in items if i["class"] not in ("unknown", "off_topic") and not i["expect"]["answer"]]
    assert len(abstaining) <= 5, abstaining


def test_the_set_is_what_its_builder_makes_from_the_shared_data() -> None:
    built = trust_questions.build(shared())
    committed = trust.load_set()
    assert [(i["id"], i["question"], i["expect"]) for i in built] == [
        (i["id"], i["question"], i["expect"]) for i in committed
    ]


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    tmp: Path = tmp_path_factory.mktemp("trust")
    store = open_ladybug(tmp)
    with Container(load_settings(data_dir=tmp, api_keys=None, llm_base_url=None), graph=store) as c:
        build_qa_store(c)
        yield c
    store.close()


ITEMS = [
    {"id": "g1", "class": "graph_facts", "question": "Which drugs treat epilepsy?",
     "expect": {"answer": True, "cite": [r"KG:DRUGBANK:DB\d+-TREATS-DOID:1826"]}},
    {"id": "g2", "class": "graph_facts", "question": "Which drugs treat epilepsy?",  # expects another disease
     "expect": {"answer": True, "cite": [r"KG:DRUGBANK:DB\d+-TREATS-DOID:9352"]}},
    {"id": "u1", "class": "unknown", "question": "Is quintraxamab approved for epilepsy?",
     "expect": {"answer": False, "unknown": "quintraxamab"}},
    {"id": "o1", "class": "off_topic", "question": "How do I bake sourdough bread at home?",
     "expect": {"answer": False}},
]  # fmt: skip


def test_offline_answers_are_judged_by_their_citations(container: Container) -> None:
    results, figures = trust.score_store(container, ITEMS, "extractive", progress=False)
    passed = {r["id"]: r["passed"] for r in results}
    assert passed == {"g1": True, "g2": False, "u1": True, "o1": True}, results
    assert figures["classes"]["graph_facts"]["pass"] == 0.5 and figures["unknown_abstain"] == 1.0
    assert figures["abstention_precision"] == 1.0 and figures["abstention_recall"] == 1.0
    assert figures["off_target_citations"] == 0 and figures["p95_ms"] > 0
    assert not figures["goals_met"]["every_class"] and figures["goals_met"]["unknown_abstain"]


def test_the_llm_mode_runs_against_the_local_test_server(tmp_path: Path) -> None:
    """The test server states the first evidence item: the epilepsy question cites a TREATS fact of
    epilepsy (the facts of the asked relation lead the evidence); the unknown drug never reaches it."""
    store = open_ladybug(tmp_path)
    with trust.local_test_llm() as url:
        settings = load_settings(data_dir=tmp_path, api_keys=None, llm_base_url=url, llm_model="fake-model")
        with Container(settings, graph=store) as c:
            build_qa_store(c)
            results, _ = trust.score_store(c, [ITEMS[0], ITEMS[2]], "llm", progress=False)
    store.close()
    assert [r["passed"] for r in results] == [True, True], results
    assert re.fullmatch(r"KG:DRUGBANK:DB\d+-TREATS-DOID:1826", results[0]["cited"][0])


def test_a_cited_fact_about_an_entity_the_question_did_not_name_is_counted(container: Container) -> None:
    response = container.qa.ask("Which drugs treat epilepsy?")
    assert trust.off_target(response) == []
    marfan = container.qa.ask("Which phenotypes are characteristic of Marfan syndrome?")
    # the same citations under a question that names neither end
    response.linked_entities = []
    response.citations = marfan.citations
    assert trust.off_target(response) == [c.id for c in marfan.citations if c.kind == "kg"] != []


def test_a_vignette_is_judged_by_its_citation_and_its_diagnosis_rank_kept_beside(container: Container) -> None:
    """A vignette passes when the answer cites an annotation of its diagnosis; the diagnosis' own rank
    among the single diseases is kept beside (an answer lists entries, a disease's subtypes in one): a
    diagnosis ranked second that matches none of the observed phenotypes is not cited, and fails."""
    question = "Child with seizures and microcephaly. What is the most likely diagnosis?"
    items = [
        {"id": f"v{i}", "class": "vignettes", "question": question,
         "expect": {"answer": True, "cite": [rf"KG:{d}-HAS_PHENOTYPE-HP:\d+"], "case": "c"}}
        for i, d in enumerate(["OMIM:100001", "OMIM:100002"])
    ]  # fmt: skip
    results, figures = trust.score_store(container, items, "extractive", progress=False)
    assert [(r["passed"], r["disease_rank"]) for r in results] == [(True, 1), (False, 2)], results
    assert figures["classes"]["vignettes"]["pass"] == 0.5
    assert figures["classes"]["vignettes"]["diagnosis_ranked_top5"] == 1.0


def test_a_vignettes_diagnoses_are_read_from_one_id_or_an_alternation() -> None:
    cite = [r"KG:OMIM:147791-HAS_PHENOTYPE-HP:\d+", r"KG:(OMIM:154700|ORPHA:558)-HAS_PHENOTYPE-HP:\d+"]
    assert trust.expected_diagnoses({"cite": cite}) == {"OMIM:147791", "OMIM:154700", "ORPHA:558"}
    assert trust.expected_diagnoses({"cite": [r"KG:DRUGBANK:DB\d+-(TREATS|PALLIATES)-DOID:1826"]}) == set()
