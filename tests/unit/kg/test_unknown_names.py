"""Which words of a question are names medkg does not know, and which names of the graph are offered
in their place as questions (real wordfreq lists, real rapidfuzz, spaCy's English tokenizer)."""

from __future__ import annotations

import spacy

from kg.unknown_names import UnknownNames

TERMS = {"losartan": ("DRUGBANK:DB00678",), "valproic acid": ("DRUGBANK:DB00313",), "marfan syndrome": ("OMIM:154700",)}
NAMES = {"DRUGBANK:DB00678": "Losartan", "DRUGBANK:DB00313": "Valproic acid", "OMIM:154700": "Marfan syndrome"}
nlp = spacy.blank("en")


def find(text: str, linked: list[tuple[int, int]] = (), known=lambda _: False):  # noqa: ANN001, ANN201
    finder = UnknownNames(TERMS, lambda key: TERMS.get(key, ()))
    return finder.find(nlp(text), linked, known, lambda ids: {i: NAMES[i] for i in ids if i in NAMES})


def test_rare_words_in_no_name_are_unknown_and_close_names_are_suggested() -> None:
    (found,) = find("Is lozartan safe with valproic acid?")
    assert (found.text, found.start, found.end) == ("lozartan", 3, 11)
    assert found.suggestions == (("DRUGBANK:DB00678", "Losartan"),)
    (found,) = find("What is the dose of zorblaxitol?")
    assert found.text == "zorblaxitol" and found.suggestions == ()


def test_everyday_and_clinical_words_names_of_the_graph_and_short_forms_are_not() -> None:
    assert find("my kid has fits and a small head, what could it be?") == []
    assert find("recommended dose of losartan for high blood pressure in pregnancy") == []
    assert find("Is MRI or CT better for the aorta?") == []  # short forms: too ambiguous to call unknown
    assert [u.text for u in find("Is FBX9 or XQ7 involved?")] == ["FBX9", "XQ7"]  # gene-like, with digits


def test_what_the_linker_linked_or_the_literature_holds_is_known() -> None:
    text = "Is lozartan safe?"
    assert find(text, linked=[(3, 11)]) == []  # linked by meaning (the vector index)
    assert find(text, known=lambda word: word == "lozartan") == []  # in an indexed passage
