"""Which words of a question are names medkg does not know, and which names of the graph are offered
in their place as questions (real wordfreq lists, real rapidfuzz, spaCy's English tokenizer)."""

from __future__ import annotations

import spacy

from kg.unknown_names import UnknownNames

TERMS = {"losartan": ("DRUGBANK:DB00678",), "valproic acid": ("DRUGBANK:DB00313",), "marfan syndrome": ("OMIM:154700",)}
NAMES = {"DRUGBANK:DB00678": "Losartan", "DRUGBANK:DB00313": "Valproic acid", "OMIM:154700": "Marfan syndrome"}
nlp = spacy.blank("en")


DEFINING = {"tall", "stature", "gravida", "noncontributory"}


def find(text: str, linked: list[tuple[int, int]] = (), known=lambda _: False):  # noqa: ANN001, ANN201
    finder = UnknownNames(TERMS, lambda key: TERMS.get(key, ()), DEFINING)
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
    assert find("Is MRI or CT better for the aorta? HEENT normal.") == []  # short forms: too ambiguous
    assert [u.text for u in find("Is FBX9 or XQ7 involved?")] == ["FBX9", "XQ7"]  # gene-like, with digits
    # words of clinical English that everyday English lacks: prefixed known words, words of definitions
    assert find("The primigravida's history is noncontributory; interscapular pain.") == []


def test_rare_words_built_like_drug_names_are_names() -> None:
    """Real drugs the graph does not hold are unknown to medkg too; rare everyday words are not."""
    assert [u.text for u in find("Is azithromycin or ceftriaxone better for it?")] == ["azithromycin", "ceftriaxone"]
    assert find("The thermostat and the lighthouse keeper") == []


def test_what_the_linker_linked_or_the_literature_holds_is_known() -> None:
    text = "Is lozartan safe?"
    assert find(text, linked=[(3, 11)]) == []  # linked by meaning (the vector index)
    assert find(text, known=lambda word: word == "lozartan") == []  # in an indexed passage


def test_a_misspelling_is_spelt_like_the_name_it_was_linked_to_and_a_guess_is_not() -> None:
    finder = UnknownNames(TERMS, lambda key: TERMS.get(key, ()), DEFINING)
    assert finder.spelled_like("lozartan", ["DRUGBANK:DB00678"])  # Losartan
    assert not finder.spelled_like("zorblaxitol", ["DRUGBANK:DB00678"])  # a guess by meaning
    assert not finder.spelled_like("lozartan", ["DRUGBANK:DB00313"])  # close to another entity's name
    assert finder.unknown_word("zorblaxitol") and not finder.unknown_word("losartan")


def test_an_eponym_nobody_here_knows_is_unknown_whatever_its_names_mean_in_english() -> None:
    """ "Drake" and "Lowe" are English words, "Halvorsen" and "Pendergrast" in no name of the graph: the
    eponym is unknown as a whole (Marfan syndrome, linked, is not; nor a name the literature holds)."""
    assert [u.text for u in find("Which gene is mutated in Halvorsen-Drake syndrome?")] == ["Halvorsen-Drake"]
    assert [u.text for u in find("What are the symptoms of Pendergrast Lowe disease?")] == ["Pendergrast Lowe"]
    assert find("Which gene is mutated in Marfan syndrome?", linked=[(25, 40)]) == []
    assert find("Which gene is mutated in Halvorsen-Drake syndrome?", known=lambda w: w in {"Halvorsen", "Drake"}) == []
    # a capitalised word before "sequence" or after a stop word is no eponym
    assert find("The Kozak sequence of the gene") == [] and find("Syndrome of the thermostat") == []
