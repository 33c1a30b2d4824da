"""Which things a question names, and whether an article names two of them (kg/retrieval/joint.py)."""

from __future__ import annotations

from dataclasses import dataclass

import Stemmer

from kg.retrieval.joint import concepts_named, question_concepts
from kg.text_index import bm25_tokenize

_STEMMER = Stemmer.Stemmer("english")


def _terms(text: str) -> frozenset[str]:  # the retriever's words: the passage index's BM25 tokenizer
    return frozenset(bm25_tokenize([text], _STEMMER, return_ids=False)[0])


@dataclass
class _Link:
    id: str
    name: str
    mention: str
    method: str = "lexicon"


LINKED = [
    _Link("DRUGBANK:DB00945", "Acetylsalicylic acid", "aspirin"),
    _Link("DOID:9256", "colorectal cancer", "colorectal cancer"),
    _Link("OMIM:114500", "Colorectal cancer", "colorectal cancer"),
    _Link("MESH:D012307", "Risk Factors", "Are there risk factors", method="vector"),  # a phrase's nearest entity
]
GROUPS = [("DRUGBANK:DB00945",), ("DOID:9256", "OMIM:114500"), ("MESH:D012307",)]


def test_one_concept_per_phrase_the_question_names_by_a_name() -> None:
    concepts = question_concepts(LINKED, GROUPS, _terms, {"DOID:9256": ["colon cancer"]})
    assert [c.label for c in concepts] == ["aspirin", "colorectal cancer"]  # not the vector index's guess
    assert _terms("colon cancer") in concepts[1].names  # a linked entity's synonym names it too


def test_an_article_names_a_concept_by_any_of_its_names_in_any_inflection() -> None:
    concepts = question_concepts(LINKED, GROUPS, _terms)
    both = _terms("Acetylsalicylic acid use and the incidence of colorectal cancers in a cohort")
    one = _terms("Colorectal cancer is the second most common cancer in the world.")
    assert concepts_named(both, concepts) == 2
    assert concepts_named(one, concepts) == 1
    # every word of a name must be there: "cancer" alone is not colorectal cancer
    assert concepts_named(_terms("aspirin and cancer"), concepts) == 1
