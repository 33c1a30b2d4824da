"""Answers a clinician can trust, over HTTP on both backends: everyday words reach the concept's facts,
the facts of the relation the question asks for come first (features by frequency), a concept without
such facts lends its subtypes' (named as such), a co-mention never answers a what-question on its own,
a question that names two things is answered only by what relates them, and a vignette written as a
clinician writes it goes to the differential."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from kg.model import Entity, Relation
from kg.retrieval.conditions import corroborating_feature
from service.api.app import create_app
from tests.support.qa_store import qa_container

ENTITIES = [
    Entity(id="HP:0000822", name="Hypertension", category="Phenotype", synonyms=["High blood pressure"]),
    Entity(id="SYMP:0020064", name="high blood pressure", category="Symptom"),
    Entity(id="DOID:10763", name="hypertension", category="Disease"),
    Entity(id="DRUGBANK:DB00999", name="Hydrochlorothiazide", category="Drug"),
    Entity(id="DOID:9351", name="diabetes mellitus", category="Disease"),
    Entity(id="DOID:9352", name="type 2 diabetes mellitus", category="Disease", synonyms=["type II diabetes mellitus"]),
    # HPO's phenotype names the disease as the Disease Ontology's synonym does
    Entity(id="HP:0005978", name="Type II diabetes mellitus", category="Phenotype", synonyms=["Type 2 diabetes"]),
    Entity(id="DRUGBANK:DB00331", name="Metformin", category="Drug"),
    Entity(id="NCBIGene:54790", name="TET2", category="Gene"),
    # HPO's lay synonym of Microcephaly (BROAD layperson, kept at ingest)
    Entity(id="HP:0000252", name="Microcephaly", category="Phenotype", synonyms=["Small head"]),
    # a second subtype of the store's microcephaly-epilepsy syndrome, both mapped to one Disease Ontology class
    # (the store's own entities as it names them, for the relations to reach them)
    Entity(id="HP:0001250", name="Seizure", category="Phenotype"),
    Entity(id="OMIM:100001", name="Microcephaly-epilepsy syndrome", category="Disease"),
    Entity(id="OMIM:100003", name="Microcephaly-epilepsy syndrome 2", category="Disease"),
    Entity(id="DOID:0060999", name="syndromic microcephaly with epilepsy", category="Disease"),
    # a finding no drug treats in the graph, and the condition PharmacotherapyDB's drugs palliate
    Entity(id="HP:0025269", name="Panic attack", category="Phenotype"),
    Entity(id="DOID:594", name="panic disorder", category="Disease", synonyms=["panic anxiety syndrome"]),
    Entity(id="DRUGBANK:DB00472", name="Fluoxetine", category="Drug"),
    # fever is no hay fever, whatever the words share
    Entity(id="HP:0001945", name="Fever", category="Phenotype"),
    Entity(
        id="DOID:4481",
        name="allergic rhinitis",
        category="Disease",
        synonyms=["hay fever"],
        description="A rhinitis that is an allergic inflammation of the nasal airways, which occurs when an "
        "allergen, such as pollen, dust or animal dander is inhaled by an individual with a sensitized immune system.",
    ),
    Entity(id="DRUGBANK:DB00341", name="Cetirizine", category="Drug"),
    # a condition a question may describe in its own words (the Disease Ontology's definition)
    Entity(
        id="DOID:8986",
        name="narcolepsy",
        category="Disease",
        description="A sleep disorder that involves an excessive urge to sleep at inappropriate times, such as "
        "while at work, and is characterized by excessive daytime sleepiness and cataplexy.",
    ),
    Entity(id="DRUGBANK:DB00745", name="Modafinil", category="Drug"),
    Entity(id="SYMP:0000139", name="sneezing", category="Symptom"),
    Entity(id="HP:0001742", name="Nasal congestion", category="Phenotype", synonyms=["Stuffy nose"]),
    # a condition described by its symptoms, which the graph holds (the Disease Ontology's definition and
    # symptom; HPO's annotation of the OMIM entry the same as it)
    Entity(
        id="DOID:2841",
        name="asthma",
        category="Disease",
        description="A bronchial disease that is characterized by chronic inflammation and narrowing of the "
        "airways, which is caused by a combination of environmental and genetic factors resulting in recurring "
        "periods of wheezing (a whistling sound while breathing), chest tightness, shortness of breath, and coughing.",
    ),
    Entity(id="OMIM:600807", name="Asthma, susceptibility to", category="Disease"),
    Entity(id="SYMP:0000604", name="wheezing", category="Symptom"),
    Entity(id="HP:0030828", name="Wheezing", category="Phenotype"),
    Entity(id="HP:0002795", name="Functional respiratory abnormality", category="Phenotype"),
    Entity(id="DRUGBANK:DB01001", name="Salbutamol", category="Drug"),
    # a disease the differential ranks first for a patient's findings, the same as the Disease Ontology's
    # entry that PharmacotherapyDB gives a drug; and one ranked first that no drug treats in the graph
    Entity(id="HP:0000118", name="Phenotypic abnormality", category="Phenotype"),  # (the QA store's too)
    Entity(id="HP:0031042", name="Strawberry tongue", category="Phenotype"),
    Entity(id="HP:0025337", name="Red eye", category="Phenotype"),
    Entity(id="HP:0001053", name="Hypopigmented skin patches", category="Phenotype"),
    Entity(id="ORPHA:2331", name="Kawasaki disease", category="Disease"),
    Entity(id="DOID:13378", name="Kawasaki disease", category="Disease"),
    Entity(id="DRUGBANK:DB00945", name="Acetylsalicylic acid", category="Drug"),
    Entity(id="ORPHA:99999", name="Tongue and skin syndrome", category="Disease"),
]
RELATIONS = [
    Relation(subject="DRUGBANK:DB00999", type="TREATS", object="DOID:10763", source="pharmacotherapydb"),
    Relation(subject="DOID:10763", type="HAS_SYMPTOM", object="SYMP:0020064", source="doid"),
    Relation(subject="DOID:9352", type="IS_A", object="DOID:9351", source="doid"),
    Relation(subject="DRUGBANK:DB00472", type="PALLIATES", object="DOID:594", source="pharmacotherapydb"),
    Relation(subject="DRUGBANK:DB00341", type="TREATS", object="DOID:4481", source="pharmacotherapydb"),
    Relation(subject="DRUGBANK:DB00745", type="TREATS", object="DOID:8986", source="pharmacotherapydb"),
    Relation(subject="DRUGBANK:DB00331", type="TREATS", object="DOID:9352", source="pharmacotherapydb"),
    Relation(subject="DRUGBANK:DB01001", type="TREATS", object="DOID:2841", source="pharmacotherapydb"),
    Relation(subject="DOID:2841", type="HAS_SYMPTOM", object="SYMP:0000604", source="doid"),
    Relation(subject="DOID:2841", type="SAME_AS", object="OMIM:600807", source="xref"),
    Relation(subject="OMIM:600807", type="HAS_PHENOTYPE", object="HP:0030828", source="hpo"),
    Relation(subject="HP:0030828", type="IS_A", object="HP:0002795", source="hpo"),
    Relation(
        subject="NCBIGene:54790",
        type="CO_MENTIONED",
        object="DOID:9351",
        source="pubmed",
        evidence={"sentences": ["PMID:30022161#s5"], "count": 1},
    ),
    # the literature wrote of losartan and Marfan syndrome together (the store's abstract says how)
    Relation(
        subject="DRUGBANK:DB00678",
        type="CO_MENTIONED",
        object="OMIM:154700",
        source="pubmed",
        evidence={"sentences": ["PMID:24102121#s0"], "count": 1},
    ),
    *(
        Relation(subject="OMIM:100003", type="HAS_PHENOTYPE", object=t, source="hpo", evidence={"pmids": ["PMID:13"]})
        for t in ("HP:0001250", "HP:0000252")
    ),
    *(
        Relation(subject="DOID:0060999", type="SAME_AS", object=d, source="xref")
        for d in ("OMIM:100001", "OMIM:100003")
    ),
    *(
        Relation(subject="ORPHA:2331", type="HAS_PHENOTYPE", object=t, source="hpo")
        for t in ("HP:0031042", "HP:0025337", "HP:0001945")
    ),
    *(
        Relation(subject=t, type="IS_A", object="HP:0000118", source="hp")  # phenotypic abnormalities
        for t in ("HP:0031042", "HP:0025337", "HP:0001945", "HP:0001053")
    ),
    Relation(subject="DOID:13378", type="SAME_AS", object="ORPHA:2331", source="xref"),
    Relation(subject="DRUGBANK:DB00945", type="TREATS", object="DOID:13378", source="pharmacotherapydb"),
    *(
        Relation(subject="ORPHA:99999", type="HAS_PHENOTYPE", object=t, source="hpo")
        for t in ("HP:0031042", "HP:0001053")
    ),
]


@pytest.fixture(scope="module", params=["ladybug", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with (
        qa_container(request, tmp_path_factory, ENTITIES, RELATIONS) as container,
        TestClient(create_app(container=container)) as c,
    ):
        yield c


def _qa(client: TestClient, question: str) -> dict:
    r = client.post("/v1/qa", json={"question": question})
    assert r.status_code == 200, r.text
    return r.json()


def _cited(out: dict) -> list[str]:
    return [c["id"] for c in out["citations"]]


def test_everyday_words_reach_the_same_concept_in_another_ontology(client: TestClient) -> None:
    """ "high blood pressure" names a symptom and is HPO's lay synonym of Hypertension, whose name the
    Disease Ontology's hypertension shares: that disease's drugs answer."""
    out = _qa(client, "what medicine helps high blood pressure")
    linked = {e["id"] for e in out["linked_entities"]}
    assert {"SYMP:0020064", "HP:0000822", "DOID:10763"} <= linked
    assert not out["insufficient_evidence"]
    assert _cited(out)[0] == "KG:DRUGBANK:DB00999-TREATS-DOID:10763"
    assert out["answer"].startswith("Hypertension is treated by Hydrochlorothiazide")


def test_another_ontologys_synonym_reaches_the_same_concept(client: TestClient) -> None:
    """ "type 2 diabetes" is HPO's synonym of its Type II diabetes mellitus, whose name is the Disease
    Ontology's synonym of type 2 diabetes mellitus: that disease's drugs answer."""
    out = _qa(client, "Which medications are indicated for type 2 diabetes?")
    assert {"HP:0005978", "DOID:9352"} <= {e["id"] for e in out["linked_entities"]}, out["linked_entities"]
    assert _cited(out)[0] == "KG:DRUGBANK:DB00331-TREATS-DOID:9352", out["answer"]


def test_a_concept_without_drugs_lends_its_subtypes_and_says_so(client: TestClient) -> None:
    out = _qa(client, "pills for sugar diabetes")
    assert any(e["id"] == "DOID:9351" and e["method"] == "lay" for e in out["linked_entities"])
    assert _cited(out)[:2] == ["KG:DOID:9352-IS_A-DOID:9351", "KG:DRUGBANK:DB00331-TREATS-DOID:9352"]
    assert "Diabetes mellitus has the subtype type 2 diabetes mellitus" in out["answer"]
    assert "Type 2 diabetes mellitus is treated by Metformin" in out["answer"]


def test_a_finding_is_read_as_the_nearest_condition_with_drugs_and_the_answer_says_so(client: TestClient) -> None:
    """Panic attack (a phenotype) has no drugs; panic disorder, whose name is nearest to it, has: the
    answer reads one as the other in the open. Fever is not read as hay fever (a cosine of 0.64)."""
    out = _qa(client, "what helps with panic attacks")
    reading = [e for e in out["linked_entities"] if e["method"] == "condition"]
    assert [(e["id"], e["mention"]) for e in reading] == [("DOID:594", "panic attacks")], out["linked_entities"]
    assert reading[0]["score"] >= 0.8
    assert _cited(out) == ["KG:DRUGBANK:DB00472-PALLIATES-DOID:594"]
    assert out["answer"].startswith("Read Panic attack as panic disorder: the nearest condition"), out["answer"]
    out = _qa(client, "what helps with fever")
    assert not [e for e in out["linked_entities"] if e["method"] == "condition"]
    assert not any("DOID:4481" in c for c in _cited(out)) and "hay fever" not in out["answer"].casefold()
    # a disease the graph knows without drugs is never read as another one
    out = _qa(client, "what helps with panic disorder")
    assert not [e for e in out["linked_entities"] if e["method"] == "condition"]


def test_a_condition_described_in_everyday_words_is_suggested_never_answered(client: TestClient) -> None:
    """The words link nothing; the condition with drugs nearest to them is offered as a question."""
    out = _qa(client, "my husband keeps falling asleep during the day, what can he take")
    assert out["insufficient_evidence"] and out["citations"] == []
    assert "Did you mean narcolepsy (DOID:8986)?" in out["answer"], out["answer"]
    # findings that describe one condition together, whether or not a passage relates them
    out = _qa(client, "what can I take for sneezing and a stuffy nose from pollen")
    assert out["insufficient_evidence"], out["answer"]
    assert "Did you mean allergic rhinitis (DOID:4481)?" in out["answer"], out["answer"]
    # a question that names a disease is about it: no other disease is offered in its place
    retriever = client.app.state.container.qa.retriever  # type: ignore[attr-defined]
    question = "which drugs treat microcephaly-epilepsy syndrome"
    assert retriever.suggested_condition(question, retriever.link(question).linked) is None
    assert retriever.suggested_condition(question, []) is not None  # the same words, had they linked nothing


def test_a_condition_described_by_a_feature_the_graph_holds_is_read_and_the_answer_says_so(
    client: TestClient,
) -> None:
    """The clearly nearest condition with drugs is answered for when a finding the question names is
    one of its features (the Disease Ontology's symptom wheezing); the sneezing above is no feature of
    allergic rhinitis in this graph, so that one stays a suggestion."""
    out = _qa(client, "what can my son use for wheezing attacks and a tight chest")
    assert not out["insufficient_evidence"], out["answer"]
    assert "KG:DRUGBANK:DB01001-TREATS-DOID:2841" in _cited(out), out["citations"]
    assert out["answer"].startswith("Read the question as about asthma: of the conditions"), out["answer"]
    assert any(e["id"] == "DOID:2841" and e["method"] == "condition" for e in out["linked_entities"])
    graph = client.app.state.container.graph  # type: ignore[attr-defined]
    # a feature of the entry the same as the condition, reached from an ancestor the question names
    assert corroborating_feature(graph, "DOID:2841", ["HP:0001945", "HP:0002795"]) == ("HP:0002795", "Wheezing")
    assert corroborating_feature(graph, "DOID:2841", ["SYMP:0000604"]) == ("SYMP:0000604", "wheezing")
    assert corroborating_feature(graph, "DOID:4481", ["SYMP:0000139", "HP:0001742"]) is None


def test_findings_are_read_as_the_disease_ranked_first_for_them_when_it_has_drugs(client: TestClient) -> None:
    """A question that asks what treats a patient's findings is read as the disease the differential
    ranks first for them (Orphanet's Kawasaki disease, the same as the Disease Ontology's, whose drug
    answers), in the open; a first-ranked disease with no drugs leaves it unread: a lower-ranked one
    that has drugs is never put in its place."""
    out = _qa(client, "what treatment for a child with a fever, red eyes and a strawberry tongue")
    assert _cited(out)[0] == "KG:DRUGBANK:DB00945-TREATS-DOID:13378", out["answer"]
    assert out["answer"].startswith(
        "Read the question as about Kawasaki disease: the disease ranked first for the findings it names"
    ), out["answer"]
    reading = [e for e in out["linked_entities"] if e["method"] == "condition"]
    assert [e["id"] for e in reading] == ["DOID:13378"] and reading[0]["score"] == 1.0, out["linked_entities"]
    out = _qa(client, "what treatment for a child with a strawberry tongue and hypopigmented skin patches")
    assert {"HP:0031042", "HP:0001053"} <= {e["id"] for e in out["linked_entities"]}, out["linked_entities"]
    assert not [e for e in out["linked_entities"] if e["method"] == "condition"], out["linked_entities"]
    assert not any("DB00945" in c for c in _cited(out)), out["answer"]


def test_a_co_mention_never_answers_a_what_question_alone(client: TestClient) -> None:
    out = _qa(client, "Which genes are associated with diabetes mellitus?")
    assert not any("CO_MENTIONED" in c for c in _cited(out)), out["answer"]
    assert out["insufficient_evidence"], out["answer"]
    # nor a question that asks for another relation without a what ("drugs after a stroke")
    drugs = _qa(client, "genes behind diabetes mellitus?")
    assert drugs["insufficient_evidence"] and not _cited(drugs), drugs["answer"]
    # asked whether they are mentioned together, the co-mention is the answer
    asked = _qa(client, "Is TET2 mentioned together with diabetes mellitus?")
    assert _cited(asked)[0] == "KG:NCBIGene:54790-CO_MENTIONED-DOID:9351"
    assert asked["answer"].startswith("TET2 is mentioned in the literature together with diabetes mellitus")


def test_a_question_about_two_things_is_answered_only_by_what_relates_them(client: TestClient) -> None:
    """The store's abstracts name Marfan syndrome, and one of them losartan with it; none names
    lamotrigine, and no fact of the graph joins lamotrigine and Marfan syndrome."""
    unrelated = _qa(client, "Is lamotrigine effective in Marfan syndrome?")
    assert unrelated["insufficient_evidence"] and not _cited(unrelated), unrelated["answer"]
    assert "relates lamotrigine and Marfan syndrome" in unrelated["answer"]
    related = _qa(client, "Does losartan slow aortic root dilatation in Marfan syndrome?")
    assert _cited(related)[0] == "PMID:24102121#s0", related["answer"]
    # what an LLM is handed: the passage that says how before the co-mention that says they met
    handed = [r["id"] for r in related["retrieved"]]
    co_mention = "KG:DRUGBANK:DB00678-CO_MENTIONED-OMIM:154700"
    assert co_mention in handed and handed.index("PMID:24102121#s0") < handed.index(co_mention), handed
    assert not any(c.startswith("PMID:20591885") for c in _cited(related)), related["answer"]


def test_features_come_by_frequency_then_specificity(client: TestClient) -> None:
    """Marfan syndrome's HPO annotations: arachnodactyly and aortic root aneurysm very frequent,
    ectopia lentis frequent, myopia without a frequency."""
    answer = _qa(client, "What are the features of Marfan syndrome?")["answer"]
    positions = {n: answer.find(n) for n in ("Arachnodactyly", "Aortic root aneurysm", "Ectopia lentis", "Myopia")}
    assert all(p >= 0 for p in positions.values()), answer
    assert max(positions["Arachnodactyly"], positions["Aortic root aneurysm"]) < positions["Ectopia lentis"]
    assert positions["Ectopia lentis"] < positions["Myopia"]
    sentence = re.split(r"(?<=\])\. ", answer)[0]
    assert sentence.startswith("Marfan syndrome has phenotype")


def test_features_are_those_of_the_named_entity_not_of_the_diseases_it_is_one_of(client: TestClient) -> None:
    """ "features of X" is answered with X's phenotypes; a phenotype named there is no disease with
    features, and the diseases that have it are not its features."""
    out = _qa(client, "What are the features of Microcephaly-epilepsy syndrome?")
    features = {"KG:OMIM:100001-HAS_PHENOTYPE-HP:0001250", "KG:OMIM:100001-HAS_PHENOTYPE-HP:0000252"}
    assert set(_cited(out)[:2]) == features
    phenotype = _qa(client, "What are the features of hypotonia?")
    assert not phenotype["answer"].startswith("Hypotonia is a phenotype of"), phenotype["answer"]
    assert phenotype["insufficient_evidence"], phenotype["answer"]
    # asked the other way round, the diseases that have it answer
    diseases = _qa(client, "Which diseases have hypotonia?")
    assert _cited(diseases)[0] == "KG:OMIM:100002-HAS_PHENOTYPE-HP:0001252", diseases["answer"]


def test_a_vignette_in_everyday_words_goes_to_the_differential(client: TestClient) -> None:
    out = _qa(client, "my kid has fits and a small head, what could it be")
    methods = {e["id"]: e["method"] for e in out["linked_entities"]}
    assert methods["HP:0001250"] == "lay" and methods["HP:0000252"] == "lexicon"
    assert out["differential"][0]["disease"] == "OMIM:100001"
    assert out["answer"].startswith("Diseases ranked by similarity")
    # words no vocabulary holds reach the finding through the phrase index (Microcephaly's "Small head")
    out = _qa(client, "my kid has fits and a tiny head, what could it be")
    methods = {e["id"]: e["method"] for e in out["linked_entities"]}
    assert methods["HP:0001250"] == "lay" and methods["HP:0000252"] == "vector", out["linked_entities"]
    assert out["differential"][0]["disease"] == "OMIM:100001"
    # a vignette's words that ask for a relation ("what helps") read no finding as a condition: its
    # findings are the patient's, ranked as they are
    out = _qa(client, "my kid has fits, a small head and panic attacks, what could it be and what helps")
    assert out["differential"] and not [e for e in out["linked_entities"] if e["method"] == "condition"]


def test_a_diseases_subtypes_are_one_entry_of_the_differential(client: TestClient) -> None:
    """Two subtypes the Disease Ontology maps to one class are one entry, named by the class, each with its
    own rank and cited matches; the next diseases are entries of their own (those that match no observed
    phenotype are ranked, not listed in the answer)."""
    out = _qa(client, "Child with seizures and microcephaly. What is the most likely diagnosis?")
    rows = [(d["entry"], d["rank"], d["disease"], (d["group"] or {}).get("id")) for d in out["differential"]]
    assert rows == [
        (1, 1, "OMIM:100001", "DOID:0060999"),
        (1, 2, "OMIM:100003", "DOID:0060999"),
        (2, 3, "OMIM:154700", None),
        (3, 4, "OMIM:100002", None),
        # every annotated disease is ranked: those of the findings-read test above, matching nothing here
        (4, 5, "ORPHA:2331", None),
        (5, 6, "ORPHA:99999", None),
    ]
    assert out["differential"][0]["group"]["name"] == "syndromic microcephaly with epilepsy"
    answer = out["answer"]
    assert "1. Syndromic microcephaly with epilepsy (DOID:0060999), 2 of the diseases ranked: " in answer, answer
    second = "Microcephaly-epilepsy syndrome 2 (OMIM:100003, rank 2), with Seizure"
    assert answer.endswith(f"{second} [KG:OMIM:100003-HAS_PHENOTYPE-HP:0001250].")
    cited = set(_cited(out))
    assert {"KG:OMIM:100001-HAS_PHENOTYPE-HP:0001250", "KG:OMIM:100003-HAS_PHENOTYPE-HP:0001250"} <= cited
