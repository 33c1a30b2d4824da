"""Which questions go to the differential ranking (those asking what the patient has), and whether the
graph's facts or the literature lead the evidence."""

import pytest

from kg.retrieval.retriever import asks_for_diagnosis


@pytest.mark.parametrize(
    "question",
    [
        "Child with seizures, microcephaly and hypotonia: which diagnoses?",
        "What is the differential diagnosis of seizures and hypotonia in an infant?",
        "A child has seizures, microcephaly and hypotonia. What is the most likely syndrome?",
        "A child has seizures, microcephaly and hypotonia. What could be causing this?",
        "Which rare genetic disorders present with arachnodactyly and ectopia lentis?",
        "An infant presents with hypotonia and seizures; what could it be?",
        # clinical vignettes: who the patient is, then what they have
        "Boy with progressive proximal muscle weakness, calf pseudohypertrophy and elevated creatine kinase",
        "Girl with developmental regression, hand stereotypies and acquired microcephaly",
        "A 3-year-old girl has seizures, microcephaly and hypotonia.",
        "my kid has fits and a small head, what could it be",
        "Boy with seizures and microcephaly. Is this a genetic syndrome? What is the most likely diagnosis?",
        # who the patient is, described first
        "Teenage girl with tall stature, long fingers, lens dislocation and aortic root dilation",
        "A 45-year-old obese man with chorea, dementia and depression",
        "Previously healthy woman with fever, rash and arthralgia",
        "Middle-aged man with skin hyperpigmentation, diabetes mellitus, cirrhosis and arthropathy",
        "Adult with cerebellar hemangioblastoma, retinal angioma and phaeochromocytoma; no café-au-lait spots",
        "An older woman with chorea and dementia",
    ],
)
def test_diagnostic_questions_go_to_the_ranking(question: str) -> None:
    assert asks_for_diagnosis(question)


@pytest.mark.parametrize(
    "question",
    [
        "Which drug is first-line for a child who presents with seizures and hypotonia?",
        "What treatment options exist for a child diagnosed with seizures and hypotonia?",
        "How is microcephaly diagnosed in a child with seizures?",
        "Which tests confirm the diagnosis in a child with seizures and hypotonia?",
        "What is the prognosis of a child diagnosed with seizures and microcephaly?",
        "Which phenotypes are characteristic of Marfan syndrome?",
        "Boy with seizures and microcephaly: which drug is first-line?",
        "Patients with Marfan syndrome have aortic root aneurysm and ectopia lentis",
        # a vignette that asks a yes/no question of its own (PubMedQA's)
        "A patient with myelomeningocele: is untethering necessary prior to scoliosis correction?",
        "Child with seizures and microcephaly. Should an MRI be repeated?",
        "Adult with type 2 diabetes: which drug is first-line?",
        "Middle-aged man with hypertension. Should he take aspirin?",
    ],
)
def test_treatment_test_and_other_questions_do_not(question: str) -> None:
    assert not asks_for_diagnosis(question)


def _fact(type_: str, answers: bool = False, on_path: bool = False):  # noqa: ANN202 - EvidenceItem
    from kg.retrieval.evidence import EvidenceItem

    meta = {"type": type_, "answers": answers, "on_path": on_path}
    return EvidenceItem(id=f"KG:A-{type_}-B", kind="kg", text="", title=None, url=None, score=0.5, meta=meta)


def test_a_co_mention_on_a_path_does_not_put_the_facts_before_the_literature() -> None:
    from kg.retrieval.retriever import facts_lead

    assert not facts_lead([_fact("CO_MENTIONED", on_path=True), _fact("TREATS")])
    assert facts_lead([_fact("CO_MENTIONED", on_path=True), _fact("TREATS", on_path=True)])
    assert facts_lead([_fact("CO_MENTIONED", answers=True, on_path=True)])  # "is X mentioned with Y?"
    assert facts_lead([_fact("ASSOCIATED_WITH", answers=True)]) and not facts_lead([])
