"""A fact's text names HPO's qualifiers: frequency, onset and evidence code by their names, never ids."""

from __future__ import annotations

from kg.annotation_terms import describe_frequencies
from kg.model import Relation
from kg.retrieval.facts import render_fact

NAMES = {"OMIM:154700": "Marfan syndrome", "HP:0001166": "Arachnodactyly"}


def test_frequency_onset_and_evidence_code_are_shown_by_name() -> None:
    rel = Relation(
        subject="OMIM:154700", type="HAS_PHENOTYPE", object="HP:0001166", source="hpo:2025-01-16",
        evidence={"frequency": ["HP:0040281"], "onset": ["HP:0011463"], "evidence_codes": ["PCS"],
                  "pmids": ["PMID:20591885"]},
    )  # fmt: skip
    text = render_fact(rel, NAMES)
    assert text == (
        "Marfan syndrome has phenotype Arachnodactyly (frequency very frequent (80-99%); childhood onset; "
        "evidence: published clinical study; source hpo:2025-01-16; PMID:20591885)"
    )
    assert "HP:004" not in text and "['" not in text


def test_case_counts_and_percentages_read_as_such() -> None:
    assert describe_frequencies(["3/10", "HP:0040283"]) == "3 of 10 patients, occasional (5-29%)"
    assert describe_frequencies("25%") == "25%"
