"""Which questions go to the differential ranking: those asking what the patient has."""

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
    ],
)
def test_treatment_test_and_other_questions_do_not(question: str) -> None:
    assert not asks_for_diagnosis(question)
